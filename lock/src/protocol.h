/* protocol.h - the steps of libdlock's operations without I/O: what to
 * send, and what the answers mean. The blocking client (acquire.c,
 * extend.c, release.c) and the event-loop client (async.c) both drive
 * these; neither has a rule of its own. A step never waits: it reads the
 * results of the round its driver ran and says what the next round is. */
#ifndef DLOCK_PROTOCOL_H
#define DLOCK_PROTOCOL_H

#include "round_core.h"

/* ---- script calls (script.c) ---- */

/* Keys + arguments of one script call: the largest is release_each.lua,
 * 3 keys and 2 arguments per resource plus its fixed arguments. */
#define DLOCK__MAX_SCRIPT_ARGS (5 * DLOCK_MAX_MULTI + 8)

/* One EVALSHA (or EVAL) command, ready to send. */
typedef struct dlock__script_call {
    dlock__script_id id;
    int argc;
    const char *argv[3 + DLOCK__MAX_SCRIPT_ARGS];
    size_t argvlen[3 + DLOCK__MAX_SCRIPT_ARGS];
    char numkeys[12];
} dlock__script_call;

/* Builds the call of script id for the nodes of mask: by SHA when every
 * one of them ran it on its connection already, else the body (EVAL caches
 * it); by_sha 0 forces the body (the NOSCRIPT retry). Notes its TTL. */
void dlock__script_call_build(dlock_client *c, dlock__script_call *call, dlock__script_id id,
                              uint32_t mask, int by_sha, const char *const *keys, int nkeys,
                              const char *const *args, int nargs);
/* After a round of call on mask: which nodes now know the script, and the
 * ones that answered NOSCRIPT (returned: they get the body next). */
uint32_t dlock__script_settle(dlock_client *c, dlock__script_id id, uint32_t mask,
                              const dlock__result *res);

/* ---- one acquisition attempt (acquire.c) ---- */

typedef struct dlock__attempt {
    const char *resource;
    uint32_t ttl_ms;
    char key[DLOCK__KEY_BUF], fkey[DLOCK__KEY_BUF], ttl_s[16], fence_s[24];
    char token[DLOCK_TOKEN_LEN];
    const char *keys[2];
    const char *args[2];
    const char *sync_args[1];
    uint32_t ok_mask;    /* nodes that set the key (and INCRed the fence) */
    uint32_t maybe_mask; /* nodes where the key may be ours: outcome unknown */
    uint32_t answered;   /* nodes that answered set or not set */
    uint32_t synced;     /* ok nodes whose fence counter holds >= fence */
    uint64_t fence;      /* the largest fence the ok nodes answered */
    int64_t t0;          /* before the first SET was sent */
    dlock__pass_buf undo; /* the hand-over that undoes a failed attempt */
} dlock__attempt;

/* Keys, a fresh token and the script's arguments: acquire.lua's round goes
 * to every node with a->keys (2) and a->args (2), stop rule
 * dlock__attempt_decided with &c->quorum. DLOCK_OK, or ARG / NOMEM. */
dlock_err dlock__attempt_prepare(dlock_client *c, dlock__attempt *a, const char *resource,
                                 uint32_t ttl_ms, char *errbuf);
int dlock__attempt_decided(const dlock__result *res, size_t n, void *arg);
/* The verdict of an attempt's round, for one resource or several:
 * - OK when a quorum granted (ok_mask);
 * - TAKEN when a quorum answered without that (the caller says who holds
 *   it);
 * - else the unavailable code of the silent nodes, why in errbuf. */
dlock_err dlock__attempt_verdict(dlock_client *c, uint32_t ok_mask, uint32_t answered,
                                 const dlock__result *res, char *errbuf);
/* After the acquire round:
 * - DLOCK_OK when a quorum set the key. Then the return of *lagging names
 *   the nodes whose fence counters fence_sync.lua must raise (keys
 *   a->fkey, args a->sync_args, no stop rule) before dlock__attempt_grant,
 *   0 when they agree.
 * - else TAKEN or an unavailable code with why in errbuf. */
dlock_err dlock__attempt_decide(dlock_client *c, dlock__attempt *a, const dlock__result *res,
                                uint32_t *lagging, char *errbuf);
/* After the sync round (res of the lagging nodes; nothing when none was
 * lagging): the handle, or FENCE_SYNC / EXPIRED / NOMEM. */
dlock_err dlock__attempt_grant(dlock_client *c, dlock__attempt *a, uint32_t lagging,
                               const dlock__result *res, dlock_lock **out, char *errbuf);
/* The nodes a failed attempt (rc) must undo, pass.lua with a->undo's keys
 * (3) and args (4), sent without waiting; 0 when none. */
uint32_t dlock__attempt_undo_mask(dlock_client *c, dlock__attempt *a, dlock_err rc);

/* ---- one attempt at several resources (multi.c) ---- */

typedef struct dlock__multi_quorum {
    size_t quorum;
    size_t n;
} dlock__multi_quorum;

typedef struct dlock__multi_attempt {
    const char *const *names;
    size_t n;
    uint32_t ttl_ms;
    dlock__multi_keys *mk;            /* the caller's keys of names; this attempt's token in */
    char token[DLOCK_TOKEN_LEN], ttl_s[16];
    const char *args[2];
    dlock__multi_quorum dq;           /* the stop rule's argument */
    uint64_t fences[DLOCK_MAX_MULTI]; /* per resource, the largest the ok nodes answered */
    char fence_s[DLOCK_MAX_MULTI][24];
    const char *sync_args[DLOCK_MAX_MULTI];
    uint32_t ok_mask, maybe_mask, answered, synced;
    size_t busy;                      /* 1-based index of a resource found held */
    int64_t t0;
} dlock__multi_attempt;

/* A fresh token and the round's arguments: multi_acquire.lua to every
 * node with mk->keys (2n) and m->args (2), stop rule dlock__multi_decided
 * with &m->dq. */
dlock_err dlock__multi_prepare(dlock_client *c, dlock__multi_attempt *m,
                               const char *const *names, size_t n, uint32_t ttl_ms,
                               dlock__multi_keys *mk, char *errbuf);
int dlock__multi_decided(const dlock__result *res, size_t nodes, void *arg);
/* As dlock__attempt_decide; the sync is multi_fence_sync.lua with keys
 * mk->keys + n (n) and m->sync_args (n). */
dlock_err dlock__multi_decide(dlock_client *c, dlock__multi_attempt *m, const dlock__result *res,
                              uint32_t *lagging, char *errbuf);
dlock_err dlock__multi_grant(dlock_client *c, dlock__multi_attempt *m, uint32_t lagging,
                             const dlock__result *res, dlock_lock **out, char *errbuf);
/* The nodes a failed attempt undoes with multi_release.lua (keys
 * mk->keys 3n, args mk->args 3+n). */
uint32_t dlock__multi_undo_mask(const dlock__multi_attempt *m, dlock_err rc);

/* ---- one node's queue with wake on release (queue.c) ---- */

/* The longest single BLPOP wait (a far deadline must not become a timeout
 * Redis refuses); a longer wait is several. */
#define DLOCK__QUEUE_MAX_BLOCK_MS (3600 * 1000LL)

typedef struct dlock__queue {
    const char *resource;
    uint32_t ttl_ms;
    int64_t deadline_ms;
    char token[DLOCK_TOKEN_LEN];
    char ttl_s[16], stay_s[24];
    char member[DLOCK_TOKEN_LEN + 48]; /* "<token>:<ttl>:<stay ms>" in the waiters set */
    char list[DLOCK__KEY_BUF + 48];    /* our own list: P "waiter:" token ":" R */
    dlock__pass_buf pb;                /* lock, fence and waiters keys; pass.lua's arguments */
    const char *keys[4];               /* enter.lua's and leave.lua's: lock, fence, waiters, list */
    const char *args[5];               /* enter.lua's */
    const char *leave_args[2];
    int listed;             /* an enter.lua answered "held, you are listed" */
    int64_t listed_sent_ms; /* when the last such enter.lua was sent (our monotonic clock) */
    int pass_on;            /* a key of ours will not be used: the driver sends pass.lua
                               (pb.keys 3, pb.args 4) without waiting, then clears this */
} dlock__queue;

/* The call's token, keys and arguments. DLOCK_OK, or ARG / NOMEM. */
dlock_err dlock__queue_prepare(dlock_client *c, dlock__queue *q, const char *resource,
                               uint32_t ttl_ms, int64_t deadline_ms, char *err);
/* Before each enter.lua round (keys 4, args 5) on node 0; attempt 0 first. */
void dlock__queue_entering(dlock__queue *q, unsigned attempt);
/* What an enter.lua (or leave.lua) answer sent at t0 says: OK with the
 * handle (the key is ours), TAKEN with the holder's *pttl (we are listed),
 * an unavailable code, or EXPIRED / NOMEM (q->pass_on set). */
dlock_err dlock__queue_answer(dlock_client *c, dlock__queue *q, dlock__script_id id,
                              const dlock__result *r, int64_t t0, int64_t *pttl,
                              dlock_lock **out, char *err);
/* How long to wait for a hand-off (BLPOP on q->list) after a TAKEN answer. */
int64_t dlock__queue_block_ms(const dlock__queue *q, int64_t pttl, int64_t now);
/* A message popped from q->list: 1 when the key is ours (*rc says whether
 * the handle was made), 0 when only an enter.lua can bound it (ask again),
 * -1 when it is no hand-off. */
int dlock__queue_woken(dlock_client *c, dlock__queue *q, const char *msg, dlock_err *rc,
                       dlock_lock **out, char *err);
/* Giving up with rc: leave.lua (keys 4, q->leave_args 2) answered r. A key
 * handed to us meanwhile is ours (OK); an unanswered leave.lua is followed
 * by pass.lua (q->pass_on). Returns the call's outcome, err kept. */
dlock_err dlock__queue_left(dlock_client *c, dlock__queue *q, const dlock__result *r,
                            int64_t t0, dlock_err rc, dlock_lock **out, char *err);

/* ---- Redlock's queues with wake on release (rqueue.c) ---- */

/* What the steps send without waiting, through the driver: script id to
 * the nodes of mask, or one command to the nodes of mask. */
typedef struct dlock__rq_io {
    void (*script_send)(void *arg, uint32_t mask, dlock__script_id id, const char *const *keys,
                        int nkeys, const char *const *args, int nargs);
    void (*cmd_send)(void *arg, uint32_t mask, int argc, const char **argv,
                     const size_t *argvlen);
} dlock__rq_io;

typedef struct dlock__rqueue {
    dlock__queue b;                      /* the call's names, as one node's queue has them */
    dlock_client *c;
    const dlock__rq_io *io;
    void *io_arg;
    char score_s[24], sent_s[24], slack_s[24];
    const char *args[9];                 /* enter.lua's (keys: b.keys; leave.lua's args b.leave_args) */
    uint32_t listed;                     /* nodes whose last answered enter.lua listed us */
    uint32_t answered;                   /* nodes that answered the last round */
    uint32_t maybe;                      /* sent the last enter.lua, no answer: ours or not, unknown */
    uint32_t rechecked;                  /* maybe nodes a recheck asked in vain: not asked again */
    int rechecking;                      /* this round is a recheck for the maybe nodes */
    int64_t first_sent;                  /* the first enter.lua's send time, our clock */
    int recheck;                         /* a hand-off came that only an enter.lua can bound */
    int64_t listed_sent[DLOCK_MAX_NODES]; /* that enter.lua's send time, our clock */
    long long nscore[DLOCK_MAX_NODES];   /* our score in that node's queue, as it answered; 0 unknown */
    uint32_t owned;                      /* nodes whose key holds our token */
    int64_t valid[DLOCK_MAX_NODES];      /* owned: the key lives at least until then (less drift) */
    uint64_t fence[DLOCK_MAX_NODES];     /* owned: that node's fence */
    uint64_t seen[DLOCK_MAX_NODES];      /* the largest fence of a key of ours on that node so far */
    int64_t minority_since;              /* first instant we held keys short of a quorum; 0 none */
    /* a grant in progress (dlock__rq_grant_begin .. _end) */
    uint32_t g_own, g_synced, g_lagging;
    uint64_t g_fence;
    int64_t g_valid;
    char g_fence_s[24];
    const char *g_sync_keys[1], *g_sync_args[1];
} dlock__rqueue;

/* The call's token, score, keys and arguments; io sends for the steps.
 * DLOCK_OK, or ARG / NOMEM with why in err. */
dlock_err dlock__rq_prepare(dlock_client *c, dlock__rqueue *q, const dlock__rq_io *io,
                            void *io_arg, const char *resource, uint32_t ttl_ms,
                            int64_t deadline_ms, char *err);
/* Before each enter.lua round: to every node, keys b.keys (4), args 9,
 * stop rule dlock__rq_decided with &c->quorum; attempt 0 first. */
void dlock__rq_entering(dlock__rqueue *q, unsigned attempt);
int dlock__rq_decided(const dlock__result *res, size_t n, void *arg);
/* What an enter.lua (or leave.lua: keys 4, b.leave_args 2, reach every
 * node) round sent at t0 answered: TAKEN when a quorum answered, else the
 * round's unavailability (why in err). pttl: the longest remaining TTL of
 * another holder's key among the answers (-1 none). */
dlock_err dlock__rq_answer(dlock__rqueue *q, dlock__script_id id, const dlock__result *res,
                           int64_t t0, int64_t *pttl, char *err);
/* Whether a quorum of keys is ours: 0 not yet; 1 when the grant begins,
 * its fence sync then due on q->g_lagging (fence_sync.lua, keys
 * g_sync_keys 1, args g_sync_args 1; none when 0). */
int dlock__rq_grant_begin(dlock__rqueue *q);
/* After that sync (ones: nodes that answered 1): 1 when decided, *rc the
 * outcome (with the handle); 0 when the validity ran out during the grant
 * with time left to wait (q->recheck: enter again). */
int dlock__rq_grant_end(dlock__rqueue *q, uint32_t ones, dlock_err *rc, dlock_lock **out,
                        char *err);
/* The end of the wait after a TAKEN round: the holder's key or the deadline. */
int64_t dlock__rq_wait_end(const dlock__rqueue *q, int64_t pttl, int64_t now);
/* The next step of a wait before wait_end. conn: nodes where the driver has
 * a waker connection. WAIT: listen on *mask for *block ms; RECHECK: enter
 * again now; YIELDED: the minority was passed on, enter again; NOWHERE: no
 * node to listen on (back off). */
enum { DLOCK__RQ_WAIT, DLOCK__RQ_RECHECK, DLOCK__RQ_YIELDED, DLOCK__RQ_NOWHERE };
int dlock__rq_wait_next(dlock__rqueue *q, int64_t now, int64_t wait_end, uint32_t conn,
                        int64_t *block, uint32_t *mask);
/* A message popped from q->list on node i at now. */
void dlock__rq_heard(dlock__rqueue *q, size_t i, const char *msg, int64_t now);
/* The keys of mask passed on (pass.lua through io); q->owned forgets them. */
void dlock__rq_pass_on(dlock__rqueue *q, uint32_t mask);

/* ---- release (release.c) ---- */

/* The stop rule of a multi lock's release: a quorum answered that every
 * key held our token (the second chance is for single keys only). */
int dlock__release_decided(const dlock__result *res, size_t nodes, void *arg);

/* ---- extend (extend.c) ---- */

typedef struct dlock__extension {
    char key[DLOCK__KEY_BUF], ttl_s[16];
    const char *one_key[1];
    const char *const *keys;
    int nkeys;
    const char *args[2];
    dlock__script_id id;
    dlock__multi_keys *mk;   /* owned: a multi lock's keys */
    uint32_t ttl_ms;
    int64_t t0;              /* before the round went out */
    uint32_t undo_mask;      /* a lost lock: the nodes its keys are handed on from */
    dlock__script_id undo_id; /* and the hand-over (dlock__extend_undo) */
    const char *const *undo_keys;
    const char *const *undo_args;
    int undo_nkeys, undo_nargs;
    dlock__pass_buf pass;
} dlock__extension;

/* Whether lock can be extended, and its round (keys, args 2, stop rule
 * dlock__quorum_of_ones with &c->quorum). DLOCK_OK, or LOST (already
 * released or lost), ARG, NOMEM with why in errbuf. x->mk is freed by
 * dlock__extend_done. */
dlock_err dlock__extend_prepare(dlock_client *c, dlock_lock *lock, uint32_t ttl_ms,
                                dlock__extension *x, char *errbuf);
/* What the round says: OK (validity moved), an unavailable code (validity
 * shortened to what is sure), or LOST (x->undo_mask then names the nodes to
 * hand the keys on from: dlock__extend_undo). */
dlock_err dlock__extend_decide(dlock_client *c, dlock_lock *lock, dlock__extension *x,
                               const dlock__result *res, char *errbuf);
/* After LOST: 1 with the hand-over of the keys still ours in x->undo_*
 * (sent to x->undo_mask without waiting), 0 when there is none. */
int dlock__extend_undo(dlock_client *c, dlock_lock *lock, dlock__extension *x);
void dlock__extend_done(dlock__extension *x);

/* ---- acquire's checks and counts (acquire.c) ---- */

/* dlock_acquire's argument checks: 0, or -1 with why in c->errstr. */
int dlock__acquire_check(dlock_client *c, const char *resource, uint32_t ttl_ms,
                         int64_t deadline_ms);
/* Counts one attempt of a call (attempts; retries after the first). */
void dlock__count_try(dlock_client *c, unsigned attempt);
/* Counts one attempt's outcome (attempts, retries, acquires, taken). */
void dlock__acquire_count_attempt(dlock_client *c, unsigned attempt, dlock_err rc);
/* Counts a failed call that found the service unavailable. */
void dlock__acquire_count_call(dlock_client *c, dlock_err rc);

#endif /* DLOCK_PROTOCOL_H */
