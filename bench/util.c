/* util.c - dlock-bench helpers: clock, sleep, start gate, worker errors, plain hiredis calls. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "bench.h"

int64_t bench_now_ns(void)
{
    struct timespec ts;
    /* Monotonic: a wall-clock step during a run must not bend latencies or the end time. */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void bench_sleep_ms(uint32_t ms)
{
    if (ms == 0)
        return;
    struct timespec req = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    /* nanosleep leaves the remainder in req on EINTR: a signal must not shorten the hold. */
    while (nanosleep(&req, &req) != 0 && errno == EINTR) {
    }
}

int bench_wait_start(bench_worker *w)
{
    bench_shared *sh = w->sh;
    pthread_mutex_lock(&sh->mu);
    sh->ready++;
    pthread_cond_broadcast(&sh->cond);
    while (sh->state == BENCH_WAIT)
        pthread_cond_wait(&sh->cond, &sh->mu);
    int go = sh->state == BENCH_GO;
    pthread_mutex_unlock(&sh->mu);
    return go;
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
