/* conn.c - the recipes' Redis connection: the first address that accepts,
 * both timeouts set (every call is bounded), dropped on any I/O error. */
#include "recipes_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlock.h"

recipe_conn *recipe_conn_new(const char *const *addrs, size_t n_addrs, int connect_ms, int command_ms)
{
    recipe_conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->addrs = calloc(n_addrs ? n_addrs : 1, sizeof *c->addrs);
    if (c->addrs == NULL) {
        free(c);
        return NULL;
    }
    for (size_t i = 0; i < n_addrs; i++) {
        c->addrs[i] = strdup(addrs[i]);
        c->n_addrs = i + 1; /* freed by recipe_conn_free on failure */
        if (c->addrs[i] == NULL) {
            recipe_conn_free(c);
            return NULL;
        }
    }
    c->connect_ms = connect_ms;
    c->command_ms = command_ms;
    return c;
}

void recipe_conn_free(recipe_conn *c)
{
    if (c == NULL)
        return;
    if (c->ctx != NULL)
        redisFree(c->ctx);
    for (size_t i = 0; i < c->n_addrs; i++)
        free(c->addrs[i]);
    free(c->addrs);
    free(c);
}

static struct timeval ms_to_tv(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

static int connect_first(recipe_conn *c, char *detail, size_t len)
{
    snprintf(detail, len, "no Redis address accepted a connection");
    for (size_t i = 0; i < c->n_addrs; i++) {
        char host[256], why[DLOCK_ERRSTR_LEN];
        int port = 0;
        /* libdlock's own address rules: one syntax across the project. */
        if (dlock_addr_parse(c->addrs[i], host, sizeof host, &port, why, sizeof why) != DLOCK_OK) {
            snprintf(detail, len, "%s", why);
            continue;
        }
        if (port < 0) {
            /* The seed recipes talk to one fixed Redis: no Sentinel. */
            snprintf(detail, len, "%s: the recipes do not resolve sentinel:// addresses", c->addrs[i]);
            continue;
        }
        struct timeval ct = ms_to_tv(c->connect_ms);
        redisContext *ctx = port == 0 ? redisConnectUnixWithTimeout(host, ct) : redisConnectWithTimeout(host, port, ct);
        if (ctx == NULL) {
            snprintf(detail, len, "%s: out of memory", c->addrs[i]);
            continue;
        }
        if (ctx->err != 0 || redisSetTimeout(ctx, ms_to_tv(c->command_ms)) != REDIS_OK) {
            snprintf(detail, len, "%s: %s", c->addrs[i], ctx->err ? ctx->errstr : "cannot set the timeout");
            redisFree(ctx);
            continue;
        }
        /* redis://user:password@host: the same AUTH libdlock sends. */
        char user[256], pass[256];
        if (dlock_addr_credentials(c->addrs[i], user, sizeof user, pass, sizeof pass, why,
                                   sizeof why) == DLOCK_OK && pass[0] != '\0') {
            redisReply *r = user[0] != '\0' ? redisCommand(ctx, "AUTH %s %s", user, pass)
                                            : redisCommand(ctx, "AUTH %s", pass);
            int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
            snprintf(detail, len, "%s: AUTH %s", c->addrs[i],
                     r == NULL ? ctx->errstr : r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            if (r != NULL)
                freeReplyObject(r);
            memset(pass, 0, sizeof pass);
            if (!ok) {
                redisFree(ctx);
                continue;
            }
        }
        c->ctx = ctx;
        return 0;
    }
    return -1;
}

static redisReply *command_v(recipe_conn *c, char *detail, size_t len, const char *fmt, va_list ap)
{
    if (c->ctx == NULL && connect_first(c, detail, len) != 0)
        return NULL;
    redisReply *r = redisvCommand(c->ctx, fmt, ap);
    if (r == NULL) {
        /* An I/O error or a timeout leaves the stream out of step: drop it. */
        snprintf(detail, len, "redis: %s", c->ctx->errstr);
        redisFree(c->ctx);
        c->ctx = NULL;
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(detail, len, "redis: %.*s", (int)r->len, r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

redisReply *rconn_command(recipe_conn *c, char *detail, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = command_v(c, detail, len, fmt, ap);
    va_end(ap);
    return r;
}

void rconn_command_quiet(recipe_conn *c, const char *fmt, ...)
{
    char detail[128];
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = command_v(c, detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (r != NULL)
        freeReplyObject(r);
}

int reply_is_one(const redisReply *r)
{
    return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
}

int reply_is_status(const redisReply *r)
{
    return r->type == REDIS_REPLY_STATUS;
}

recipe_result rconn_lock_command(recipe_conn *c, char *detail, size_t len, int (*won)(const redisReply *),
                                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = command_v(c, detail, len, fmt, ap);
    va_end(ap);
    if (r == NULL)
        return RECIPE_ERROR;
    int ours = won(r);
    freeReplyObject(r);
    return ours ? RECIPE_LOCKED : RECIPE_TAKEN;
}

void recipe_unlock_del(recipe_conn *c, const recipe_params *p, const char *key, const recipe_hold *hold)
{
    (void)p;
    (void)hold; /* the token is not compared: that is the flaw where it matters */
    rconn_command_quiet(c, "DEL %s", key);
}

void recipe_unlock_token(recipe_conn *c, const recipe_params *p, const char *key, const recipe_hold *hold)
{
    (void)p;
    rconn_command_quiet(c, "EVAL %s 1 %s %s", RECIPE_UNLOCK_LUA, key, hold->token);
}

int recipe_conn_ping(recipe_conn *c, char *detail, size_t len)
{
    redisReply *r = rconn_command(c, detail, len, "PING");
    if (r == NULL)
        return -1;
    freeReplyObject(r);
    return 0;
}

int64_t recipe_wall_ms(const recipe_params *p)
{
    struct timespec ts;
    /* The wall clock on purpose: the recipe trusts it (its flaw). CLOCK_REALTIME
     * cannot fail on Linux; if it ever did, time 0 makes every lock look expired. */
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        ts = (struct timespec){0, 0};
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + p->clock_offset_ms;
}
