/* script.c - the Lua scripts and EVALSHA with the EVAL fallback on
 * NOSCRIPT. */
#include "dlock_internal.h"

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
    static const char *const bodies[DLOCK__SCRIPT_COUNT] = {DLOCK__LUA_ACQUIRE, DLOCK__LUA_RELEASE,
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
    static const char *const shas[DLOCK__SCRIPT_COUNT] = {DLOCK__SHA1_ACQUIRE, DLOCK__SHA1_RELEASE,
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

/* Keys + arguments of one script call: the largest is release_each.lua,
 * with three keys and two arguments (token, list suffix) per lock plus the
 * list prefix (each.c). */
#define DLOCK__MAX_SCRIPT_ARGS (5 * DLOCK_MAX_MULTI + 8)

static int build_argv(const dlock_client *c, dlock__script_id id, int by_sha,
                      const char *const *keys, int nkeys, const char *const *args, int nargs,
                      char *numkeys, const char **argv, size_t *argvlen)
{
    int argc = 0;

    argv[argc] = by_sha ? "EVALSHA" : "EVAL";
    argvlen[argc] = strlen(argv[argc]);
    argc++;
    argv[argc] = by_sha ? c->scripts[id].sha : c->scripts[id].body;
    argvlen[argc] = strlen(argv[argc]);
    argc++;
    snprintf(numkeys, 12, "%d", nkeys);
    argv[argc] = numkeys;
    argvlen[argc] = strlen(numkeys);
    argc++;
    for (int i = 0; i < nkeys; i++, argc++) {
        argv[argc] = keys[i];
        argvlen[argc] = strlen(keys[i]);
    }
    for (int i = 0; i < nargs; i++, argc++) {
        argv[argc] = args[i];
        argvlen[argc] = strlen(args[i]);
    }
    return argc;
}

/* Where each script that sets or extends a key takes its TTL (an index
 * into ARGV, 0-based), -1 for the others. */
static const int ttl_arg[DLOCK__SCRIPT_COUNT] = {
    [DLOCK__SCRIPT_ACQUIRE] = 1,       [DLOCK__SCRIPT_RELEASE] = -1,
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

/* Runs script id on the nodes of mask, by SHA. Nodes that answer NOSCRIPT
 * (their script cache was emptied by SCRIPT FLUSH or a restart) get the full
 * script with EVAL, which also caches it again for the next EVALSHA. A
 * NOSCRIPT reply means the script did not run, so resending cannot apply it
 * twice. reach: as dlock__round. */
void dlock__script_round(dlock_client *c, uint32_t mask, uint32_t reach, dlock__script_id id,
                         const char *const *keys, int nkeys, const char *const *args, int nargs,
                         dlock__result *res, dlock__stop_fn stop, void *stop_arg)
{
    const char *argv[3 + DLOCK__MAX_SCRIPT_ARGS];
    size_t argvlen[3 + DLOCK__MAX_SCRIPT_ARGS];
    char numkeys[12];
    uint32_t again = 0;
    int argc, stopped;

    int by_sha = 1;

    note_ttl(c, id, args, nargs);
    /* On a connection that has not run this script yet, send the body
     * (EVAL caches it): a fresh server answers EVALSHA with NOSCRIPT, an
     * answer that decides nothing, so the round would wait out a paused
     * node and then need a second round, past the call's deadline. The
     * body costs some bytes, once per script and connection. */
    for (size_t i = 0; i < c->n; i++)
        if ((mask & (1u << i)) && !(c->nodes[i].scripts_known & (1u << id)))
            by_sha = 0;
    argc = build_argv(c, id, by_sha, keys, nkeys, args, nargs, numkeys, argv, argvlen);
    stopped = dlock__round(c, mask, reach, argc, argv, argvlen, res, stop, stop_arg);
    for (size_t i = 0; i < c->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        if (dlock__reply_is_error(&res[i], "NOSCRIPT")) {
            /* Flushed while connected (SCRIPT FLUSH): EVAL below. */
            c->nodes[i].scripts_known &= ~(1u << id);
            again |= 1u << i;
            c->stats.script_loads++;
        } else if (res[i].status == DLOCK__R_REPLY) {
            c->nodes[i].scripts_known |= 1u << id;
        }
    }
    if (again == 0)
        return;
    argc = build_argv(c, id, 0, keys, nkeys, args, nargs, numkeys, argv, argvlen);
    if (stopped) {
        /* The outcome is already decided without these nodes: re-cache the
         * script on them without waiting, so they take part next time
         * instead of answering NOSCRIPT forever. */
        dlock__send_only(c, again, argc, argv, argvlen);
        return;
    }
    dlock__round(c, again, 0, argc, argv, argvlen, res, stop, stop_arg);
    for (size_t i = 0; i < c->n; i++)
        if ((again & (1u << i)) && res[i].status == DLOCK__R_REPLY)
            c->nodes[i].scripts_known |= 1u << id;
}

void dlock__script_send_only(dlock_client *c, uint32_t mask, dlock__script_id id,
                             const char *const *keys, int nkeys, const char *const *args,
                             int nargs)
{
    const char *argv[3 + DLOCK__MAX_SCRIPT_ARGS];
    size_t argvlen[3 + DLOCK__MAX_SCRIPT_ARGS];
    char numkeys[12];
    int argc;

    /* EVALSHA could hit NOSCRIPT with nobody reading the reply: send the
     * full body (cheap for these few-line scripts) so the command runs. */
    argc = build_argv(c, id, 0, keys, nkeys, args, nargs, numkeys, argv, argvlen);
    dlock__send_only(c, mask, argc, argv, argvlen);
}
