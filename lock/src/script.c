/* script.c - the Lua scripts and EVALSHA with the EVAL fallback on
 * NOSCRIPT. */
#include "protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The scripts live in lock/src/lua/, one .lua file each; the head of each
 * file states its KEYS, ARGV, reply and guarantee. The build generates
 * dlock_scripts.h from those files: each body as a C string, and its SHA1
 * (the name EVALSHA uses) computed by CMake from the same bytes. */
#include "dlock_scripts.h"

void dlock__scripts_init(dlock_client *c)
{
    static const char *const bodies[DLOCK__SCRIPT_COUNT] = {DLOCK__LUA_ACQUIRE,
                                                            DLOCK__LUA_EXTEND,
                                                            DLOCK__LUA_FENCE_SYNC,
                                                            DLOCK__LUA_ENTER, DLOCK__LUA_PASS,
                                                            DLOCK__LUA_LEAVE,
                                                            DLOCK__LUA_MULTI_ACQUIRE,
                                                            DLOCK__LUA_MULTI_RELEASE,
                                                            DLOCK__LUA_MULTI_EXTEND,
                                                            DLOCK__LUA_MULTI_FENCE_SYNC,
                                                            DLOCK__LUA_ACQUIRE_EACH,
                                                            DLOCK__LUA_RELEASE_EACH};
    static const char *const shas[DLOCK__SCRIPT_COUNT] = {DLOCK__SHA1_ACQUIRE,
                                                          DLOCK__SHA1_EXTEND,
                                                          DLOCK__SHA1_FENCE_SYNC,
                                                          DLOCK__SHA1_ENTER, DLOCK__SHA1_PASS,
                                                          DLOCK__SHA1_LEAVE,
                                                          DLOCK__SHA1_MULTI_ACQUIRE,
                                                          DLOCK__SHA1_MULTI_RELEASE,
                                                          DLOCK__SHA1_MULTI_EXTEND,
                                                          DLOCK__SHA1_MULTI_FENCE_SYNC,
                                                          DLOCK__SHA1_ACQUIRE_EACH,
                                                          DLOCK__SHA1_RELEASE_EACH};

    for (int i = 0; i < DLOCK__SCRIPT_COUNT; i++) {
        c->scripts[i].body = bodies[i];
        memcpy(c->scripts[i].sha, shas[i], sizeof(c->scripts[i].sha));
    }
}


static void build_argv(const dlock_client *c, dlock__script_call *call, int by_sha,
                       const char *const *keys, int nkeys, const char *const *args, int nargs)
{
    int argc = 0;
    dlock__script_id id = call->id;

    call->argv[argc] = by_sha ? "EVALSHA" : "EVAL";
    call->argvlen[argc] = strlen(call->argv[argc]);
    argc++;
    call->argv[argc] = by_sha ? c->scripts[id].sha : c->scripts[id].body;
    call->argvlen[argc] = strlen(call->argv[argc]);
    argc++;
    snprintf(call->numkeys, sizeof(call->numkeys), "%d", nkeys);
    call->argv[argc] = call->numkeys;
    call->argvlen[argc] = strlen(call->numkeys);
    argc++;
    for (int i = 0; i < nkeys; i++, argc++) {
        call->argv[argc] = keys[i];
        call->argvlen[argc] = strlen(keys[i]);
    }
    for (int i = 0; i < nargs; i++, argc++) {
        call->argv[argc] = args[i];
        call->argvlen[argc] = strlen(args[i]);
    }
    call->argc = argc;
}

/* Where each script that sets or extends a key takes its TTL (an index
 * into ARGV, 0-based), -1 for the others. */
static const int ttl_arg[DLOCK__SCRIPT_COUNT] = {
    [DLOCK__SCRIPT_ACQUIRE] = 1,
    [DLOCK__SCRIPT_EXTEND] = 1,        [DLOCK__SCRIPT_FENCE_SYNC] = -1,
    [DLOCK__SCRIPT_ENTER] = 1,         [DLOCK__SCRIPT_PASS] = -1,
    [DLOCK__SCRIPT_LEAVE] = -1,        [DLOCK__SCRIPT_MULTI_ACQUIRE] = 1,
    [DLOCK__SCRIPT_MULTI_RELEASE] = -1, [DLOCK__SCRIPT_MULTI_EXTEND] = 1,
    [DLOCK__SCRIPT_MULTI_FENCE_SYNC] = -1,
    [DLOCK__SCRIPT_ACQUIRE_EACH] = 0,  /* its tokens, one per key, follow */
    [DLOCK__SCRIPT_RELEASE_EACH] = -1,
};

/* Remembers the longest TTL a script that sets or extends a key sent: a
 * lagging connection is kept while it may still set or hold a key of that
 * age (conn.c, dlock__conn_expire). */
static void note_ttl(dlock_client *c, dlock__script_id id, const char *const *args, int nargs)
{
    unsigned long ttl;
    int at = ttl_arg[id];

    if (at < 0 || nargs <= at)
        return;
    ttl = strtoul(args[at], NULL, 10);
    if (ttl > c->longest_ttl_ms && ttl <= UINT32_MAX)
        c->longest_ttl_ms = (uint32_t)ttl;
}

void dlock__script_call_build(dlock_client *c, dlock__script_call *call, dlock__script_id id,
                              uint32_t mask, int by_sha, const char *const *keys, int nkeys,
                              const char *const *args, int nargs)
{
    note_ttl(c, id, args, nargs);
    /* On a connection that has not run this script yet, send the body
     * (EVAL caches it). A fresh server answers EVALSHA with NOSCRIPT, an
     * answer that decides nothing. So the round would wait out a paused
     * node and then need a second round, past the call's deadline. The
     * body costs some bytes, once per script and connection. */
    for (size_t i = 0; i < c->n && by_sha; i++)
        if ((mask & (1u << i)) && !(c->nodes[i].scripts_known & (1u << id)))
            by_sha = 0;
    call->id = id;
    build_argv(c, call, by_sha, keys, nkeys, args, nargs);
}

uint32_t dlock__script_settle(dlock_client *c, dlock__script_id id, uint32_t mask,
                              const dlock__result *res)
{
    uint32_t again = 0;

    for (size_t i = 0; i < c->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        if (dlock__reply_is_error(&res[i], "NOSCRIPT")) {
            /* Flushed while connected (SCRIPT FLUSH): EVAL next. */
            c->nodes[i].scripts_known &= ~(1u << id);
            again |= 1u << i;
            c->stats.script_loads++;
        } else if (res[i].status == DLOCK__R_REPLY) {
            c->nodes[i].scripts_known |= 1u << id;
        }
    }
    return again;
}

/* Runs script id on the nodes of mask, by SHA. Nodes that answer NOSCRIPT
 * (their script cache was emptied by SCRIPT FLUSH or a restart) get the full
 * script with EVAL, which also caches it again for the next EVALSHA. A
 * NOSCRIPT reply means the script did not run, so resending cannot apply it
 * twice. reach: as dlock__round. */
void dlock__script_round(dlock_client *c, uint32_t mask, uint32_t reach, dlock__script_id id,
                         const char *const *keys, int nkeys, const char *const *args, int nargs,
                         dlock__result *res, dlock__stop_fn stop, void *stop_arg)
{
    dlock__script_call call;
    uint32_t again;
    int stopped;

    dlock__script_call_build(c, &call, id, mask, 1, keys, nkeys, args, nargs);
    stopped = dlock__round(c, mask, reach, call.argc, call.argv, call.argvlen, res, stop,
                           stop_arg);
    again = dlock__script_settle(c, id, mask, res);
    if (again == 0)
        return;
    dlock__script_call_build(c, &call, id, again, 0, keys, nkeys, args, nargs);
    if (stopped) {
        /* The outcome is already decided without these nodes: re-cache the
         * script on them without waiting, so they take part next time
         * instead of answering NOSCRIPT forever. */
        dlock__send_only(c, again, call.argc, call.argv, call.argvlen);
        return;
    }
    dlock__round(c, again, 0, call.argc, call.argv, call.argvlen, res, stop, stop_arg);
    (void)dlock__script_settle(c, id, again, res);
}

void dlock__script_send_only(dlock_client *c, uint32_t mask, dlock__script_id id,
                             const char *const *keys, int nkeys, const char *const *args,
                             int nargs)
{
    dlock__script_call call;

    /* EVALSHA could hit NOSCRIPT with nobody reading the reply: send the
     * full body (cheap for these few-line scripts) so the command runs. */
    dlock__script_call_build(c, &call, id, mask, 0, keys, nkeys, args, nargs);
    dlock__send_only(c, mask, call.argc, call.argv, call.argvlen);
}
