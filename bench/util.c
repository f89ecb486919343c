/* util.c - dlock-bench helpers: start gate, worker errors, plain hiredis calls. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "bench.h"

void bench_pthread_check(int rc, const char *what)
{
    if (rc == 0)
        return;
    fprintf(stderr, "dlock-bench: %s: %s\n", what, strerror(rc));
    abort();
}

int bench_wait_start(bench_worker *w)
{
    bench_shared *sh = w->sh;
    bench_pthread_check(pthread_mutex_lock(&sh->mu), "start gate: lock");
    sh->ready++;
    bench_pthread_check(pthread_cond_broadcast(&sh->cond), "start gate: broadcast");
    while (sh->state == BENCH_WAIT)
        bench_pthread_check(pthread_cond_wait(&sh->cond, &sh->mu), "start gate: wait");
    int go = sh->state == BENCH_GO;
    bench_pthread_check(pthread_mutex_unlock(&sh->mu), "start gate: unlock");
    return go;
}

int bench_sleep(bench_worker *w, uint32_t ms)
{
    char why[128];
    if (cm_sleep_ms(ms) == 0)
        return 0;
    int e = errno;
    /* strerror_r, not strerror: other workers may be failing at the same time. */
    if (strerror_r(e, why, sizeof why) != 0)
        snprintf(why, sizeof why, "errno %d", e);
    bench_fail(w, "worker %d: sleeping %" PRIu32 " ms: %s", w->id, ms, why);
    return -1;
}

void bench_fail(bench_worker *w, const char *fmt, ...)
{
    if (w->failed)
        return;
    w->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
}

redisContext *bench_redis_connect(int port, char *err, size_t errlen)
{
    struct timeval ct = {.tv_sec = BENCH_CONNECT_TIMEOUT_MS / 1000,
                         .tv_usec = (BENCH_CONNECT_TIMEOUT_MS % 1000) * 1000};
    struct timeval rt = {.tv_sec = BENCH_COMMAND_TIMEOUT_MS / 1000,
                         .tv_usec = (BENCH_COMMAND_TIMEOUT_MS % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(BENCH_HOST, port, ct);
    if (c == NULL) {
        snprintf(err, errlen, "%s:%d: out of memory", BENCH_HOST, port);
        return NULL;
    }
    if (c->err) {
        snprintf(err, errlen, "%s:%d: %s", BENCH_HOST, port, c->errstr);
        redisFree(c);
        return NULL;
    }
    /* Without a read timeout a stopped server would hang the bench forever. */
    if (redisSetTimeout(c, rt) != REDIS_OK) {
        snprintf(err, errlen, "%s:%d: cannot set timeout: %s", BENCH_HOST, port, c->errstr);
        redisFree(c);
        return NULL;
    }
    return c;
}

redisReply *bench_redis_cmd(redisContext *c, char *err, size_t errlen, int argc, const char **argv)
{
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    if (r == NULL) {
        snprintf(err, errlen, "%s: %s", argv[0], c->err ? c->errstr : "no reply");
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "%s: %s", argv[0], r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

void bench_lock_options(const bench_config *cfg, dlock_options *o, char (*addr_buf)[BENCH_ADDR_LEN],
                        const char **addrs)
{
    dlock_options_init(o);
    for (size_t i = 0; i < cfg->n_ports; i++) {
        snprintf(addr_buf[i], BENCH_ADDR_LEN, "%s%s:%d", cfg->tls_ca != NULL ? "rediss://" : "",
                 BENCH_HOST, cfg->ports[i]);
        addrs[i] = addr_buf[i];
    }
    o->addrs = addrs;
    o->n_addrs = cfg->n_ports;
    if (cfg->retry == BENCH_RETRY_TUNED) {
        /* Short fixed sleeps (3 +- 2 ms) instead of growing backoff: a freed
         * lock is noticed sooner, at the price of more failed attempts. */
        o->retry_fixed_ms = 3;
        o->retry_jitter_ms = 2;
        o->wake_on_release = 0;
    }
    /* The polling baseline: backoff with jitter, no wake on release. */
    if (cfg->retry == BENCH_RETRY_POLL)
        o->wake_on_release = 0;
    /* The certificate is checked against the CA and must name BENCH_HOST
     * (an IP address: the certificate needs IP:127.0.0.1 among its names). */
    o->tls_ca_file = cfg->tls_ca;
    o->tls_cert_file = cfg->tls_cert;
    o->tls_key_file = cfg->tls_key;
}
