/* async_internal.h - the event-loop client's own parts: its connections
 * (async_conn.c), its round driver (async_round.c) and its calls
 * (async.c). Every rule they follow is the protocol core's (protocol.h,
 * round_core.h), shared with the blocking client; these files only move
 * bytes through hiredis's async contexts on the caller's loop.
 *
 * Single-threaded: everything runs on the loop's thread. Work that a reply
 * or a closed connection starts is never done inside hiredis's callbacks:
 * they record what happened and mark the round "dirty", and the loop entry
 * point that called into hiredis (a watch or a timer) settles the dirty
 * rounds when hiredis has returned (dlock__async_drain). So no user
 * callback ever runs inside hiredis, and a free is never pulled from under
 * a running callback. */
#ifndef DLOCK_ASYNC_INTERNAL_H
#define DLOCK_ASYNC_INTERNAL_H

#include "protocol.h"

#include <hiredis/async.h>

typedef struct dlock__around dlock__around;

/* What a command sent on an async context answers to: a round's slot
 * (round set) or nothing any more (round NULL: the round ended, the reply
 * is owed and discarded, as conn.c's stale replies). Freed by its reply
 * callback, which hiredis runs exactly once (with NULL when the
 * connection goes). */
typedef struct dlock__ticket {
    dlock__around *round;
    size_t node;
    struct dlock__ticket *next_deferred; /* the node's list of commands waiting for AUTH */
    char *cmd;                           /* a deferred command, formatted (owned) */
    int len;
} dlock__ticket;

/* One node's connection of the event-loop client. */
typedef struct dlock__anode {
    dlock_async *a;
    size_t i;
    redisAsyncContext *ac;  /* NULL when down */
    void *timer;            /* the connect timeout */
    int connected;          /* the TCP connect completed */
    dlock__ticket *deferred, **deferred_tail; /* commands held until AUTH is answered */
} dlock__anode;

struct dlock__around {
    dlock_async *a;
    dlock__round_core core;
    dlock__result res[DLOCK_MAX_NODES];
    dlock__ticket *ticket[DLOCK_MAX_NODES]; /* the slot's command in flight */
    dlock__script_call call;
    uint32_t mask, reach;
    const char *const *keys;
    const char *const *args;
    int nkeys, nargs;
    int evals;              /* the NOSCRIPT retry round is running */
    void *timer;            /* the round's deadline */
    int dirty, done;
    dlock__around *next_dirty;
    void (*on_done)(dlock__around *r, void *arg);
    void *on_done_arg;
};

struct dlock_async {
    dlock_client *c;          /* the rules' state: nodes, breakers, scripts, stats */
    dlock_loop loop;
    dlock__anode an[DLOCK_MAX_NODES];
    redisAsyncContext *dead[4 * DLOCK_MAX_NODES]; /* closed by a rule, freed when hiredis returns */
    size_t n_dead;
    void *kick;               /* a 0 ms timer: settles what a call started outside the loop */
    dlock__around *dirty;     /* rounds to settle */
    dlock__ticket *orphans;   /* held commands of closed connections, failed when settling */
    int draining;             /* dlock__async_kick is running */
    struct dlock_async_op *ops; /* calls in flight */
    int depth;                /* inside a loop entry point, hiredis or a user callback */
    /* automatic renewal (async_renew.c): the watchdog's work on a timer */
    void *renew_timer;
    int renewing;             /* a renewal round is out (one at a time) */
    dlock_lock *rlock;        /* its lock */
    dlock__around *rround;    /* its round */
    dlock__extension rx;      /* its extension */
    int free_pending;         /* dlock_async_free was called from inside: free on the way out */
    int freeing;              /* dlock_async_free is running */
    char errbuf[DLOCK_ERRSTR_LEN];
};

/* ---- async_conn.c ---- */
int dlock__anode_init(dlock_async *a, size_t i);
/* Frees every connection (their pending callbacks run with NULL first). */
void dlock__anodes_free(dlock_async *a);
/* Sends a formatted or argv command on node i, connecting it first when it
 * is down, held back until its AUTH is answered. t is the callback's
 * ticket (owned by hiredis from here on when 0 is returned). -1: not sent,
 * why in detail (DLOCK__DETAIL_LEN). */
int dlock__anode_send(dlock_async *a, size_t i, dlock__ticket *t, int argc, const char **argv,
                      const size_t *argvlen, char *detail);
/* The loop entry points' frame: enter, then leave settles dirty rounds and
 * frees dead contexts when the outermost frame ends. */
void dlock__async_enter(dlock_async *a);
void dlock__async_leave(dlock_async *a);
/* Settles what is pending now: dirty rounds, held commands of closed
 * connections, dead contexts. */
void dlock__async_kick(dlock_async *a);
/* Something is pending: settled by the running drain, or from the loop
 * (the kick timer) - never inside a call of the program. */
void dlock__async_wake(dlock_async *a);
redisReply *dlock__async_reply_dup(const redisReply *r);

/* ---- async_renew.c ---- */
int dlock__async_renew_init(dlock_async *a);
/* Ends a renewal in flight and stops the timer (dlock_async_free). */
void dlock__async_renew_free(dlock_async *a);

/* ---- async_round.c ---- */
/* A script round of a on mask (keys, args kept alive by the caller until
 * on_done), NOSCRIPT settled by a second EVAL round as dlock__script_round.
 * on_done runs once, outside hiredis; the caller then frees it with
 * dlock__around_free. NULL: out of memory. */
dlock__around *dlock__around_start(dlock_async *a, uint32_t mask, uint32_t reach,
                                   dlock__script_id id, const char *const *keys, int nkeys,
                                   const char *const *args, int nargs, dlock__stop_fn stop,
                                   void *stop_arg, int64_t call_deadline_ms,
                                   void (*on_done)(dlock__around *r, void *arg), void *arg);
void dlock__around_free(dlock__around *r);
/* The reply callback of every command the event-loop client sends. */
void dlock__around_reply(redisAsyncContext *ac, void *reply, void *privdata);
/* Settles a dirty round: checks stop, second chance, deadline; ends it
 * when nothing more is awaited. */
void dlock__around_settle(dlock__around *r);
void dlock__around_mark(dlock__around *r);
/* Sends script id to the nodes of mask without waiting (an undo, a
 * re-cache): the body, the replies owed and discarded. */
void dlock__async_send_only(dlock_async *a, uint32_t mask, dlock__script_id id,
                            const char *const *keys, int nkeys, const char *const *args,
                            int nargs);

#endif /* DLOCK_ASYNC_INTERNAL_H */
