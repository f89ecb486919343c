/* raw_worker.c - dlock-bench raw mode: plain hiredis SET NX PX + EVALSHA release, the 2-round-trip limit. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

/* The distlock page's compare-and-delete: without the token check a client
 * whose lock expired would delete the next holder's lock (seed 001). */
static const char RELEASE_LUA[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/* Sends one command to every node, then reads every reply: the nodes work
 * in parallel, so one round costs one round trip, not N (the distlock
 * page's "multiplexing"). replies[i] is NULL only on failure (returns -1). */
static int raw_round(bench_worker *w, redisContext **ctx, size_t n, int argc, const char **argv,
                     redisReply **replies)
{
    int result = -1;
    for (size_t i = 0; i < n; i++)
        replies[i] = NULL;
    for (size_t i = 0; i < n; i++) {
        if (redisAppendCommandArgv(ctx[i], argc, argv, NULL) != REDIS_OK) {
            bench_fail(w, "worker %d: node %zu: %s: %s", w->id, i, argv[0], ctx[i]->errstr);
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        int done = 0;
        while (!done) {
            if (redisBufferWrite(ctx[i], &done) != REDIS_OK) {
                bench_fail(w, "worker %d: node %zu: write: %s", w->id, i, ctx[i]->errstr);
                goto out;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        void *r = NULL;
        if (redisGetReply(ctx[i], &r) != REDIS_OK || r == NULL) {
            /* hiredis 0.14 reports a read timeout as EAGAIN: name the timeout. */
            bench_fail(w, "worker %d: node %zu: %s: %s (command timeout %d ms)", w->id, i,
                       argv[0], ctx[i]->err ? ctx[i]->errstr : "no reply",
                       BENCH_COMMAND_TIMEOUT_MS);
            goto out;
        }
        replies[i] = r;
        if (replies[i]->type == REDIS_REPLY_ERROR) {
            bench_fail(w, "worker %d: node %zu: %s: %s", w->id, i, argv[0], replies[i]->str);
            goto out;
        }
    }
    result = 0;
out:
    if (result != 0) {
        for (size_t i = 0; i < n; i++) {
            if (replies[i] != NULL)
                freeReplyObject(replies[i]);
            replies[i] = NULL;
        }
    }
    return result;
}

static void free_replies(redisReply **replies, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (replies[i] != NULL)
            freeReplyObject(replies[i]);
        replies[i] = NULL;
    }
}

void *bench_raw_worker(void *arg)
{
    bench_worker *w = arg;
    bench_shared *sh = w->sh;
    const bench_config *cfg = sh->cfg;
    const size_t n = cfg->n_ports;
    const size_t quorum = n / 2 + 1;
    redisContext *ctx[DLOCK_MAX_NODES] = {0};
    redisReply *replies[DLOCK_MAX_NODES] = {0};
    char sha[41] = "";
    char key[64];
    char token[DLOCK_TOKEN_LEN];
    char ttl[16];
    char errbuf[BENCH_ERR_LEN];
    int set_up = 0;

    snprintf(key, sizeof key, BENCH_KEY_FMT, w->id);
    snprintf(ttl, sizeof ttl, "%" PRIu32, cfg->ttl_ms);
    for (size_t i = 0; i < n; i++) {
        ctx[i] = bench_redis_connect(cfg->ports[i], errbuf, sizeof errbuf);
        if (ctx[i] == NULL) {
            bench_fail(w, "worker %d: %s", w->id, errbuf);
            goto ready;
        }
    }
    {
        /* Loaded once up front so every measured release is a single EVALSHA. */
        const char *argv[] = {"SCRIPT", "LOAD", RELEASE_LUA};
        if (raw_round(w, ctx, n, 3, argv, replies) != 0)
            goto ready;
        for (size_t i = 0; i < n; i++) {
            if (replies[i]->type != REDIS_REPLY_STRING || replies[i]->len != 40) {
                bench_fail(w, "worker %d: node %zu: SCRIPT LOAD: unexpected reply", w->id, i);
                free_replies(replies, n);
                goto ready;
            }
        }
        memcpy(sha, replies[0]->str, 40);
        sha[40] = '\0';
        free_replies(replies, n);
    }
    set_up = 1;
ready:
    if (!bench_wait_start(w) || !set_up)
        goto out;

    for (uint64_t seq = 0;; seq++) {
        int64_t t0 = cm_now_ns();
        if (t0 >= sh->end_ns)
            break;
        /* Unique per run, worker and cycle: enough for a token-checked
         * release; the library draws 128 random bits instead. */
        snprintf(token, sizeof token, "%016" PRIx64 "%04x%012" PRIx64, sh->run_id,
                 (unsigned)w->id & 0xffffu, seq & UINT64_C(0xffffffffffff));
        const char *set_argv[] = {"SET", key, token, "NX", "PX", ttl};
        if (raw_round(w, ctx, n, 6, set_argv, replies) != 0)
            break;
        size_t won = 0;
        for (size_t i = 0; i < n; i++) {
            if (replies[i]->type == REDIS_REPLY_STATUS && strcmp(replies[i]->str, "OK") == 0)
                won++;
        }
        free_replies(replies, n);
        int64_t t1 = cm_now_ns();
        int hold_failed = won >= quorum && bench_sleep(w, cfg->hold_ms) != 0;
        /* Released everywhere, also after a lost vote (distlock page). */
        const char *del_argv[] = {"EVALSHA", sha, "1", key, token};
        if (raw_round(w, ctx, n, 5, del_argv, replies) != 0)
            break;
        free_replies(replies, n);
        int64_t t2 = cm_now_ns();
        if (hold_failed)
            break;
        w->lock_round_trips += 2;
        if (won < quorum) {
            w->acquire_failures++;
            continue;
        }
        w->successes++;
        cm_hist_record(w->acq, (uint64_t)(t1 - t0) / 1000);
        cm_hist_record(w->cycle, (uint64_t)(t2 - t0) / 1000);
    }
out:
    w->ended_ns = cm_now_ns();
    for (size_t i = 0; i < n; i++) {
        if (ctx[i] != NULL)
            redisFree(ctx[i]);
    }
    return NULL;
}
