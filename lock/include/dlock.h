/* dlock.h - libdlock: Redis distributed locks done right.
 *
 * One API for a single Redis master and for Redlock over N independent
 * masters: give one address and you get the single-instance lock of the
 * Redis "distlock" page, give N (3 or 5) and you get Redlock (quorum N/2+1,
 * validity = TTL - elapsed - drift). Every acquisition carries a random
 * 128-bit token (so only the owner can release or extend) and a fencing
 * token that is strictly greater than every earlier one for the resource
 * (so storage can refuse a stale holder).
 *
 * Conventions, for every function below:
 * - Errors: functions that can fail return dlock_err (DLOCK_OK == 0). Out
 *   parameters are set on every path (NULL / 0 on failure). Detail text
 *   for the last failure (which node, what reply) is kept in the client
 *   and copied out with dlock_client_errstr(); error paths never allocate.
 * - Time: all durations are milliseconds; all instants are milliseconds on
 *   the library's clock, dlock_now_ms(): CLOCK_BOOTTIME where the system
 *   has it (it keeps counting while the host is suspended, so a lease does
 *   not look valid after a sleep longer than its TTL), else
 *   CLOCK_MONOTONIC; never wall-clock time. Build deadlines from
 *   dlock_now_ms(), not from another clock.
 * - Ownership: every *_new / acquire has exactly one matching *_free, and
 *   every *_free accepts NULL.
 * - Threads: a dlock_client is safe to use from several threads; its calls
 *   are serialised by an internal mutex (they never hold it while sleeping
 *   between retries). For parallelism, use one client per thread. A
 *   dlock_lock belongs to one thread at a time, and to the client that
 *   acquired it: release, extend and auto_renew with any other client are
 *   refused with DLOCK_ERR_ARG (that client's nodes and key prefix are not
 *   where the lock lives).
 * - Network: every call is bounded by the connect and command timeouts of
 *   dlock_options; a paused or dead Redis gives an error, never a hang. A
 *   broken connection is re-established on the next call.
 */
#ifndef DLOCK_H
#define DLOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The one source of truth for the version: CMake reads these lines. */
#define DLOCK_VERSION_MAJOR 1
#define DLOCK_VERSION_MINOR 0
#define DLOCK_VERSION_PATCH 0

#if defined(DLOCK_BUILDING) && defined(__GNUC__)
#define DLOCK_API __attribute__((visibility("default")))
#else
#define DLOCK_API
#endif

/* Longest resource name (after the key prefix is added), in bytes. */
#define DLOCK_MAX_KEY_LEN 512

/* Keys. For a client with key prefix P, the resource R lives on every node
 * under two keys, in disjoint namespaces (no resource name can make one
 * equal to the other, since the namespace words differ in their first byte):
 *   P "lock:" R    the lock: a string holding the owner's token, with a TTL
 *                  (SET NX PX); gone when released or expired.
 *   P "fence:" R   the fencing counter: an integer, no TTL, only ever raised
 *                  (INCR on each acquisition, raised to the quorum's maximum
 *                  after a node missed acquisitions). Deleting it lets
 *                  fences restart at 1: never do that while any store still
 *                  holds a fence of R.
 * With wake_on_release (see dlock_options) short-lived keys join them, on
 * every node:
 *   P "waiters:" R a sorted set: the waiters queued now, each member
 *                  "<token>:<ttl>:<stay ms>", scored with the node's time
 *                  (microseconds) it was first listed (with Redlock the
 *                  waiter's own wall clock at the start of its call, moved
 *                  onto the node's clock when the two are far apart): a
 *                  release hands the key to the oldest
 *                  live one; the key expires when the last listing does.
 *   P "waiter:" T ":" R  waiter T's own list (T = its 32-hex-digit token),
 *                  where the release that handed it the key pushes
 *                  "<fence>"; lives at most a TTL.
 * So SCAN MATCH P"lock:*" lists the locks held now, P"fence:*" the
 * resources ever locked; the text after the namespace word is the resource
 * as given to dlock_acquire (what dlock_lock_resource returns). */
#define DLOCK_LOCK_NS "lock:"
#define DLOCK_FENCE_NS "fence:"
#define DLOCK_WAITERS_NS "waiters:"
#define DLOCK_WAITER_NS "waiter:"
/* Most Redis masters one client may use (Redlock with N nodes). */
#define DLOCK_MAX_NODES 16
/* Length of a token as text: 32 lowercase hex digits + NUL. */
#define DLOCK_TOKEN_LEN 33
/* Size of the per-client error detail buffer. */
#define DLOCK_ERRSTR_LEN 256

/* Error codes. Values are only ever appended, never renumbered. */
typedef enum dlock_err {
    DLOCK_OK = 0,              /* success */
    DLOCK_ERR_ARG = 1,         /* bad argument: NULL, ttl 0, empty or oversized key, bad address */
    DLOCK_ERR_TAKEN = 2,       /* someone else holds the lock (contention: retrying may help) */
    DLOCK_ERR_TIMEOUT = 3,     /* single node: Redis did not answer within the command timeout */
    DLOCK_ERR_UNREACHABLE = 4, /* single node: cannot connect, or the connection broke */
    DLOCK_ERR_NO_QUORUM = 5,   /* Redlock: fewer than N/2+1 nodes answered (down, paused, erroring) */
    DLOCK_ERR_LOST = 6,        /* release/extend/renewal: the lock is no longer ours (expired, taken over) */
    DLOCK_ERR_EXPIRED = 7,     /* acquire: quorum reached but validity used up (elapsed + drift >= TTL) */
    DLOCK_ERR_NOMEM = 8,       /* out of memory */
    DLOCK_ERR_PROTOCOL = 9,    /* Redis answered with an error or an unexpected reply */
    DLOCK_ERR_AUTH = 10,       /* AUTH refused (wrong password / ACL user) */
    DLOCK_ERR_FENCE_SYNC = 11, /* acquire: a quorum granted the lock, but the fence counters of
                                  the lagging nodes among them could not be raised (no answer
                                  or an error reply to the sync): no lock is handed out, since
                                  its fence might be undercut by a later holder */
    DLOCK_ERR_CANCELLED = 12   /* event-loop client: the call was cancelled (dlock_async_cancel,
                                  dlock_async_free) before it completed; a key it was granted
                                  meanwhile has been handed on */
} dlock_err;

/* Static text for a code; never NULL (unknown codes get a generic text). */
DLOCK_API const char *dlock_strerror(dlock_err err);

/* Node addresses. One address is one node (one vote of the quorum):
 *   "host:port", "[v6]:port"   a Redis master over TCP; without ":port"
 *   "host", "[v6]", "localhost" (e.g.) port 6379
 *   "redis://[[user]:password@]host[:port][/0]"
 *                              the same as a URL, as Redis clients write
 *                              it. The credentials become the client's
 *                              (AUTH user password, or AUTH password for
 *                              ":password@"): one client has one set, so
 *                              the options' username/password and every
 *                              URL that gives credentials must agree, else
 *                              dlock_client_new answers DLOCK_ERR_ARG. In
 *                              the user and the password, %XX escapes are
 *                              decoded (write ',' as %2C in a --redis
 *                              list, '@' may stay). A database other than
 *                              0, a query (?...) and rediss:// (TLS) are
 *                              refused. Messages show the password as ***.
 *   "unix:/path"               a Redis master over a unix socket
 *   "sentinel://host[:port][,host[:port]...]/name" (port 26379 if none)
 *                              the master that Redis Sentinel calls `name`:
 *                              1..8 sentinels, asked in order (without AUTH)
 *                              on every (re)connect; the address they give is
 *                              used only if its ROLE says master. A failover
 *                              is followed on the next reconnect (a broken
 *                              connection or a -READONLY reply). Such a node
 *                              is weaker than an independent master: Redis
 *                              replicates asynchronously, so a failover can
 *                              lose a lock (two holders) and move its fence
 *                              counter back. See docs/sentinel.md.
 * Checks one node address exactly as dlock_client_new will parse it, so an
 * application can refuse a bad --redis at start-up with the library's own
 * rules. DLOCK_OK, or DLOCK_ERR_ARG with a one-line reason in err (NULL ok). */
DLOCK_API dlock_err dlock_addr_check(const char *addr, char *err, size_t errlen);
/* The same parse, with its parts: host (IPv6 without brackets, or the unix
 * socket path) into host[hostlen], *port the TCP port or 0 for a unix socket.
 * A sentinel:// address has no fixed host: host gets the master name and
 * *port is -1 (a caller that connects by itself must refuse it or ask the
 * sentinels). */
DLOCK_API dlock_err dlock_addr_parse(const char *addr, char *host, size_t hostlen, int *port, char *err,
                                     size_t errlen);
/* The credentials of a redis://user:password@host address: user ("" when
 * the URL gives only ":password") into user[userlen], the password into
 * password[passlen], both "" for an address without credentials. For a
 * program that connects by itself (dlockctl). DLOCK_OK, or DLOCK_ERR_ARG
 * with the reason in err (NULL ok) for a bad address or short buffers. */
DLOCK_API dlock_err dlock_addr_credentials(const char *addr, char *user, size_t userlen,
                                           char *password, size_t passlen, char *err,
                                           size_t errlen);

/* The address as logs and replies may show it: a redis:// password
 * replaced by *** ("redis://u:***@h:1"), other forms as given, "(bad
 * address)" for one that does not parse. Into out[outlen] (truncated,
 * NUL-terminated); returns out ("" when out is NULL or outlen is 0). */
DLOCK_API const char *dlock_addr_shown(const char *addr, char *out, size_t outlen);

/* The length of the first address of a comma-separated list such as
 * "h1:6379,sentinel://s1:26379,s2:26379/m,unix:/s": up to the first comma,
 * except that a sentinel:// address keeps the commas of its sentinel list
 * (it ends at the first comma after its '/', or at the end of the list
 * when it has no '/'). 0 for NULL or "". Split a
 * --redis list with it, then check each address with dlock_addr_check. */
DLOCK_API size_t dlock_addr_span(const char *list);

/* Nonzero when the error means "the lock service is unavailable" (TIMEOUT,
 * UNREACHABLE, NO_QUORUM, AUTH, PROTOCOL, FENCE_SYNC) as opposed to contention (TAKEN)
 * or an expired/lost lock. Apps map this to HTTP 503 "unavailable". */
DLOCK_API int dlock_err_is_unavailable(dlock_err err);

/* Now on the library's clock (CLOCK_BOOTTIME, else CLOCK_MONOTONIC; see
 * "Time" above), in milliseconds. Deadlines are built from it:
 * deadline = dlock_now_ms() + wait_ms. Thread-safe. */
DLOCK_API int64_t dlock_now_ms(void);

/* Client configuration. Call dlock_options_init() first: it fills every
 * field with its default, then set what you need. The client copies
 * everything it keeps; the strings need only live during dlock_client_new. */
typedef struct dlock_options {
    const char *const *addrs;  /* "host:port", "unix:/path", "rediss://host:port" (TLS) or
                                  "sentinel://h:p[,h:p...]/name" (see
                                  dlock_addr_check); 1 = single instance, N = Redlock. No default. */
    size_t n_addrs;            /* 1..DLOCK_MAX_NODES */
    const char *username;      /* ACL user for AUTH, or NULL (password-only AUTH) */
    const char *password;      /* AUTH password, or NULL (no AUTH) */
    const char *key_prefix;    /* prepended to every resource name; default "" */
    int connect_timeout_ms;    /* per node; default 200 */
    int command_timeout_ms;    /* per round trip, all nodes in parallel; default 100 */
    double drift_factor;       /* clock drift allowance as a fraction of the TTL; default 0.01 */
    int drift_min_ms;          /* added to the drift; default 2 */
    int retry_base_ms;         /* first backoff cap; default 2 */
    int retry_max_ms;          /* backoff cap ceiling; default 50 */
    int retry_fixed_ms;        /* if > 0: sleep retry_fixed_ms +- retry_jitter_ms instead of backoff; default 0 */
    int retry_jitter_ms;       /* jitter for the fixed mode; default 0 */
    int retry_unavailable;     /* nonzero: also retry (until the deadline) when nodes are unreachable,
                                  time out or lack quorum; default 0 = return such errors at once */
    int wake_on_release;       /* nonzero (default 1): a waiter queues on every node and blocks
                                  (BLPOP, on its own extra connection) until a release hands it
                                  the key (FIFO): it holds the lock when that key is its own on
                                  one node, or on a quorum with Redlock, with no round to claim
                                  it; the backoff above remains the fallback when no hand-off
                                  comes (holder died). Every release (single or multi) hands
                                  over to queued waiters whatever this flag says. 0 = poll with
                                  backoff only. See docs/single-instance.md, docs/redlock.md. */
    /* TLS (docs/libdlock.md, "TLS"). A node is reached over TLS when its
     * address is rediss://host[:port], or every node - sentinels and the
     * masters they name too - when tls is nonzero. The server's certificate
     * is verified against the CAs below and must name the host of the
     * address (or tls_server_name), which is also sent as SNI. Needs a
     * libdlock built with TLS (docs/building.md); without it a TLS node is
     * refused by dlock_client_new, saying how to build with it. */
    int tls;                       /* nonzero: every node over TLS; default 0 */
    const char *tls_ca_file;       /* PEM file of the CAs to trust; NULL with tls_ca_dir NULL:
                                      the system's default CAs */
    const char *tls_ca_dir;        /* directory of hashed CA certificates (openssl rehash), or NULL */
    const char *tls_cert_file;     /* client certificate (PEM), for servers with tls-auth-clients */
    const char *tls_key_file;      /* its private key (PEM); given with tls_cert_file */
    const char *tls_server_name;   /* the name checked in every node's certificate and sent as
                                      SNI; NULL: each node's own host */
    int tls_insecure_skip_verify;  /* nonzero: NO certificate or name check - anyone on the path
                                      can pose as the server; for tests only; default 0 */
    int cache_locks;               /* nonzero: dlock_keep may cache locks; the client listens for
                                      other clients wanting them (a subscriber connection per
                                      node, a thread); default 0 */
} dlock_options;

DLOCK_API void dlock_options_init(dlock_options *opts);

typedef struct dlock_client dlock_client; /* connections to the N masters + scripts + watchdog */
typedef struct dlock_lock dlock_lock;     /* one acquisition: resource, token, fence, validity */

/* Create a client. Connects to every node (bounded by connect_timeout_ms);
 * an unreachable node is not an error here (Redlock tolerates a minority;
 * connection is retried on each later call), but bad options are:
 * DLOCK_ERR_ARG with detail in *errbuf if errbuf != NULL. Two addresses
 * naming the same node (equal host and port after parsing, host compared
 * without case, or the same unix socket path) are bad options: that node
 * would count twice toward the quorum, so one node could grant a lock that
 * Redlock means to need a majority for.
 * On success *out owns the client: free with dlock_client_free().
 * Every node unreachable is still DLOCK_OK (the first calls then fail as
 * unavailable, and the client reconnects by itself when the nodes come
 * up). To fail fast at start-up instead, ask right after:
 *   if (dlock_ping(c, NULL) != DLOCK_OK) { report dlock_client_errstr; exit }
 * dlock_ping answers DLOCK_OK only when a quorum answered PING (and AUTH).
 * On DLOCK_OK, errbuf (when given) holds a note on the configuration, or
 * "" when there is none: with 2 or 4 nodes it says that an even count
 * tolerates no more failed nodes than one node fewer (2 tolerate 0, like 1;
 * 4 tolerate 1, like 3), so the extra node buys no availability. */
DLOCK_API dlock_err dlock_client_new(const dlock_options *opts, dlock_client **out,
                                     char *errbuf, size_t errbuf_len);

/* Stops the watchdog thread (if any), closes every connection and frees the
 * client. Locks still held are not released (their TTL frees them); lock
 * handles stay valid to free; any other client refuses them (DLOCK_ERR_ARG).
 * Accepts NULL. */
DLOCK_API void dlock_client_free(dlock_client *c);

/* Detail of the last failed call on this client (which node, what reply),
 * copied under the client's mutex into buf[len] (truncated to fit, always
 * NUL-terminated when len > 0; DLOCK_ERRSTR_LEN always fits). A copy, not
 * the client's buffer: another thread's call may rewrite that at any
 * moment. Returns buf, so the call can sit in a printf argument list; for
 * a NULL client the text is "client is NULL". A call that succeeds leaves
 * it empty. The watchdog's renewal failures are not written here: on_lost
 * gets the code, and dlock_lock_lost_detail the nodes and their answers.
 * In a child of fork() every call on a client made before the fork is
 * DLOCK_ERR_ARG (its connections and watchdog are the parent's; this text
 * says so): make a new client in the child. dlock_client_free there frees
 * the child's copy only. */
DLOCK_API const char *dlock_client_errstr(dlock_client *c, char *buf, size_t len);

/* Number of nodes and the quorum (N/2 + 1) of this client. */
DLOCK_API size_t dlock_client_nodes(const dlock_client *c);
DLOCK_API size_t dlock_client_quorum(const dlock_client *c);

/* PING every node in parallel; *up_out (may be NULL) gets how many answered.
 * DLOCK_OK iff at least a quorum answered; else an unavailable code: with
 * one node its own failure (TIMEOUT, UNREACHABLE, AUTH, PROTOCOL); with N
 * nodes DLOCK_ERR_NO_QUORUM, or AUTH / PROTOCOL when every failed node
 * failed that same way. */
DLOCK_API dlock_err dlock_ping(dlock_client *c, size_t *up_out);

/* Like dlock_ping, and *up_mask (may be NULL) gets which nodes answered:
 * bit i for the i-th address of the options. */
DLOCK_API dlock_err dlock_ping_nodes(dlock_client *c, uint32_t *up_mask);

/* Raise the fence counter of `resource` on every node to at least at_least;
 * a counter already higher is left alone, so fences never go down. For a
 * storage that refuses a fresh holder's fence as stale because the Redis
 * nodes lost their counters (restart without AOF, FLUSHALL): pass the
 * highest fence the storage accepted, and the next acquisition gets a
 * larger one. DLOCK_OK when a quorum applied it (at_least <= 2^53: the
 * script compares in Lua numbers); else an unavailable code, or
 * DLOCK_ERR_ARG for a NULL / empty / oversized resource or a larger value. */
DLOCK_API dlock_err dlock_fence_raise(dlock_client *c, const char *resource, uint64_t at_least);

/* Acquire `resource` for ttl_ms, trying until deadline_ms: an ABSOLUTE
 * instant in ms on the library's clock (CLOCK_BOOTTIME, else
 * CLOCK_MONOTONIC: build it as dlock_now_ms() + wait, or call
 * dlock_acquire_for with the wait itself). The deadline rule:
 *   deadline_ms <= 0               try once (as dlock_try_acquire)
 *   > 0 but more than DLOCK_DEADLINE_SLACK_MS (60 s) before the instant
 *   the library was loaded (for a program linked with it: before main)
 *                                  DLOCK_ERR_ARG, nothing sent: no instant
 *                                  this process took from dlock_now_ms()
 *                                  lies there, so it is almost surely a
 *                                  relative wait such as 2000 (which would
 *                                  silently mean "try once"); the errstr
 *                                  says so and names dlock_acquire_for
 *   any later instant <= now       try once
 *   later than now                 retry until then
 * (The check cannot catch a relative wait that happens to be later than
 * that bound - a program started in the first minute or so after boot -
 * so use dlock_acquire_for for waits.)
 * Between attempts: exponential backoff with full jitter (or the fixed delay
 * of the options), never sleeping past the deadline; with wake_on_release
 * a waiter blocks until a release wakes it instead (see dlock_options).
 * On DLOCK_OK, *out is a new lock the caller owns (dlock_lock_free), with a
 * validity > 0 and a fence, on every path (plain, queued, Redlock queued,
 * multi): the validity is checked after the last round of the grant (the
 * fence sync included), in the one place handles are made. Otherwise *out
 * is NULL and the result is:
 *   DLOCK_ERR_TAKEN   held by someone else until the deadline
 *   DLOCK_ERR_EXPIRED quorum reached but no validity left by the deadline
 *                     (never handed out; the keys are released at once)
 *   unavailable codes (see dlock_err_is_unavailable) when nodes failed
 *   DLOCK_ERR_ARG     NULL, empty or oversized resource, ttl_ms 0 or over
 *                     DLOCK_MAX_TTL_MS, a deadline before the library was
 *                     loaded (above); a resource this thread already holds
 *                     through this client (at once: not reentrant, see
 *                     below); a client used in a child of fork()
 *   DLOCK_ERR_NOMEM   no memory for the handle
 * Not reentrant: a thread that holds a resource (alone or in a multi lock)
 * and asks this client for it again gets DLOCK_ERR_ARG at once, saying so,
 * instead of waiting for itself; another thread sharing the client waits
 * for it as for anyone. Release (or let run out) first.
 * Thread-safe (serialised per client). */
DLOCK_API dlock_err dlock_acquire(dlock_client *c, const char *resource, uint32_t ttl_ms,
                                  int64_t deadline_ms, dlock_lock **out);

/* dlock_acquire with a RELATIVE wait: tries for up to wait_ms from now
 * (wait_ms <= 0: try once; a wait too long for the clock: for ever).
 * Same results and handle as dlock_acquire. The call to reach for first:
 *   dlock_acquire_for(c, "order:42", 10000, 2000, &lock)
 * takes the lock for 10 s, waiting at most 2 s for it. */
DLOCK_API dlock_err dlock_acquire_for(dlock_client *c, const char *resource, uint32_t ttl_ms,
                                      int64_t wait_ms, dlock_lock **out);

/* Try once: dlock_acquire with a deadline already passed. */
DLOCK_API dlock_err dlock_try_acquire(dlock_client *c, const char *resource, uint32_t ttl_ms,
                                      dlock_lock **out);

/* How far before the library was loaded a deadline may lie and still be
 * taken as an instant ("try once"); see dlock_acquire. */
#define DLOCK_DEADLINE_SLACK_MS 60000

/* Longest TTL any call takes (24 h): a lock meant to last longer is a
 * shorter TTL renewed by dlock_auto_renew. A larger ttl_ms (a negative
 * number cast to uint32_t lands here too) is DLOCK_ERR_ARG. */
#define DLOCK_MAX_TTL_MS 86400000u

/* Most resources one dlock_acquire_multi may take. */
#define DLOCK_MAX_MULTI 64

/* Several resources as ONE lock: all of resources[0..n) or none.
 * - n is 1..DLOCK_MAX_MULTI; each name as for dlock_acquire; two equal
 *   names in one call are DLOCK_ERR_ARG (which ones: errstr). The order
 *   does not matter: {a,b} and {b,a} are the same request.
 * - Each attempt is one round: one script per node over all 2n keys, that
 *   sets every lock key (our token, PX ttl_ms) and raises every fence
 *   counter only if no lock key is present, else changes nothing. Nothing
 *   is ever held while waiting for the rest, so two callers asking for
 *   overlapping sets in any order cannot deadlock, and a partial set is
 *   never left behind (docs/single-instance.md, "Several resources at
 *   once"). Redlock: the set is ours when a quorum granted ALL of it in one
 *   round, validity = TTL - elapsed - drift as for one resource; a failed
 *   round is undone on every node that may have set the keys.
 * - deadline_ms: as dlock_acquire (the same rule and the same refusal);
 *   dlock_acquire_multi_for takes a relative wait.
 * - Waiting: retry with backoff (retry_* options), never the wake queue of
 *   dlock_options.wake_on_release. A hand-off passes one key to one
 *   waiter; a multi waiter needs all its keys free at once, and queueing
 *   it on one key would have it hold that key while the others are busy -
 *   the hold-and-wait that deadlocks. Single-resource waiters queued on a
 *   key the multi lock held are handed that key by its release, on every
 *   path (the release's script does it on each node, in the same step
 *   that drops the others), whatever wake_on_release says. So
 *   under steady contention for one of its resources a multi acquirer can
 *   lose to queued single waiters for as long as that contention lasts.
 * - Results and the handle as dlock_acquire. dlock_lock_count() is n,
 *   dlock_lock_resource_of(lock, i) and dlock_lock_fence_of(lock, i) give
 *   resource i (in the caller's order) and its own fence, strictly greater
 *   than every earlier fence of that resource (each resource keeps its own
 *   counter, shared with single acquisitions of it). dlock_lock_resource
 *   and dlock_lock_fence give resource 0.
 * - dlock_release, dlock_extend and dlock_auto_renew act on all n keys at
 *   once, each token-checked: extend succeeds on a node only when every key
 *   there still holds our token (otherwise that node extends none), and
 *   release deletes every key that still holds it.
 * Thread-safe (serialised per client). */
DLOCK_API dlock_err dlock_acquire_multi(dlock_client *c, const char *const *resources, size_t n,
                                        uint32_t ttl_ms, int64_t deadline_ms, dlock_lock **out);
DLOCK_API dlock_err dlock_acquire_multi_for(dlock_client *c, const char *const *resources,
                                            size_t n, uint32_t ttl_ms, int64_t wait_ms,
                                            dlock_lock **out);

/* Several INDEPENDENT resources, tried once, in ONE round per node: each
 * resource is granted or refused on its own, as dlock_try_acquire would
 * decide it alone. For a caller with work on many resources at once (one
 * coupon each) that wants every free one now, without paying a round per
 * resource; dlock_acquire_multi is the all-or-nothing set.
 * - n is 1..DLOCK_MAX_MULTI; each name as for dlock_acquire; two equal
 *   names are DLOCK_ERR_ARG (a name twice would INCR its fence twice).
 * - One script per node over all 2n keys: for each key on its own, SET NX
 *   PX with that resource's own fresh token, and INCR of its fence counter
 *   when set. A key a release has handed to a queued waiter holds that
 *   waiter's token, so it is refused as dlock_try_acquire refuses it: a
 *   batch never jumps a queue of waiters. A try never queues itself.
 * - Per resource: quorum, fence and validity exactly as for one resource
 *   (validity = TTL - elapsed - drift, elapsed covering the round and the
 *   fence sync; fence counters of a quorum that disagree are raised, for
 *   all resources that need it in one more round). A resource granted on
 *   fewer nodes than a quorum is released at once (token-checked, one
 *   round for all such resources, not waited for).
 * - Results: locks_out[i] and rc_out[i] (arrays of n, the caller's) get
 *   resource i's outcome: DLOCK_OK with locks_out[i] a new lock the caller
 *   owns (dlock_lock_free), a plain one-resource lock with its own token,
 *   fence and validity > 0, made in the same one place as every handle; or
 *   locks_out[i] NULL and rc_out[i] DLOCK_ERR_TAKEN (held elsewhere),
 *   DLOCK_ERR_EXPIRED, DLOCK_ERR_FENCE_SYNC, DLOCK_ERR_NOMEM.
 * - Return: DLOCK_OK when a quorum of nodes answered the round (the
 *   per-resource results are in rc_out, any mix; the errstr names the first
 *   refused one). Otherwise the call's code, also copied into every
 *   rc_out[i] with locks_out[i] NULL and nothing left held: an unavailable
 *   code (too few nodes answered), DLOCK_ERR_ARG (NULL arrays, bad n, ttl
 *   or names, a name this thread already holds through this client: not
 *   reentrant), DLOCK_ERR_NOMEM. Out parameters are set on every path.
 * - Release each lock with dlock_release, or several at once with
 *   dlock_release_each. Thread-safe (serialised per client). */
DLOCK_API dlock_err dlock_try_acquire_each(dlock_client *c, const char *const *resources, size_t n,
                                           uint32_t ttl_ms, dlock_lock **locks_out,
                                           dlock_err *rc_out);

/* Releases several one-resource locks (dlock_acquire, dlock_try_acquire_each)
 * in ONE round per node: for each lock, what dlock_release does - its key is
 * handed to the oldest waiter queued on it, or deleted, on every node where
 * it still holds that lock's token. rc_out[i] (an array of n) gets lock i's
 * result as dlock_release would return it: DLOCK_OK, DLOCK_ERR_LOST (the
 * section may have run unprotected: the caller must know), or an
 * unavailable code. Return: DLOCK_OK when a quorum of nodes answered;
 * otherwise an unavailable code. DLOCK_ERR_ARG with nothing sent and every
 * lock left as it was, for NULL arrays, n 0 or over DLOCK_MAX_MULTI, a NULL
 * lock, a lock of another client, one already released, a
 * dlock_acquire_multi lock (dlock_release releases a set in one round) or
 * the same handle twice. Once sent, every lock is released whatever the
 * outcome (as dlock_release). The handles stay owned by the caller. */
DLOCK_API dlock_err dlock_release_each(dlock_client *c, dlock_lock **locks, size_t n,
                                       dlock_err *rc_out);

/* Release: deletes the key on every node where it still holds our token
 * (token-checked script). Stops automatic renewal first.
 * Once the deletes are sent the lock is no longer held, whatever the
 * outcome: dlock_is_held() returns 0 after any release that reached the
 * network, since a delete that was not answered may still land at any
 * moment and free the key for the next owner.
 * DLOCK_OK: released on a quorum. DLOCK_ERR_LOST only when so many nodes
 * answered "not our token" that no quorum can still hold it: the lock had
 * expired or was taken over, so the critical section may have run
 * unprotected - the caller must know. Otherwise, when too few nodes
 * answered, an unavailable code (the keys not deleted expire with their
 * TTL). DLOCK_ERR_ARG, with nothing sent, for a NULL lock, a lock of
 * another client, and a lock already released ("already released": a
 * second release would only report the first one's deletes as "not our
 * token", a false LOST). The handle stays owned by the caller. */
DLOCK_API dlock_err dlock_release(dlock_client *c, dlock_lock *lock);

/* Extend: reset the TTL to ttl_ms on every node that still holds our token.
 * ttl_ms may be shorter than the validity left: the keys then expire sooner.
 * DLOCK_OK only with a quorum and a new validity > 0: the validity becomes
 * start + ttl_ms - drift (start = when the round began). DLOCK_ERR_LOST
 * when the lock was already released or lost, and (the lock is then marked
 * lost) when so many nodes answered "not our token" that no quorum can
 * still hold it, or when a quorum was extended but the round used up the
 * new validity. Otherwise, when too few nodes answered, an unavailable
 * code, and the validity becomes min(old validity end, start + ttl_ms -
 * drift): a node that ran the PEXPIRE (answered, or not yet - it may still
 * run it late) expires at start + ttl_ms at the earliest, so with a shorter
 * ttl_ms the old validity would outlive the keys and a second client could
 * acquire while dlock_is_held() still said 1. DLOCK_ERR_ARG for a NULL
 * lock, ttl_ms == 0, or a lock of another client. */
DLOCK_API dlock_err dlock_extend(dlock_client *c, dlock_lock *lock, uint32_t ttl_ms);

/* Frees the handle only (no network). If automatic renewal is on for it, it
 * is stopped first; if its on_lost is running on the watchdog thread, this
 * waits for the callback to return (called from inside that callback, the
 * free is done just after it returns). Release before freeing if you still
 * hold it. NULL ok. */
DLOCK_API void dlock_lock_free(dlock_lock *lock);

/* Accessors; all borrowed/plain values, valid until dlock_lock_free. */
DLOCK_API const char *dlock_lock_resource(const dlock_lock *lock); /* without the key prefix */
DLOCK_API const char *dlock_lock_token(const dlock_lock *lock);    /* 32 hex digits */
DLOCK_API uint64_t dlock_lock_fence(const dlock_lock *lock);       /* fencing token, >= 1 */
/* Resources in the lock: 1 for dlock_acquire, n for dlock_acquire_multi
 * (0 for NULL). */
DLOCK_API size_t dlock_lock_count(const dlock_lock *lock);
/* Resource i (0 <= i < dlock_lock_count) and its fence, in the order the
 * acquire was given them; "" and 0 for NULL or i out of range. For i == 0
 * the same as dlock_lock_resource / dlock_lock_fence. */
DLOCK_API const char *dlock_lock_resource_of(const dlock_lock *lock, size_t i);
DLOCK_API uint64_t dlock_lock_fence_of(const dlock_lock *lock, size_t i);
/* Remaining validity in ms at this instant (0 once used up, released or lost). */
DLOCK_API int64_t dlock_lock_validity_ms(const dlock_lock *lock);
/* Absolute instant (ms, dlock_now_ms()'s clock: CLOCK_BOOTTIME, else
 * CLOCK_MONOTONIC) at which the validity ends. */
DLOCK_API int64_t dlock_lock_valid_until_ms(const dlock_lock *lock);
/* Nonzero while the lock is held: not released, not found lost (by release,
 * extend or the watchdog), and validity left. Thread-safe (the watchdog
 * updates it). */
DLOCK_API int dlock_is_held(const dlock_lock *lock);

/* Automatic renewal. One watchdog thread per client (started on first use,
 * stopped by dlock_client_free) extends every registered lock at about
 * ttl/3. A renewal that too few nodes answered (no quorum, timeouts) is
 * retried, a short pause apart, for as long as another round could still
 * finish inside the validity; one that finds the lock gone (not our token
 * on enough nodes) is final. When renewal gives up, or the validity runs
 * out first, the lock is marked lost (dlock_is_held() returns 0 from then
 * on) and on_lost is called once, from the watchdog thread, WITHOUT the
 * client's mutex: the callback may call dlock functions on the same client
 * (release the lost lock, acquire again), but not dlock_client_free.
 * The lock stays alive for the whole callback: a dlock_lock_free of it
 * from another thread (say, the holder, who saw dlock_is_held() turn 0)
 * waits until the callback has returned; one from inside the callback is
 * deferred to just after it. Renewal stops the moment the lock is
 * released or freed; it never re-acquires an expired lock. Reaching
 * max_renewals or max_lease_ms only stops renewal: on_lost is NOT called;
 * dlock_is_held() turns 0 when the last validity ends.
 * dlock_auto_renew returns DLOCK_OK, DLOCK_ERR_ARG (NULL, or a lock of
 * another client), DLOCK_ERR_LOST (already released or
 * lost) or DLOCK_ERR_NOMEM (the watchdog thread could not start). Calling
 * it again for a registered lock replaces its options. */
typedef void (*dlock_lost_fn)(const dlock_lock *lock, dlock_err why, void *user);
typedef struct dlock_renew_options {
    uint32_t ttl_ms;          /* TTL to extend to; 0 = the acquire TTL */
    uint32_t max_renewals;    /* 0 = unlimited; after that many the lease is let run out (no on_lost) */
    uint32_t max_lease_ms;    /* 0 = unlimited; total time since acquisition after which renewal
                                 stops and the lease is let run out (no on_lost) */
    dlock_lost_fn on_lost;    /* may be NULL */
    void *user;               /* passed to on_lost */
} dlock_renew_options;

DLOCK_API dlock_err dlock_auto_renew(dlock_client *c, dlock_lock *lock,
                                     const dlock_renew_options *ropts);
/* Renewals done so far for this lock. */
DLOCK_API uint32_t dlock_lock_renewals(const dlock_lock *lock);
/* Why the watchdog found the lock lost (which nodes, what they answered),
 * copied into buf[len] (always NUL-terminated when len > 0); "" while it is
 * not lost that way. Readable from on_lost and once dlock_is_held() is 0:
 * the detail is written before the lock is marked lost. Returns buf. */
DLOCK_API const char *dlock_lock_lost_detail(const dlock_lock *lock, char *buf, size_t len);

/* Counters of a client, for metrics and benchmarks. Thread-safe snapshot. */
typedef struct dlock_stats {
    uint64_t round_trips;      /* parallel request rounds sent (1 round = all nodes at once) */
    uint64_t acquires;         /* successful acquisitions */
    uint64_t attempts;         /* acquisition attempts (>= acquires) */
    uint64_t retries;          /* attempts after the first within one dlock_acquire */
    uint64_t taken;            /* attempts that found the lock held */
    uint64_t errors;           /* calls that ended with an unavailable code */
    uint64_t releases;         /* successful releases */
    uint64_t lost;             /* releases/extends/renewals that found the lock lost */
    uint64_t extends;          /* successful extends (manual and automatic) */
    uint64_t script_loads;     /* NOSCRIPT fallbacks (script sent in full) */
    uint64_t reconnects;       /* connections re-established */
    uint64_t cache_reused;     /* sections begun under a kept lock (dlock_reuse), no round */
    uint64_t cache_given_up;   /* kept locks released: wanted, idle, too little validity left */
} dlock_stats;

DLOCK_API void dlock_client_stats(dlock_client *c, dlock_stats *out);

/* ---- Lock caching (docs/libdlock.md, "Lock caching") ----
 *
 * A lock kept after its section instead of released: the next section on
 * the same resource starts with no round at all, under the same lease and
 * fence. Worth it when one client runs many short sections on a resource
 * that others rarely want (work routed by key to one server). The client
 * needs dlock_options.cache_locks.
 *
 * dlock_keep: the section is over; the client takes lock over (do not use
 * or free it after this). The watchdog renews it. It is released, handed
 * over to the first waiter, when another client asks for it (every failed
 * acquire publishes a notice that the client listens for: within a round
 * trip or so), or after idle_ms unused. Released at once instead when a
 * notice came during the section, or when the client hears notices from
 * less than a quorum of nodes. DLOCK_OK when kept or handed on; a release
 * error otherwise; ARG without cache_locks, or for a multi lock.
 *
 * dlock_reuse: the kept lock of resource, held by the caller again (keep
 * or release it after the section), if nobody asked for it and at least
 * min_left_ms of its validity is left; then its fence is unchanged. NULL
 * otherwise (acquire it: a kept lock that did not qualify is released
 * first), with why in dlock_client_errstr. Costs a waiter at most one
 * section of the holder plus a round trip. */
DLOCK_API dlock_err dlock_keep(dlock_client *c, dlock_lock *lock, unsigned idle_ms);
DLOCK_API dlock_lock *dlock_reuse(dlock_client *c, const char *resource, unsigned min_left_ms);

/* ---- The event-loop client (dlock_async_*) ----
 *
 * The same locks as dlock_client (same keys, scripts, quorum, validity,
 * drift, fences and codes: both clients drive one protocol core), for a
 * program built on an event loop: no call blocks and the library starts no
 * thread. Every call starts the work and returns; its callback fires once,
 * later, from the loop. A dlock_async and everything made from it belong to
 * the loop's thread: call it only from there (callbacks included).
 *
 * The loop is the caller's, reached through dlock_loop: descriptors to
 * watch and one-shot timers. dlock_uv.h (libuv) and dlock_event.h
 * (libevent) fill one in; any other loop can (a Redis module, an MHD
 * server's own select loop). Connects, AUTH and scripts go through the
 * loop like everything else; each round's timeout is a loop timer; a
 * Redlock round goes to every master at once and completes on quorum or
 * its deadline.
 *
 * An acquire with time to wait queues as the blocking one does
 * (wake_on_release): it waits for the release's hand-off in a BLPOP per
 * node, on connections of its own that the client pools.
 *
 * Not yet on this client: sentinel:// addresses (refused at
 * dlock_async_new). */

typedef struct dlock_async dlock_async;
typedef struct dlock_async_op dlock_async_op;

#define DLOCK_LOOP_READ 1
#define DLOCK_LOOP_WRITE 2

typedef struct dlock_loop {
    void *loop; /* the caller's loop, passed back to every hook */
    /* Watch fd; call cb(arg, events) while one of the events it was last
     * set to (DLOCK_LOOP_READ | DLOCK_LOOP_WRITE, 0 = none) is ready. A
     * new watch watches nothing. NULL: out of memory. */
    void *(*watch_new)(void *loop, int fd, void (*cb)(void *arg, int events), void *arg);
    void (*watch_set)(void *watch, int events);
    void (*watch_free)(void *watch); /* no cb after it returns */
    /* A one-shot timer: timer_set(t, ms) fires cb(arg) once after ms
     * (replacing an earlier setting), timer_stop disarms it. */
    void *(*timer_new)(void *loop, void (*cb)(void *arg), void *arg);
    void (*timer_set)(void *timer, int64_t after_ms);
    void (*timer_stop)(void *timer);
    void (*timer_free)(void *timer); /* no cb after it returns */
} dlock_loop;

/* Makes an event-loop client of opts' nodes (as dlock_client_new, without
 * connecting: the first call connects through the loop). DLOCK_OK with
 * *out set, or ARG / NOMEM with why in errbuf. */
DLOCK_API dlock_err dlock_async_new(const dlock_options *opts, const dlock_loop *loop,
                                    dlock_async **out, char *errbuf, size_t errbuf_len);

/* Completes every call in flight with DLOCK_ERR_CANCELLED (their callbacks
 * run inside this call), closes the connections and frees the client.
 * An acquire cancelled here after its keys went out sends the hand-over
 * of whatever it may have been granted before the connections close.
 * Handles it gave out stay valid to free. Called from one of its own
 * callbacks, the free happens when that callback returns. NULL ok. */
DLOCK_API void dlock_async_free(dlock_async *a);

/* rc, and on DLOCK_OK the new lock (the caller's: dlock_lock_free);
 * detail: why a call failed ("" on success), valid during the callback. */
typedef void (*dlock_async_acquire_cb)(dlock_async *a, dlock_err rc, dlock_lock *lock,
                                       const char *detail, void *arg);
typedef void (*dlock_async_done_cb)(dlock_async *a, dlock_err rc, const char *detail,
                                    void *arg);

/* dlock_acquire on the loop: deadline_ms as dlock_acquire's (<= now: try
 * once; later: wait until then, in the queue with wake_on_release, else
 * retrying with backoff). DLOCK_OK: started, and cb
 * will fire exactly once; *op (NULL ok) names the call for
 * dlock_async_cancel until then. ARG (bad argument, as dlock_acquire's) or
 * NOMEM: nothing started, cb never fires. */
DLOCK_API dlock_err dlock_async_acquire(dlock_async *a, const char *resource, uint32_t ttl_ms,
                                        int64_t deadline_ms, dlock_async_acquire_cb cb,
                                        void *arg, dlock_async_op **op);
DLOCK_API dlock_err dlock_async_try_acquire(dlock_async *a, const char *resource,
                                            uint32_t ttl_ms, dlock_async_acquire_cb cb,
                                            void *arg, dlock_async_op **op);
DLOCK_API dlock_err dlock_async_acquire_for(dlock_async *a, const char *resource,
                                            uint32_t ttl_ms, int64_t wait_ms,
                                            dlock_async_acquire_cb cb, void *arg,
                                            dlock_async_op **op);

/* dlock_acquire_multi on the loop: all of resources[0..n) as one lock, or
 * none (same checks, one round per node per attempt, fences per resource,
 * backoff between attempts until deadline_ms). cb as dlock_async_acquire's;
 * release it with dlock_async_release. */
DLOCK_API dlock_err dlock_async_acquire_multi(dlock_async *a, const char *const *resources,
                                              size_t n, uint32_t ttl_ms, int64_t deadline_ms,
                                              dlock_async_acquire_cb cb, void *arg,
                                              dlock_async_op **op);
DLOCK_API dlock_err dlock_async_acquire_multi_for(dlock_async *a,
                                                  const char *const *resources, size_t n,
                                                  uint32_t ttl_ms, int64_t wait_ms,
                                                  dlock_async_acquire_cb cb, void *arg,
                                                  dlock_async_op **op);

/* Cancels a pending acquire. Between polling attempts (backoff) or before
 * its first round, its callback fires inside this call. During a round, it
 * fires when the round ends. Queued (waiting for a hand-off), it fires once
 * leave.lua has taken it off every queue. A key granted or handed over
 * meanwhile is handed on (pass.lua), never left to its TTL. Either way cb
 * gets DLOCK_ERR_CANCELLED, once. Returns 1 when
 * the call was pending, 0 when op is not a pending call of a (its callback
 * already fired or is firing). */
DLOCK_API int dlock_async_cancel(dlock_async *a, dlock_async_op *op);

/* dlock_release and dlock_extend on the loop: same checks, codes and
 * rules. DLOCK_OK: started, cb fires once (NULL ok for a release nobody
 * waits on); ARG: nothing started (a lock of another client, released
 * before, ttl out of range). */
DLOCK_API dlock_err dlock_async_release(dlock_async *a, dlock_lock *lock,
                                        dlock_async_done_cb cb, void *arg);
DLOCK_API dlock_err dlock_async_extend(dlock_async *a, dlock_lock *lock, uint32_t ttl_ms,
                                       dlock_async_done_cb cb, void *arg);

/* dlock_auto_renew on the loop: the same rules (renewal at about TTL/3,
 * retries while a round still fits in the validity, limits, lost once the
 * validity ran out or a quorum says the key is gone), from a loop timer
 * instead of a thread. on_lost is called once, from the loop; inside it
 * the lock may be released or freed (the free is done when it returns).
 * Renewal stops the moment the lock is released or freed. DLOCK_OK, ARG
 * (NULL, a lock of another client) or LOST (already released or lost). */
DLOCK_API dlock_err dlock_async_auto_renew(dlock_async *a, dlock_lock *lock,
                                           const dlock_renew_options *ropts);

/* Counters of this client, as dlock_client_stats. */
DLOCK_API void dlock_async_stats(dlock_async *a, dlock_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* DLOCK_H */
