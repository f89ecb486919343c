/* recipe.c - what every seed recipe shares: the slot's Redis connection,
 * the retry loop around one attempt, the unfenced section, the release. */
#include "claim/recipes/recipe.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uuid/uuid.h>

#include "claim/fault.h"
#include "claim/section.h"
#include "core/metrics.h"

static struct timeval ms_to_tv(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

/* The first --redis address that accepts a connection, with both timeouts
 * set: every network call of a recipe is bounded. */
static int connect_first(worker *w, const app_config *cfg, char *detail, size_t len)
{
    snprintf(detail, len, "no Redis address accepted a connection");
    for (size_t i = 0; i < cfg->n_redis; i++) {
        char host[256], why[DLOCK_ERRSTR_LEN];
        int port = 0;
        if (dlock_addr_parse(cfg->redis[i], host, sizeof host, &port, why, sizeof why) != DLOCK_OK) {
            snprintf(detail, len, "%s", why);
            continue;
        }
        struct timeval ct = ms_to_tv(cfg->redis_connect_ms);
        redisContext *c = port == 0 ? redisConnectUnixWithTimeout(host, ct) : redisConnectWithTimeout(host, port, ct);
        if (c == NULL) {
            snprintf(detail, len, "%s: out of memory", cfg->redis[i]);
            continue;
        }
        if (c->err != 0 || redisSetTimeout(c, ms_to_tv(cfg->redis_timeout_ms)) != REDIS_OK) {
            snprintf(detail, len, "%s: %s", cfg->redis[i], c->err ? c->errstr : "cannot set the timeout");
            redisFree(c);
            continue;
        }
        w->redis = c;
        return 0;
    }
    return -1;
}

static redisReply *command_v(worker *w, const app_config *cfg, char *detail, size_t len, const char *fmt,
                             va_list ap)
{
    if (w->redis == NULL && connect_first(w, cfg, detail, len) != 0)
        return NULL;
    redisReply *r = redisvCommand(w->redis, fmt, ap);
    if (r == NULL) {
        /* An I/O error or a timeout leaves the stream out of step: drop it. */
        snprintf(detail, len, "redis: %s", w->redis->errstr);
        redisFree(w->redis);
        w->redis = NULL;
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(detail, len, "redis: %.*s", (int)r->len, r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

redisReply *recipe_command(worker *w, const app_config *cfg, char *detail, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = command_v(w, cfg, detail, len, fmt, ap);
    va_end(ap);
    return r;
}

void recipe_command_quiet(worker *w, const app_config *cfg, const char *fmt, ...)
{
    char detail[128];
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = command_v(w, cfg, detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (r != NULL)
        freeReplyObject(r);
}

int64_t recipe_wall_ms(const app_config *cfg)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + (int64_t)cfg->clock_offset_ms;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    /* An interrupted pause is merely a shorter one: the loop is bounded by its deadline. */
    (void)nanosleep(&ts, NULL);
}

claim_result recipe_claim(const recipe *r, worker *w, const app_config *cfg, int64_t coupon_id,
                          const char *user_id, claim_out *out)
{
    char key[64], token[37];
    uuid_t raw;
    db_claim_req req;
    lock_error_kind kind;

    out->fence = 0;
    snprintf(key, sizeof key, "lock:coupon:%" PRId64, coupon_id);
    uuid_generate_random(raw);
    uuid_unparse_lower(raw, token);

    int64_t t0 = metrics_now_us();
    int64_t deadline_us = t0 + (int64_t)cfg->lock_wait_ms * 1000;
    dlock_err e;
    for (;;) {
        e = r->lock(w, cfg, key, token, out->detail, sizeof out->detail);
        if (e != DLOCK_ERR_TAKEN || metrics_now_us() >= deadline_us)
            break;
        sleep_ms(cfg->lock_retry_ms);
    }
    metrics_lock_wait_us(metrics_now_us() - t0);
    if (e != DLOCK_OK) {
        if (e == DLOCK_ERR_TAKEN)
            snprintf(out->detail, sizeof out->detail, "held by another client");
        claim_result res = claim_from_lock(e, &kind);
        metrics_lock_error(kind);
        return res;
    }
    metrics_lock_acquired();
    if (!r->crashes_inside)
        fault_lock_acquired(cfg);

    memset(&req, 0, sizeof req);
    req.user_id = user_id;
    /* No fence: none of the recipes hands one out, so the store cannot tell
     * a stale holder from a current one. */
    (void)section_run(w, cfg, coupon_id, DB_FENCE_OFF, 0, &req, 1);
    r->unlock(w, cfg, key, token);
    return claim_from_req(w, &req, out);
}

lock_health recipe_health(worker *w, size_t *nodes_up, size_t *nodes)
{
    char detail[128];

    /* The recipes know one node: the first --redis address that answers. */
    *nodes = 1;
    *nodes_up = 0;
    redisReply *r = recipe_command(w, w->cfg, detail, sizeof detail, "PING");
    if (r == NULL)
        return LOCK_HEALTH_DOWN;
    freeReplyObject(r);
    *nodes_up = 1;
    return LOCK_HEALTH_OK;
}
