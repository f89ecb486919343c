/* dlock_internal.h - private types and functions shared by the libdlock sources.
 *
 * Naming: public names are dlock_*, every non-static internal function is
 * dlock__* (hidden by the visibility preset, never exported).
 *
 * THREAD SAFETY NOTES: everything in struct dlock_client except the fields
 * marked "atomic" or "immutable" is guarded by dlock_client.mu. Every
 * network round runs with mu held; retry sleeps run without it. The
 * watchdog thread takes mu for each renewal and sleeps on wd_cond (which
 * releases mu). Fields of struct dlock_lock read by other threads
 * (state, valid_until_ms, renewals, reg_client) are C11 atomics. on_lost
 * runs without mu; wd_cb_lock names the lock it runs for, and
 * dlock_lock_free of that lock waits on cb_cond until the callback ends.
 */
#ifndef DLOCK_INTERNAL_H
#define DLOCK_INTERNAL_H

#include "dlock.h"

#include <poll.h>
#include <pthread.h>
#include <sys/types.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>

/* ---- node addresses (addr.c) ---- */

#define DLOCK__HOST_LEN 256
#define DLOCK__ADDR_TEXT_LEN 512
#define DLOCK__MAX_SENTINELS 8
#define DLOCK__MASTER_NAME_LEN 128
#define DLOCK__CRED_LEN 256

typedef struct dlock__hostport {
    char host[DLOCK__HOST_LEN];      /* IPv6 without brackets */
    int port;
} dlock__hostport;

typedef struct dlock__addr {
    int is_unix;                     /* 1: unix socket path, 0: TCP host:port */
    char host[DLOCK__HOST_LEN];      /* TCP host (IPv6 without brackets) or socket path; "" for sentinel */
    int port;                        /* TCP port, 0 for unix and sentinel */
    /* sentinel://h:p[,h:p...]/name: one node, the master that the sentinels
     * name (sentinel.c); host and port above stay empty. */
    int is_sentinel;
    size_t n_sentinels;              /* 1..DLOCK__MAX_SENTINELS */
    dlock__hostport sentinels[DLOCK__MAX_SENTINELS]; /* asked in this order */
    char master_name[DLOCK__MASTER_NAME_LEN];
    /* redis://user:password@host: the credentials of the URL (client.c
     * makes them the client's; one client has one set). */
    int has_auth;
    char user[DLOCK__CRED_LEN];
    char password[DLOCK__CRED_LEN];
    char text[DLOCK__ADDR_TEXT_LEN]; /* as given (a URL's password as ***), for error messages */
    /* TLS: rediss://, or every node of a client with dlock_options.tls
     * (client.c sets it then, sentinels included). */
    int tls;
} dlock__addr;

/* Parses "host[:port]", "[v6][:port]", "redis://[[user]:password@]host[:port][/0]",
 * "unix:/path" or "sentinel://host[:port][,host[:port]...]/name" (port
 * 6379, sentinels 26379, when none is written). 0 on success, -1 with a
 * reason in err otherwise. */
int dlock__addr_parse(const char *s, dlock__addr *out, char *err, size_t errlen);

/* ---- per-node connection (conn.c) ---- */

typedef enum dlock__node_state {
    DLOCK__DOWN = 0,   /* no context: a round may start a connect */
    DLOCK__CONNECTING, /* non-blocking connect in progress (commands wait in the buffer) */
    DLOCK__UP          /* connected; commands may be appended */
} dlock__node_state;

#define DLOCK__DETAIL_LEN 160

/* The circuit breaker of a node (breaker.c): while open ("tripped") new
 * acquires and extends skip the node - a missing vote is always safe - so a
 * paused, tarpitted or dead minority costs the healthy majority nothing. */
typedef struct dlock__breaker {
    int open;                       /* tripped: skip the node for new votes */
    dlock_err code;                 /* how it failed (TIMEOUT, UNREACHABLE), for skipped results */
    char detail[DLOCK__DETAIL_LEN]; /* why it tripped, for the client errstr */
    int64_t probe_at_ms;            /* a DOWN tripped node may be reconnected from then on */
    int backoff_ms;                 /* the probe delay after the next failed probe */
} dlock__breaker;

typedef struct dlock__node {
    dlock__addr addr;          /* immutable after dlock_client_new */
    redisContext *ctx;         /* NULL when DOWN */
    dlock__node_state state;
    int auth_pending;          /* the next reply on the stream answers our AUTH */
    uint32_t scripts_known;    /* bit per script id: run on this connection, so cached by the server */
    unsigned stale;            /* replies still owed to earlier rounds, discarded on arrival */
    int unwritten;             /* hiredis holds output the kernel has not taken yet */
    int64_t connect_started_ms; /* CONNECTING since */
    int64_t heard_ms;          /* last reply, or when it began to owe one: silence is measured from it */
    int auth_failed;           /* our AUTH on this connection was refused */
    char auth_detail[DLOCK__DETAIL_LEN]; /* the refusal text */
    dlock__breaker breaker;
    dlock__hostport master;    /* sentinel nodes: the master the last connect went to ("" before) */
    /* sentinel nodes: the resolver thread's answer (sentinel.c) */
    int master_fresh;          /* master holds an answer no connect has used yet */
    int master_asking;         /* 1: asked of the resolver, 2: being asked now, 0: idle */
    char master_why[DLOCK__DETAIL_LEN]; /* why the last asking failed, "" when it did not */
    /* the server behind the address (conn.c): one server, one vote */
    int runid_pending;         /* the next reply after AUTH's answers our INFO server */
    char run_id[48];           /* run_id of the server last reached here, "" unknown */
    int same_as;               /* nonzero: refused for good (same_detail says why): it reaches
                                  node same_as-1's server, or -1: a Redis Cluster node */
    char same_detail[DLOCK_ERRSTR_LEN]; /* why, for the errors of every later call */
    /* The event-loop client's connection (async_conn.c) instead of ctx;
     * NULL in the blocking client. */
    struct dlock__anode *async;
    /* TLS (conn.c with tls.c): a TLS node stays CONNECTING after its TCP
     * connect until the handshake is done. */
    struct ssl_st *ssl;        /* the connection's TLS state, owned by ctx; NULL without TLS */
    int handshaking;           /* TCP connected, TLS handshake under way */
    short hs_events;           /* what the handshake waits for: POLLIN or POLLOUT */
    int64_t hs_started_ms;     /* handshaking since: it may take one command timeout */
} dlock__node;

/* ---- per-node result of one round (rounds.c) ---- */

typedef enum dlock__status {
    DLOCK__R_UNSENT = 0, /* node not part of this round */
    DLOCK__R_DOWN,       /* no connection: the command was never sent */
    DLOCK__R_REPLY,      /* answered: see reply (may be an error reply) */
    DLOCK__R_TIMEOUT,    /* sent, no answer within the command timeout */
    DLOCK__R_IOERR,      /* sent, then the connection broke or the stream was garbled */
    DLOCK__R_AUTH,       /* AUTH refused: the command was not run */
    DLOCK__R_PENDING     /* sent; the round ended early (outcome decided) before it answered */
} dlock__status;

typedef struct dlock__result {
    dlock__status status;
    dlock_err skipped;              /* nonzero: DOWN because the node's breaker is open; the code it stands for */
    redisReply *reply;              /* owned; status == DLOCK__R_REPLY only */
    char detail[DLOCK__DETAIL_LEN]; /* why the node failed, for the client errstr */
} dlock__result;

/* Called after every reply of a round; nonzero ends the round after a short
 * grace (see dlock__round): nodes still pending then keep their connection
 * and owe a stale reply. */
typedef int (*dlock__stop_fn)(const dlock__result *res, size_t n, void *arg);

/* ---- Lua scripts (script.c) ---- */

typedef enum dlock__script_id {
    DLOCK__SCRIPT_ACQUIRE = 0,
    DLOCK__SCRIPT_EXTEND,
    DLOCK__SCRIPT_FENCE_SYNC,
    DLOCK__SCRIPT_ENTER,
    DLOCK__SCRIPT_PASS,
    DLOCK__SCRIPT_LEAVE,
    DLOCK__SCRIPT_MULTI_ACQUIRE,
    DLOCK__SCRIPT_MULTI_RELEASE,
    DLOCK__SCRIPT_MULTI_EXTEND,
    DLOCK__SCRIPT_MULTI_FENCE_SYNC,
    DLOCK__SCRIPT_ACQUIRE_EACH,
    DLOCK__SCRIPT_RELEASE_EACH,
    DLOCK__SCRIPT_COUNT
} dlock__script_id;

typedef struct dlock__script {
    const char *body; /* static Lua text */
    char sha[41];     /* lowercase hex SHA1 of body, for EVALSHA */
} dlock__script;

/* ---- wake on release (wake.c) ---- */

/* One waiting thread's blocking connections, one per node, opened lazily.
 * A waiter takes one from the client's pool (under mu), blocks on it
 * without mu, and gives it back: blocked waiters never hold the client. */
typedef struct dlock__waker {
    redisContext *ctx[DLOCK_MAX_NODES];
    uint32_t pending;                 /* nodes whose ctx owes the reply of a BLPOP (rqueue.c) */
    struct dlock__waker *next;        /* pool link */
} dlock__waker;

/* Notices for tokens none of a client's locks held, remembered (cache.c). */
#define DLOCK__CACHE_UNMATCHED 256

/* One node's listener thread of lock caching (cache.c). */
typedef struct dlock__cache_listener {
    struct dlock_client *c;
    size_t node;
    pthread_t thread;
    int started;
} dlock__cache_listener;

/* ---- the client ---- */

enum { DLOCK__HELD = 0, DLOCK__RELEASED = 1, DLOCK__LOST = 2 };

struct dlock_client {
    pthread_mutex_t mu;               /* guards everything below unless marked */
    uint64_t id;                      /* immutable: unique per process, ties locks to their client */
    pid_t pid;                        /* immutable: the process that made it (fork: see dlock__enter) */
    size_t n;                         /* immutable: number of nodes */
    size_t quorum;                    /* immutable: n/2 + 1 */
    dlock__node nodes[DLOCK_MAX_NODES];
    char *username;                   /* immutable, owned, or NULL */
    char *password;                   /* immutable, owned, or NULL */
    char *prefix;                     /* immutable, owned, never NULL */
    size_t prefix_len;                /* immutable */
    int connect_timeout_ms;           /* immutable */
    int command_timeout_ms;           /* immutable */
    double drift_factor;              /* immutable */
    int drift_min_ms;                 /* immutable */
    int retry_base_ms;                /* immutable */
    int retry_max_ms;                 /* immutable */
    int retry_fixed_ms;               /* immutable */
    int retry_jitter_ms;              /* immutable */
    int retry_unavailable;            /* immutable */
    int wake_on_release;              /* immutable */
    int handoff_ms;                   /* immutable: how long a release reserves the key for the woken waiter */
    dlock__waker *wakers;             /* idle blocking connections (pool) */
    dlock__script scripts[DLOCK__SCRIPT_COUNT]; /* immutable after dlock_client_new */
    int count_reconnects;             /* 0 while dlock_client_new makes the first connections */
    /* the sentinel resolver thread (sentinel.c): asks without mu */
    pthread_cond_t rs_cond;           /* signalled when a node's master is wanted, and on stop */
    pthread_cond_t rs_done;           /* CLOCK_MONOTONIC; broadcast when an asking ended */
    pthread_t rs_thread;
    int rs_started;
    int rs_stop;
    uint32_t longest_ttl_ms;          /* longest TTL any acquire/extend sent: bounds a lagging node's silence */
    uint64_t rng[2];                  /* xorshift128+ state for retry jitter */
    dlock_stats stats;
    char errstr[DLOCK_ERRSTR_LEN];    /* detail of the last failed public call */
    char wd_errstr[DLOCK_ERRSTR_LEN]; /* the watchdog's own detail buffer (never races errstr) */
    /* watchdog (renew.c) */
    pthread_cond_t wd_cond;           /* CLOCK_MONOTONIC; signalled on stop and registration */
    pthread_cond_t cb_cond;           /* broadcast when an on_lost callback returns */
    dlock_lock *wd_cb_lock;           /* the lock whose on_lost runs now (without mu), or NULL */
    pthread_t wd_thread;
    int wd_started;
    int wd_stop;
    dlock_lock *renew_head;           /* registry of auto-renewed locks (singly linked) */
    /* lock caching (cache.c): the locks kept after their sections, and
     * the listener threads (one per node) that hear other clients want them */
    int cache_on;                     /* immutable: dlock_options.cache_locks */
    dlock_lock *cache_head;           /* kept locks, not in use (singly linked by cache_next) */
    uint32_t cache_listening;         /* nodes whose listener is subscribed now */
    char cache_unmatched[DLOCK__CACHE_UNMATCHED][DLOCK_TOKEN_LEN]; /* recent notices for no lock */
    size_t cache_unmatched_next;
    char cache_errstr[DLOCK_ERRSTR_LEN]; /* the listeners' and the cache's own detail buffer */
    int cache_pipe[2];                /* written once: the listeners stop */
    dlock__cache_listener cache_listeners[DLOCK_MAX_NODES];
    int cache_stop;
    dlock_lock *held_head;            /* handles granted and not yet released (lock.c; mu) */
    /* TLS (tls.c) */
    struct dlock__tls *tls;           /* immutable: the client's TLS setup, NULL when no node uses TLS */
};

/* The resources of a multi lock beyond what struct dlock_lock keeps for
 * resource 0 (multi.c). */
typedef struct dlock__multi {
    size_t n;                         /* 1..DLOCK_MAX_MULTI resources */
    char **names;                     /* owned copies, the caller's order; names[0] is lock->resource */
    uint64_t *fences;                 /* fences[i] of names[i]; fences[0] == lock->fence */
} dlock__multi;

struct dlock_lock {
    char *resource;                   /* owned copy, without the key prefix (multi: resource 0) */
    dlock__multi *multi;              /* dlock_acquire_multi: every resource; NULL for one resource */
    char token[DLOCK_TOKEN_LEN];      /* 32 hex digits + NUL */
    uint64_t fence;
    uint32_t may_hold;                /* nodes where the acquire may have set the key: the release reaches them all */
    uint64_t client_id;               /* immutable: id of the client that acquired it */
    int release_sent;                 /* a release reached the network (client mu) */
    uint32_t ttl_ms;                  /* TTL of the acquisition */
    uint32_t cur_ttl_ms;              /* TTL set by the last acquire/extend (client mu) */
    int64_t acquired_ms;              /* monotonic instant the acquire round started */
    _Atomic int64_t valid_until_ms;   /* atomic: updated by extend / the watchdog */
    _Atomic int state;                /* atomic: DLOCK__HELD / RELEASED / LOST */
    _Atomic uint32_t renewals;        /* atomic: successful automatic extensions */
    /* renewal registration: reg_client is atomic so dlock_lock_free can find
     * the mutex to take; the rest is guarded by reg_client->mu. */
    _Atomic(dlock_client *) reg_client;
    dlock_renew_options ropts;
    int64_t renew_base_ms;            /* start of the last successful acquire/extend round */
    int64_t renew_retry_ms;           /* when a failed renewal is tried again; 0 = not failing */
    int free_after_cb;                /* freed from inside its own on_lost: free when it returns */
    dlock_lock *reg_next;
    /* The client's list of handles not yet released (dlock__held_*):
     * held_in is that client while listed (atomic: dlock_lock_free reads
     * it without a mutex), owner the thread the acquire ran on. */
    _Atomic(dlock_client *) held_in;
    dlock_lock *held_prev, *held_next;
    pthread_t owner;
    char lost_detail[DLOCK_ERRSTR_LEN]; /* why the watchdog found it lost ("" until then) */
    /* lock caching (cache.c; client mu): */
    int cached;                       /* kept by its client, no section running */
    int wanted;                       /* another client asked for it: give it up, never reuse */
    int64_t cache_idle_until_ms;      /* a kept lock unused until then is given up */
    dlock_lock *cache_next;
};

/* The functions, each under the file that defines it. */

/* ---- client.c ---- */
/* dlock_client_new's work; connect 0 (the event-loop client) makes the
 * client without a connection, a sentinel resolver or a thread. */
dlock_err dlock__client_make(const dlock_options *opts, int connect, dlock_client **out,
                             char *errbuf, size_t errbuf_len);

/* ---- guard.c ---- */
/* The way into every public call on c. 0 with c->mu held and c->errstr
 * cleared (a success leaves no earlier failure to read). -1 in a child of
 * fork() (c->pid is another process), with why in c->errstr and the mutex
 * NOT taken: the parent's threads may have held it at the fork, and the
 * connections are the parent's. The caller answers DLOCK_ERR_ARG. */
int dlock__enter(dlock_client *c, const char *op);
/* Whether c was made by another process (we are a child of fork()). */
int dlock__forked(const dlock_client *c);

/* ---- error.c ---- */
void dlock__errf(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dlock__detailf(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *dlock__strerror(int err, char *buf, size_t len);

/* ---- clock.c ---- */
void dlock__sleep_ms(int64_t ms);
/* 0 when deadline_ms may be an instant on dlock_now_ms()'s clock: <= 0
 * (try once) or not before the library was loaded. Else -1 with why in
 * errbuf ("<op>: ... use <op>_for ..."): DLOCK_ERR_ARG for the caller. */
int dlock__deadline_check(int64_t deadline_ms, const char *op, char *errbuf);
/* 0 when ttl_ms is 1..DLOCK_MAX_TTL_MS; else -1 with "<op>: ..." (the
 * limit named) in errbuf: DLOCK_ERR_ARG for the caller. */
int dlock__ttl_check(uint32_t ttl_ms, const char *op, char *errbuf);
/* The deadline of a relative wait: INT64_MIN (try once) for wait_ms <= 0,
 * INT64_MAX when now + wait_ms would overflow. */
int64_t dlock__deadline_after(int64_t wait_ms);
/* ms as a struct timeval (hiredis timeouts); negative counts as 0. */
struct timeval dlock__tv_ms(int64_t ms);
/* The CLOCK_MONOTONIC timespec for the dlock_now_ms() instant at_ms, for
 * pthread_cond_timedwait (condvars take only REALTIME or MONOTONIC). */
void dlock__cond_deadline(int64_t at_ms, struct timespec *ts);
/* The drift allowance taken off a validity of ttl_ms (the distlock page's
 * CLOCK_DRIFT). */
int64_t dlock__drift_ms(const dlock_client *c, uint32_t ttl_ms);
/* The same for a span of any sign or size (a key's PTTL), clamped to 0..UINT32_MAX. */
int64_t dlock__drift_span_ms(const dlock_client *c, int64_t span_ms);

/* ---- token.c ---- */
int dlock__random_bytes(void *buf, size_t len);
int dlock__token_new(char out[DLOCK_TOKEN_LEN]);

/* ---- rng.c ---- */
void dlock__rng_seed(dlock_client *c);
/* Uniform in [lo, hi]; client mutex held. */
int64_t dlock__rng_range(dlock_client *c, int64_t lo, int64_t hi);

/* ---- keys.c: the key names (dlock.h, "Keys") ---- */
#define DLOCK__KEY_BUF (DLOCK_MAX_KEY_LEN + 8) /* room for the "fence:" namespace word */
/* <prefix>lock:<resource> and <prefix>fence:<resource>: 0, or -1 when it
 * does not fit in out[outlen]. */
int dlock__lock_key(const dlock_client *c, const char *resource, char *out, size_t outlen);
int dlock__fence_key(const dlock_client *c, const char *resource, char *out, size_t outlen);
/* <prefix><kind><resource>, kind DLOCK_WAITERS_NS. */
int dlock__wake_key(const dlock_client *c, const char *kind, const char *resource, char *out,
                    size_t outlen);
/* Keys and arguments of pass.lua for one resource:
 * - keys[3]: lock, fence, waiters;
 * - args[4]: token, the waiters' list prefix and suffix, and "1" when the
 *   releaser's own list may hold an announcement of rqueue.c's (Redlock
 *   with wake_on_release).
 * The buffers belong to the caller. 0, or -1 when a key is too long. */
typedef struct dlock__pass_buf {
    char key[DLOCK__KEY_BUF], fkey[DLOCK__KEY_BUF], waiters[DLOCK__KEY_BUF + 16];
    char list_prefix[DLOCK__KEY_BUF], list_suffix[DLOCK__KEY_BUF];
    const char *keys[3];
    const char *args[4];
} dlock__pass_buf;
int dlock__pass_prepare(const dlock_client *c, const char *resource, const char *token,
                        dlock__pass_buf *b);
/* A waiter's own list, <prefix>waiter:<token>:<resource>, from b's
 * prefix and suffix: where pass.lua pushes the fence of a key it hands to
 * that waiter. 0, or -1 when it does not fit in out[outlen]. */
int dlock__waiter_list(const dlock__pass_buf *b, const char *token, char *out, size_t outlen);
/* The keys of n resources: keys[0..n) the lock keys, keys[n..2n) their
 * fence counters, keys[2n..3n) their waiters sets. multi_acquire.lua and
 * multi_fence_sync.lua take a prefix of them, multi_release.lua all. Also
 * the release's arguments: args[0] the token (token; NULL until set),
 * args[1] n, args[2] the waiters' list prefix, args[3..3+n) each list's
 * suffix. NULL when out of memory or a key too long (names are checked at
 * acquire); free with free(). */
typedef struct dlock__multi_keys {
    size_t n;
    const char *keys[3 * DLOCK_MAX_MULTI];
    char buf[3 * DLOCK_MAX_MULTI][DLOCK__KEY_BUF + 16];
    const char *args[3 + DLOCK_MAX_MULTI];
    char n_s[24], list_prefix[DLOCK__KEY_BUF];
    char suffix[DLOCK_MAX_MULTI][DLOCK__KEY_BUF];
} dlock__multi_keys;
dlock__multi_keys *dlock__multi_keys_new(const dlock_client *c, const char *const *names,
                                         size_t n, const char *token);

/* ---- multi.c ---- */
/* The names of a several-resource call (dlock_acquire_multi,
 * dlock_try_acquire_each), checked before anything is sent: n is
 * 1..DLOCK_MAX_MULTI, ttl_ms in range, every name non-empty, fitting a key,
 * and none twice. 0, or -1 with "<op>: why" in c->errstr (DLOCK_ERR_ARG for
 * the caller). Client mutex held. */
int dlock__names_check(dlock_client *c, const char *op, const char *const *names, size_t n,
                       uint32_t ttl_ms);

/* ---- tally.c ---- */
size_t dlock__popcount(uint32_t mask);
uint32_t dlock__all_nodes(const dlock_client *c);
/* Frees the replies of res[0..n) and marks them unsent. */
void dlock__results_clear(dlock__result *res, size_t n);
/* Whether r is an error reply (starting with prefix, unless NULL). */
int dlock__reply_is_error(const dlock__result *r, const char *prefix);
/* The nodes that answered the integer value: their count, and their mask
 * in *mask_out unless NULL. */
size_t dlock__count_int(const dlock__result *res, size_t n, long long value, uint32_t *mask_out);
/* The addresses of the nodes of mask, ", "-separated, into out (cut to
 * outlen): for the details that name nodes. */
void dlock__nodes_text(const dlock_client *c, uint32_t mask, char *out, size_t outlen);
/* Stop rule of release and extend: a quorum (*arg) answered 1. */
int dlock__quorum_of_ones(const dlock__result *res, size_t n, void *arg);
/* The code of a round where too few nodes of mask answered: one node's own
 * failure, or NO_QUORUM unless every failed node failed alike with AUTH or
 * PROTOCOL; why in errbuf. */
dlock_err dlock__unavailable(const dlock_client *c, const dlock__result *res, uint32_t mask,
                             uint32_t answered, char *errbuf);

/* ---- breaker.c ---- */
/* Opens node's breaker (code and detail: how it failed, for the results of
 * the rounds that skip it), or doubles the delay before its next probe. */
void dlock__breaker_trip(dlock_client *c, dlock__node *node, dlock_err code, const char *detail);
/* The node answered everything it owed: it takes part again. */
void dlock__breaker_heard(dlock__node *node);
/* A tripped node without a connection whose reconnect is due at now. */
int dlock__breaker_probe_due(const dlock__node *node, int64_t now);

/* ---- conn.c ---- */
void dlock__node_close(dlock__node *node);
void dlock__connect_nodes(dlock_client *c, uint32_t mask, dlock__result *res);
int dlock__poll(struct pollfd *pfd, size_t k, int timeout_ms, char *ebuf, size_t ebuflen);

/* Connections without waiting: a round starts the connect, queues its
 * command behind it and finishes the connect in its own poll loop. */
void dlock__conn_start(dlock_client *c, dlock__node *node, dlock__result *r);
/* What a new connection of node starts from (both clients): CONNECTING
 * now, nothing pending or owed, no script known to the server. */
void dlock__conn_fresh(dlock__node *node);
/* Caps how many elements a reply on ctx may announce (reader.c says why);
 * every connection libdlock opens gets it. */
void dlock__reader_bound(redisContext *ctx);
int dlock__conn_finish(dlock_client *c, dlock__node *node, dlock__result *r);
int dlock__conn_write(dlock__node *node, char *ebuf);
/* What a CONNECTING node's poll waits for: POLLOUT for its TCP connect,
 * then what its TLS handshake asks (rounds.c polls with it). */
short dlock__conn_connect_events(const dlock__node *node);
/* node->ctx->errstr after a failed read, with what it likely means when
 * the connection fell before its first reply (a plaintext client at a
 * TLS port); valid while the connection lives. */
const char *dlock__conn_lost_why(dlock__node *node);

/* The reply stream of a node's connection: rounds go through these and
 * never touch auth_pending, auth_failed or stale themselves. */
void dlock__conn_prepare(dlock_client *c);
/* -2 from dlock__conn_next_reply: the node reaches the same server as
 * another node (their INFO run ids agree) and is refused for good: the
 * caller closes it (dlock__conn_refuse). */
#define DLOCK__CONN_SAME_SERVER (-2)
int dlock__conn_next_reply(dlock_client *c, dlock__node *node, redisReply **out);
int dlock__conn_handshake_reply(dlock_client *c, dlock__node *node, redisReply *reply);
/* Closes an event-loop client's connection (async_conn.c): called by
 * dlock__node_close, so every rule that drops a node drops it there too. */
void dlock__async_node_close(dlock__node *node);
void dlock__conn_refuse(dlock_client *c, dlock__node *node);
const char *dlock__conn_auth_refusal(const dlock__node *node, const redisReply *reply);
int dlock__conn_owe(dlock__node *node);
int dlock__conn_background(const dlock__node *node);
void dlock__conn_service(dlock_client *c, dlock__node *node, short revents);
int64_t dlock__conn_connect_deadline(const dlock_client *c, const dlock__node *node);
void dlock__conn_expire(dlock_client *c, dlock__node *node, int64_t now);
/* A connect of a sentinel node needs a master nobody asked for yet: flags
 * the node and wakes the resolver thread (sentinel.c), which answers in
 * node->master (client mutex held, nothing waits). */
void dlock__conn_ask_master(dlock_client *c, dlock__node *node);

typedef struct dlock__sigpipe_guard {
    sigset_t old;   /* the caller thread's mask before the guard */
    int was_pending; /* a SIGPIPE was already pending: not ours to consume */
    int active;
} dlock__sigpipe_guard;
void dlock__sigpipe_block(dlock__sigpipe_guard *g);
void dlock__sigpipe_restore(dlock__sigpipe_guard *g);

/* AUTH, for the round connections and the blocking ones (wake.c,
 * sentinel.c) alike: "AUTH [username] password" with c's credentials into
 * argv, its argc; 0 when c has no password (then no AUTH is sent). */
int dlock__auth_argv(const dlock_client *c, const char *argv[3]);

/* ---- tls.c: TLS for every connection of the library ---- */
/* One client's TLS setup, made once in dlock_client_new (the SSL context
 * with its CAs, client certificate and the name to check) and shared by
 * its connections, the round ones (conn.c), the blocking ones (wake.c,
 * sentinel.c) and the async client's. Immutable once made. */
typedef struct dlock__tls dlock__tls;
struct ssl_st;
/* Whether this build speaks TLS at all (hiredis with hiredis_ssl). */
int dlock__tls_built(void);
/* Makes the setup from o's tls_* fields: 0 with *out set, or -1 with why
 * in err[errlen] (a file that does not load, a key that does not match
 * its certificate, a build without TLS: how to build with it). */
int dlock__tls_new(const dlock_options *o, dlock__tls **out, char *err, size_t errlen);
void dlock__tls_free(dlock__tls *t);
/* Starts TLS on ctx, a connected hiredis context, for the server host
 * (checked in its certificate unless the setup names another). A
 * blocking ctx: the whole handshake, bounded by the timeouts set on ctx
 * (redisSetTimeout before); a non-blocking one: its first step, the rest
 * by dlock__tls_step. 0 with the connection's TLS state in *ssl_out
 * (owned by ctx, NULL allowed), or -1 with why in detail
 * (DLOCK__DETAIL_LEN): unknown CA, name mismatch, a plaintext port. The
 * async client passes &ac->c. */
int dlock__tls_start(const dlock__tls *t, redisContext *ctx, const char *host,
                     struct ssl_st **ssl_out, char *detail);
/* One step of a non-blocking handshake: 1 done, 0 waiting for *events
 * (POLLIN or POLLOUT) on the socket, -1 failed with why in detail. */
int dlock__tls_step(struct ssl_st *ssl, short *events, char *detail);

/* ---- sentinel.c: nodes found through Redis Sentinel ---- */
/* Asks a's sentinels in order for the master's address and checks with
 * ROLE that it is a master: 0 with the address in *out, or -1 with why in
 * detail (DLOCK__DETAIL_LEN bytes). Blocking, every step bounded by the
 * client's timeouts; reads only immutable fields of c, so it runs without
 * the client mutex. */
int dlock__sentinel_master(const dlock_client *c, const dlock__addr *a, dlock__hostport *out,
                           char *detail);
/* The asking runs without the client mutex (sentinel.c says why): in
 * dlock_client_new for the first connect, then in the client's resolver
 * thread. _start (in dlock_client_new, no other thread yet) asks for every
 * sentinel node once and starts the thread when there is one; 0, or -1
 * when the thread could not start. _stop ends it (dlock_client_free). */
int dlock__sentinel_start(dlock_client *c);
void dlock__sentinel_stop(dlock_client *c);
/* Client mutex held: when a sentinel node has no connection and no fresh
 * answer, asks the resolver and waits for it with the mutex released, at
 * most until until_ms (and never longer than one full asking). For the
 * start of a call and between retries, where the caller holds nothing
 * that another thread could change under it; never inside a round. */
void dlock__sentinel_await(dlock_client *c, int64_t until_ms);
/* Whether reply says the node is no longer a master (-READONLY): the
 * caller drops a sentinel node's connection, so that its next connect asks
 * the sentinels again. */
int dlock__sentinel_demoted(const dlock__addr *a, const redisReply *reply);

/* ---- rounds.c ---- */
/* The deadline of the public call running on this thread (INT64_MAX: none,
 * as for the watchdog's rounds and dlock_client_new): no round of it lasts
 * past that plus one command timeout, whatever the nodes do. Set by
 * dlock__call_begin, restored by dlock__call_end (thread-local, so other
 * threads' rounds on a shared client keep their own). */
extern _Thread_local int64_t dlock__call_deadline_ms;
/* deadline_ms as the call's bound (a try, deadline in the past: now);
 * returns the previous value for dlock__call_end. */
int64_t dlock__call_begin(int64_t deadline_ms);
void dlock__call_end(int64_t previous);
int dlock__round(dlock_client *c, uint32_t mask, uint32_t reach, int argc, const char **argv,
                 const size_t *argvlen, dlock__result *res, dlock__stop_fn stop, void *stop_arg);
void dlock__send_only(dlock_client *c, uint32_t mask, int argc, const char **argv,
                      const size_t *argvlen);

/* ---- script.c ---- */
void dlock__scripts_init(dlock_client *c);
void dlock__script_round(dlock_client *c, uint32_t mask, uint32_t reach, dlock__script_id id,
                         const char *const *keys, int nkeys, const char *const *args, int nargs,
                         dlock__result *res, dlock__stop_fn stop, void *stop_arg);
void dlock__script_send_only(dlock_client *c, uint32_t mask, dlock__script_id id,
                             const char *const *keys, int nkeys, const char *const *args,
                             int nargs);

/* ---- retry.c ---- */
/* Whether a failed attempt (rc) is tried again while time is left. */
int dlock__should_retry(const dlock_client *c, dlock_err rc);
int64_t dlock__backoff_ms(dlock_client *c, unsigned attempt);
/* Client mutex held (and held again on return): sleeps the backoff of
 * attempt, at most until deadline_ms, with the mutex released. */
void dlock__backoff_sleep(dlock_client *c, unsigned attempt, int64_t now, int64_t deadline_ms);

/* ---- wake.c ---- */
dlock__waker *dlock__waker_take(dlock_client *c);
void dlock__waker_put(dlock_client *c, dlock__waker *w);
void dlock__wakers_free(dlock_client *c);
/* Opens node i's blocking connection of w if needed (connect bounded by
 * connect_timeout_ms; hiredis connects non-blocking and polls), with TLS
 * and AUTH; also the cache's subscriber connections (cache.c). 0 when
 * usable. */
int dlock__waker_open(const dlock_client *c, dlock__waker *w, size_t i);

/* Every BLPOP an earlier user of w left pending, settled (queue.c and
 * rqueue.c, when they take a waker). */
void dlock__waker_settle(dlock__waker *w);
/* The hand-off wait (queue.c on node 0, rqueue.c on every node of mask):
 * BLPOP list on the nodes of mask at once (a node already waiting keeps
 * its BLPOP), for at most block_ms by our clock; no client mutex held. Returns the mask of nodes whose BLPOP popped a
 * message (msgs[i], "<fence>"), 0 when none came in time. */
#define DLOCK__RQ_MSG_LEN 48
uint32_t dlock__wake_pop_any(const dlock_client *c, dlock__waker *w, uint32_t mask,
                             const char *list, int64_t block_ms,
                             char msgs[DLOCK_MAX_NODES][DLOCK__RQ_MSG_LEN]);

/* ---- lock.c ---- */
/* What a grant knows:
 * - the key's token and fence, and its TTL;
 * - base_ms: the instant its TTL is counted from at the earliest (renewal
 *   is due a third of a TTL after it);
 * - valid_until_ms, on dlock_now_ms()'s clock, drift already taken off;
 * - the nodes the release must reach. */
typedef struct dlock__grant {
    const char *resource;
    const char *token;
    uint64_t fence;
    uint32_t ttl_ms;
    int64_t base_ms;
    int64_t valid_until_ms;
    uint32_t may_hold;
} dlock__grant;
/* The one place a held handle is made, for every path (plain, queued,
 * Redlock queued, multi). Returns:
 * - DLOCK_OK with *out set;
 * - DLOCK_ERR_EXPIRED when the validity has already run out (a handle is
 *   never returned with validity <= 0, whatever round came between the
 *   keys' answers and now);
 * - DLOCK_ERR_NOMEM.
 * Either error leaves *out alone and says why in errbuf;
 * the caller then hands its keys back. */
dlock_err dlock__lock_grant(const dlock_client *c, const dlock__grant *g, char *errbuf,
                            dlock_lock **out);
/* The handles a client has handed out and not yet released, and the
 * thread that took each (client mutex held for all three). held_add lists
 * a new handle for the calling thread. held_remove unlists one (a no-op
 * when not listed). held_by_caller returns a handle of the calling thread
 * that still holds one of names[0..n) with validity left, or NULL: libdlock
 * locks are not reentrant, and waiting on yourself waits out the wait. */
void dlock__held_add(dlock_client *c, dlock_lock *lock);
void dlock__held_remove(dlock_client *c, dlock_lock *lock);
const dlock_lock *dlock__held_by_caller(const dlock_client *c, const char *const *names,
                                        size_t n, const char **which);
/* Unlists every handle (dlock_client_free: handles outlive their client). */
void dlock__held_clear(dlock_client *c);
/* Frees the handle's memory (no unregistering, no waiting); NULL ok. */
void dlock__lock_destroy(dlock_lock *lock);
/* 0 when lock was acquired by c; else -1 with why in errbuf ("<op>: ..."). */
int dlock__check_owner(const dlock_client *c, const dlock_lock *lock, const char *op,
                       char *errbuf);

/* ---- queue.c: one node, wake_on_release (FIFO with direct hand-off) ---- */
/* dlock_acquire's loop for one node with wake_on_release and time to wait;
 * client mutex held on entry and on return. */
dlock_err dlock__acquire_queued(dlock_client *c, const char *resource, uint32_t ttl_ms,
                                int64_t deadline_ms, dlock_lock **out);

/* ---- rqueue.c: Redlock, wake_on_release ---- */
/* dlock_acquire's loop for several nodes with wake_on_release and time to
 * wait: every node's FIFO queue with direct hand-off, the lock held once a
 * quorum handed it over (docs/redlock.md). Mutex held. */
dlock_err dlock__acquire_rqueued(dlock_client *c, const char *resource, uint32_t ttl_ms,
                                 int64_t deadline_ms, dlock_lock **out);

/* ---- release.c ---- */
/* The release of one resource (lock key + the wake or queue keys that
 * hand it to a waiter) on the nodes of mask; as dlock_release's round.
 * ones_mask / zeros_mask: nodes that answered 1 (deleted or handed on) or
 * 0 (not our token). Client mutex held. */
void dlock__release_round(dlock_client *c, const char *resource, const char *token,
                          uint32_t mask, uint32_t reach,
                          uint32_t *ones_mask, uint32_t *zeros_mask, dlock__result *res);
/* The release round of a multi lock on the nodes of mask: every key still
 * holding its token is handed to its oldest queued waiter, or deleted
 * (multi_release.lua, in one step per node). ones_mask:
 * nodes where every key held the token; zeros_mask: nodes that answered
 * otherwise. Client mutex held. */
void dlock__multi_release_round(dlock_client *c, const dlock_lock *lock, uint32_t mask,
                                uint32_t reach, uint32_t *ones_mask, uint32_t *zeros_mask,
                                dlock__result *res);

/* What a release round says of one lock:
 * - DLOCK_OK when a quorum (ones_mask) deleted or handed on its key;
 * - DLOCK_ERR_LOST (the lock marked lost) when so many nodes answered "not
 *   our token" (zeros_mask) that no quorum can still hold it;
 * - else an unavailable code.
 * Counts releases / lost / errors; why in errbuf. Client mutex held. */
dlock_err dlock__release_outcome(dlock_client *c, dlock_lock *lock, uint32_t ones_mask,
                                 uint32_t zeros_mask, const dlock__result *res, char *errbuf);
/* The nodes of mask a one-node client sent a release to without an answer
 * (timed out, or the round ended first): they may yet answer NOSCRIPT, so
 * the caller sends the script's body behind it. 0 with Redlock, where a
 * lagging minority would get a second command queued per release. */
uint32_t dlock__release_unanswered(const dlock_client *c, uint32_t mask,
                                   const dlock__result *res);
/* 0 when lock may be released by c: not NULL, c's, not released before
 * (a second round would only find the first one's deletes done and answer
 * a false LOST); else -1 with "<op>: why" in errbuf (DLOCK_ERR_ARG). */
int dlock__release_ready(const dlock_client *c, const dlock_lock *lock, const char *op,
                         char *errbuf);
/* dlock_release's work, client mutex held (the cache's listener gives
 * locks up with it): why in errbuf. */
dlock_err dlock__release_locked(dlock_client *c, dlock_lock *lock, char *errbuf);
/* Stops the lock's renewal and marks it released (release_sent, off the
 * held list, RELEASED unless LOST): what every release does before its
 * round, under the same mutex the watchdog renews under. */
void dlock__release_mark(dlock_client *c, dlock_lock *lock);

/* ---- extend.c ---- */
dlock_err dlock__extend_locked(dlock_client *c, dlock_lock *lock, uint32_t ttl_ms,
                               char *errbuf);

/* ---- cache.c ---- */
/* Starts the listeners (dlock_client_new with cache_locks): 0, or -1 with
 * why. */
int dlock__cache_start(dlock_client *c, char *why, size_t whylen);
/* Stops the listeners and gives up every kept lock (dlock_client_free,
 * without the mutex). */
void dlock__cache_stop(dlock_client *c);
/* For the watchdog: gives up the kept locks unused past their idle time
 * or found lost (the mutex is let go around each free); returns when the
 * next idle time ends, INT64_MAX with none. Mutex held. */
int64_t dlock__cache_idle_expired(dlock_client *c, int64_t now);

/* ---- renew.c ---- */
void dlock__renew_unregister_locked(dlock_client *c, dlock_lock *lock);
/* The renewal rules, for the watchdog thread and the event-loop client's
 * timer alike; client mutex held. */
/* Checks and lists lock for renewal by c (dlock_auto_renew's part that
 * starts no thread): OK, ARG or LOST with why in c->errstr. */
dlock_err dlock__renew_register(dlock_client *c, dlock_lock *lock,
                                const dlock_renew_options *ropts);
/* Starts c's watchdog thread if it runs not yet and wakes it for lock,
 * just registered (unregistered again when the thread cannot start: NOMEM
 * with "<op>: why" in c->errstr). Client mutex held. */
dlock_err dlock__watchdog_start(dlock_client *c, dlock_lock *lock, const char *op);
/* When the lock is next due (a third of its TTL after its last renewal,
 * or its retry time). */
int64_t dlock__renew_due_ms(const dlock_lock *lock);
typedef enum dlock__renew_step {
    DLOCK__RENEW_STOP,  /* limits reached: unregister, let the lease run out (no on_lost) */
    DLOCK__RENEW_LOST,  /* the validity ran out first: lost (why in c->wd_errstr) */
    DLOCK__RENEW_EXTEND /* extend to dlock__renew_ttl(lock) */
} dlock__renew_step;
dlock__renew_step dlock__renew_next(dlock_client *c, dlock_lock *lock, int64_t now);
uint32_t dlock__renew_ttl(const dlock_lock *lock);
/* After the extension (rc): 0 renewed or a retry scheduled, -1 lost. */
int dlock__renew_settle(dlock_client *c, dlock_lock *lock, dlock_err rc);
/* Marks lock lost and calls its on_lost once, with the mutex released
 * around the call and c->wd_cb_lock naming the lock; unregisters it. */
void dlock__renew_mark_lost(dlock_client *c, dlock_lock *lock, dlock_err why);
void dlock__watchdog_stop(dlock_client *c);

#endif /* DLOCK_INTERNAL_H */
