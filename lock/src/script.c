/* script.c - the Lua scripts (what each does and why, below; their text
 * in lua/) and EVALSHA with the EVAL fallback on NOSCRIPT. */
#include "protocol.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The scripts' text lives in lock/src/lua/ (one .lua file each); the build generates
 * dlock_scripts.h from those files, with each body as a C string and its
 * SHA1 (the name EVALSHA uses) computed by CMake from the same bytes.
 *
 * acquire.lua: SET NX PX and INCR run in one script because a script is
 * atomic in Redis: the fence can never be bumped for an acquisition that
 * did not happen, nor an acquisition happen without its fence bump (two
 * separate commands could be split by a crash or by another client's SET).
 * KEYS[1] = the lock key, KEYS[2] = the fence key (see acquire.c). The
 * fence key has no expiry on purpose: the lock key comes and goes with
 * every TTL, but fences must keep increasing across those expiries - an
 * expiring counter would restart at 1 and let a stale holder's old, larger
 * fence win at the storage.
 *
 * release.lua: GET-compare-DEL must be one atomic step, else the key can
 * expire and be taken by another client between our GET and our DEL, and
 * we would delete their lock (the distlock page's script).
 *
 * extend.lua: the same token check, so an owner whose key expired cannot
 * prolong another client's lock, and renewal can never re-acquire.
 *
 * fence_sync.lua: raise the counter to ARGV[1] if it is lower; counters
 * only ever go up. See acquire.c for why the nodes of a quorum must agree.
 *
 * One node (queue.c): the direct hand-off. enter.lua is a waiter's attempt
 * and listing in one step: a free key is taken (SET NX PX + INCR, as
 * acquire.lua; the waiters set and the caller's list are touched only when
 * ARGV[5] = "1", i.e. an earlier enter.lua of this call may have listed
 * it, so the uncontended acquire is SET + INCR and nothing else); a key
 * holding the caller's own token (ARGV[1]) was handed
 * to it by a release while it was not blocked, and is its now; else the
 * caller is listed in the waiters set (ZADD NX: a waiter that lists itself
 * again keeps its place; its own list is emptied, so a message it is woken
 * with later comes from a hand-off after this listing) scored with the
 * node's own time in microseconds (for the order and the stay only: a
 * waiter never counts its validity from Redis TIME, queue.c says why;
 * with Redlock, ARGV[6] proposes the waiter's wall-clock score, which the
 * node moves by its offset from the waiter's clock, measured from the send
 * time ARGV[7], when that is beyond ARGV[8] us: rqueue.c says why; and
 * ARGV[9] = "1" announces a key found or made ours on the caller's list,
 * as a hand-off is, for the caller that never reads a late answer; after
 * a SET NX that list is a new call's or was just emptied, so no DEL), its
 * member "<token>:<ttl>:<stay ms>" (ARGV[3]) saying what the release needs
 * to hand over. pass.lua is the release: after the token check, the
 * releaser's own list goes (an announcement nobody will read), then
 * hand_over (handoff.lua, the one hand-off rule, which the build puts in
 * front of pass.lua and multi_release.lua) runs: if the
 * waiters set exists (EXISTS: with nobody waiting the release is GET,
 * EXISTS, DEL, no TIME nor ZRANGE), instead of deleting the key it pops
 * the oldest listing whose stay has not run out,
 * SETs the key to that waiter's token with the waiter's TTL, INCRs the
 * fence and pushes "<fence>" onto the waiter's own list, whose
 * name it builds from the token (ARGV[2] .. token .. ARGV[3]; a key not in
 * KEYS, which a standalone Redis allows). The woken waiter holds the lock
 * when its BLPOP returns: no round to claim it. leave.lua is a waiter
 * giving up: it takes its listing off and reports a key a release handed
 * to it in the meantime, which the waiter then takes (never leaked).
 *
 * Several resources as one lock (multi.c): multi_acquire.lua takes KEYS =
 * n lock keys then their n fence keys; only if no lock key exists does it
 * SET every one (ARGV[1] token, PX ARGV[2]) and INCR every fence, replying
 * {1, fence_1..fence_n}; else it changes nothing and replies {0, i} (i:
 * the first key found held). Checking all before setting any, in one
 * atomic script, is what makes the set all-or-nothing on a node and what
 * rules out hold-and-wait (no deadlock). multi_extend.lua PEXPIREs the
 * keys only when every one holds the token. multi_release.lua takes the n
 * lock keys, their n fence keys and their n waiters sets; every key
 * holding the token (ARGV[1]; ARGV[2] = n) goes through hand_over, as
 * pass.lua's does, in the same atomic step: a key that single-resource
 * waiters are listed on is handed to the oldest of them on every path (a
 * reply in time or not, a resent release, a failed attempt's undo), never
 * deleted under them. multi_fence_sync.lua is fence_sync.lua per key.
 *
 * Several independent resources (each.c): acquire_each.lua takes KEYS = n
 * lock keys then their n fence keys, ARGV[1] the TTL and ARGV[1+i] key i's
 * own token, and runs acquire.lua's step for each key on its own (SET NX
 * PX, INCR on success), replying {fence or 0, ...}: one key held does not
 * stop the others. A key a release handed to a queued waiter holds that
 * waiter's token, so SET NX refuses it exactly as acquire.lua does: a
 * batch never jumps a queue. release_each.lua takes the n lock keys, their
 * fence keys and waiters sets, ARGV[1] the waiters' list prefix, ARGV[1+i]
 * key i's token and ARGV[1+n+i] its list suffix; each key holding its
 * token goes through hand_over (as pass.lua) or is deleted, replying
 * {1 or 0, ...}, 0 = not our token. */
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

void dlock__script_call_build(dlock_client *c, dlock__script_call *call, dlock__script_id id,
                              uint32_t mask, int by_sha, const char *const *keys, int nkeys,
                              const char *const *args, int nargs)
{
    note_ttl(c, id, args, nargs);
    /* On a connection that has not run this script yet, send the body
     * (EVAL caches it): a fresh server answers EVALSHA with NOSCRIPT, an
     * answer that decides nothing, so the round would wait out a paused
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
