/* async_internal.h - the event-loop client's own parts: its connections
 * (async_conn.c), its round driver (async_round.c) and its calls
 * (async.c). Every rule they follow is the protocol core's (protocol.h,
 * round_core.h), shared with the blocking client; these files only move
 * bytes through hiredis's async contexts on the caller's loop.
 *
 * Single-threaded: everything runs on the loop's thread. Work that a reply
 * or a closed connection starts is never done inside hiredis's callbacks:
 * they record what happened and mark the round "dirty". Then the loop entry
 * point that called into hiredis (a watch or a timer) settles the dirty
 * rounds when hiredis has returned (dlock__async_drain). So no user
 * callback ever runs inside hiredis, and a free is never pulled from under
 * a running callback. */
#ifndef DLOCK_ASYNC_INTERNAL_H
#define DLOCK_ASYNC_INTERNAL_H

#include "protocol.h"

#include <hiredis/async.h>

typedef struct dlock__around dlock__around;
typedef struct dlock__aqueue dlock__aqueue;
typedef struct dlock__arqueue dlock__arqueue;
typedef struct dlock__awaker dlock__awaker;

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
    dlock__awaker *wakers;    /* BLPOP connections of queued acquires (async_queue.c) */
    char errbuf[DLOCK_ERRSTR_LEN];
};

typedef enum op_kind { OP_ACQUIRE, OP_RELEASE, OP_EXTEND } op_kind;

struct dlock_async_op {
    dlock_async *a;
    op_kind kind;
    int cancelled;            /* cancel asked while a round was in flight */
    char *resource;           /* acquire: owned copy (multi: of the first name) */
    char **names;             /* acquire_multi: owned copies of every name, n of them */
    size_t n;                 /* acquire_multi: how many (0: one resource) */
    dlock__multi_keys *mk;    /* acquire_multi and a multi lock's release: the keys (owned) */
    dlock__multi_attempt ma;  /* acquire_multi: the attempt in flight */
    uint32_t ttl_ms;
    int64_t deadline_ms;      /* acquire: retry until then */
    int64_t call_deadline_ms; /* no round past this plus one command timeout */
    unsigned attempt;
    dlock__attempt att;       /* acquire: the attempt in flight */
    uint32_t lagging;         /* acquire: nodes whose fence counters are being raised */
    dlock__around *acq_round; /* acquire: its answers, kept for the grant */
    dlock__extension ext;     /* extend */
    dlock__pass_buf pass;     /* release */
    dlock_lock *lock;         /* release/extend: the lock */
    dlock__around *round;     /* the round in flight, NULL between rounds */
    dlock__aqueue *q;         /* acquire on one node with wake on release (async_queue.c) */
    dlock__arqueue *rq;       /* the same over several masters (async_rqueue.c) */
    void *timer;              /* backoff, or the deferred completion */
    dlock_err pending_rc;     /* a completion waiting for the timer */
    dlock_async_acquire_cb acquire_cb;
    dlock_async_done_cb done_cb;
    void *arg;
    char detail[DLOCK_ERRSTR_LEN];
    dlock_async_op *prev, *next;
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
/* Watches ac's socket on the loop for hiredis; *live is where its owner
 * keeps its live context (a closed one is read no more). -1: no memory. */
int dlock__async_attach(dlock_async *a, redisAsyncContext *const *live, redisAsyncContext *ac);
/* An async context to addr, watched on the loop (live: as for
 * dlock__async_attach), TLS started when addr speaks it, its replies
 * capped (reader.c). 0 with *out set; -1 the connect or TLS failed, -2 out
 * of memory; why in detail. */
int dlock__async_open(dlock_async *a, const dlock__addr *addr, redisAsyncContext *const *live,
                      redisAsyncContext **out, char *detail);
/* A context closed by a rule: freed when hiredis has returned (its pending
 * callbacks then run with NULL). */
void dlock__async_bury(dlock_async *a, redisAsyncContext *ac);
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

/* ---- async.c ---- */
/* The call's one callback, then the call is freed. */
void dlock__aop_complete(dlock_async_op *op, dlock_err rc, dlock_lock *lock);
/* An acquire's end with rc: counted and called back, or, cancelled,
 * called back with DLOCK_ERR_CANCELLED and lock freed (its driver has
 * handed on any key it got). */
void dlock__aop_end_acquire(dlock_async_op *op, dlock_err rc, dlock_lock *lock);
/* The blocking client's backoff before the next attempt, on op's timer
 * (never past its deadline). */
void dlock__aop_back_off(dlock_async_op *op, unsigned attempt);

/* ---- async_queue.c ---- */
/* Whether an acquire waits in the nodes' queues: wake on release and time
 * to wait (as the blocking acquire decides); one resource. */
int dlock__aqueue_wanted(const dlock_async_op *op);
/* Its next step, from the op's timer: the first enter.lua, one after a
 * back-off, or the end of a wait. */
void dlock__aqueue_step(dlock_async_op *op);
/* dlock_async_cancel of a queued acquire: 1 (the callback follows). */
int dlock__aqueue_cancel(dlock_async_op *op);
/* dlock_async_free mid-call: leave.lua and pass.lua sent without waiting. */
void dlock__aqueue_abandon(dlock_async_op *op);
/* The op's queue state, its waker back to the pool (op_free). */
void dlock__aqueue_free(dlock_async_op *op);

/* ---- async_wake.c ---- */
/* What a waker heard, told to its owner inside hiredis (record it, act
 * later): a message popped (msg), the BLPOP's nil, or the connection lost. */
enum { DLOCK__HEARD_NOTHING = 0, DLOCK__HEARD_MESSAGE = 1, DLOCK__HEARD_NIL = 2,
       DLOCK__HEARD_LOST = -1 };
typedef void (*dlock__awaker_news)(void *owner, size_t node, int heard, const char *msg);
/* A waker of node from the pool, or a new one; NULL when out of memory. */
dlock__awaker *dlock__awaker_take(dlock_async *a, size_t node, dlock__awaker_news news,
                                  void *owner);
/* BLPOP list until until_ms (our clock), connecting first if needed; a
 * no-op while one is out. 0, or -1 when no connection could start. */
int dlock__awaker_pop(dlock__awaker *w, const char *list, int64_t until_ms);
/* Whether w has a connection; whether no BLPOP is out or due (NULL ok). */
int dlock__awaker_up(const dlock__awaker *w);
int dlock__awaker_quiet(const dlock__awaker *w);
void dlock__awaker_close(dlock__awaker *w);
/* Back to the pool (NULL ok); closed unless quiet and authenticated. */
void dlock__awaker_put(dlock__awaker *w);
/* Every waker (dlock_async_free, after the connections). */
void dlock__awakers_free(dlock_async *a);

/* ---- async_rqueue.c: async_queue.c's hooks over several masters ---- */
void dlock__arqueue_step(dlock_async_op *op);
int dlock__arqueue_cancel(dlock_async_op *op);
void dlock__arqueue_abandon(dlock_async_op *op);
void dlock__arqueue_free(dlock_async_op *op);

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
/* One command to the nodes of mask without waiting, its replies discarded. */
void dlock__async_cmd_send_only(dlock_async *a, uint32_t mask, int argc, const char **argv,
                                const size_t *argvlen);

#endif /* DLOCK_ASYNC_INTERNAL_H */
