/* config.h - coupon-server options: defaults, environment, command line, validation.
 *
 * Every option is one row of COUPON_OPTIONS below: its long name, its
 * environment variable, its argument, how it is parsed, its range, its
 * default and its help. The struct fields, the defaults, the parsing and the
 * --help text are all generated from that row, so an option (and its
 * default) is written exactly once. */
#ifndef APP_CONFIG_H
#define APP_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "coupon_db.h"

#include "core/log.h"

#define CONFIG_MAX_REDIS 16 /* == DLOCK_MAX_NODES */
#define CONFIG_MAX_BATCH 64 /* most claims one lock acquisition may carry (--lock-batch) */
#define CONFIG_MAX_GROUP 64 /* most sections one commit group may carry (--commit-group) */
/* The shortest --admin-token: 16 random token68 characters are more than
 * 2^96 tokens, beyond reach of any rate of guessing the server can answer.
 * The token's length is the defence: the admin back-off answers wrong
 * guesses 429 but never refuses the right token (http/admin_guard.h). */
#define CONFIG_MIN_ADMIN_TOKEN 32
#define CONFIG_STR_(x) #x
#define CONFIG_STR(x) CONFIG_STR_(x)

/* Row kinds:
 *   NUM     an integer in [lo, hi] stored in a field of type ctype;
 *   STR     a non-empty string stored (owned) in a char * field;
 *   CUSTOM  parsed by config.c's parse_<field>(), into the fields declared
 *           by hand in app_config below (default: a string given to it);
 *   ALIAS   another name for the NUM field `field`.
 * Defaults: NUM a number (outside [lo, hi]: "decided later", see its help),
 * STR and CUSTOM a string or NULL (unset).
 *
 *   kind    ctype     field             name                 env                         arg               lo  hi                default            help */
#define COUPON_OPTIONS(X)                                                                                                                                        \
    X(CUSTOM, -,        listen,           "listen",            "COUPON_LISTEN",            "HOST:PORT",      0, 0,                 "127.0.0.1:8080",                 \
      "address to serve on (port 0 picks a free port)")                                                                                                          \
    X(STR,    char *,   db_path,          "db",                "COUPON_DB",                "PATH|URL",       0, 0,                 "coupon.db",                      \
      "SQLite file, created with its schema if absent, or a postgresql:// URL")                                                                                  \
    X(CUSTOM, -,        redis,            "redis",             "COUPON_REDIS",             "ADDR[,ADDR...]", 0, 0,                 "127.0.0.1:6379",                 \
      "Redis masters, host:port, [v6]:port, unix:/path or sentinel://H:P[,H:P...]/NAME; one = single instance, several = Redlock")                                                          \
    X(STR,    char *,   redis_tls_ca,     "redis-tls-ca",      "COUPON_REDIS_TLS_CA",      "FILE",           0, 0,                 NULL,                             \
      "PEM file of the CAs that sign the Redis masters' certificates; given, every --redis node is reached over TLS (rediss:// addresses are TLS anyway, verified by the system's CAs without it); redlock only") \
    X(STR,    char *,   redis_tls_cert,   "redis-tls-cert",    "COUPON_REDIS_TLS_CERT",    "FILE",           0, 0,                 NULL,                             \
      "client certificate (PEM) for Redis masters that ask for one (tls-auth-clients); with --redis-tls-key") \
    X(STR,    char *,   redis_tls_key,    "redis-tls-key",     "COUPON_REDIS_TLS_KEY",     "FILE",           0, 0,                 NULL,                             \
      "the private key (PEM) of --redis-tls-cert") \
    X(NUM,    uint32_t, lock_ttl_ms,      "lock-ttl",          "COUPON_LOCK_TTL_MS",       "MS",             10, 600000,           2000,                             \
      "lock validity")                                                                                                                                           \
    X(NUM,    int,      lock_wait_ms,     "lock-wait",         "COUPON_LOCK_WAIT_MS",      "MS",             0, 60000,             1000,                             \
      "longest wait for the lock before answering 503 / 1005")                                                                                                   \
    X(NUM,    int,      lock_retry_ms,    "lock-retry-ms",     "COUPON_LOCK_RETRY_MS",     "MS",             1, 1000,              1,                                \
      "pause between lock attempts while it is taken, +- the same jitter")                                                                                      \
    X(NUM,    int,      lock_batch,       "lock-batch",        "COUPON_LOCK_BATCH",        "N",              1, CONFIG_MAX_BATCH,  32,                               \
      "claims of one coupon this server may run under one lock acquisition, with one read and one write (group commit); 1 = a lock (and a fence) per claim")     \
    X(NUM,    int,      lock_cache_ms,    "lock-cache-ms",     "COUPON_LOCK_CACHE_MS",     "MS",             0, 60000,             0,                                \
      "redlock: after a batch the store decided, keep the coupon's lock cached in its claim worker's lock client (renewed, same fence) for the coupon's next batch, until another client waits for it or MS pass unused; 0 = release after every batch") \
    X(NUM,    int,      commit_group,     "commit-group",      "COUPON_COMMIT_GROUP",      "N",              0, CONFIG_MAX_GROUP,  CONFIG_MAX_GROUP,                 \
      "SQLite, fence full, no business step: up to N lock holders of different coupons commit their sections in one transaction, each in its own savepoint; 1 = one section at a time per server, each in its own transactions (a process-wide writer mutex); 0 = off") \
    X(NUM,    int,      redis_timeout_ms, "redis-timeout-ms",  "COUPON_REDIS_TIMEOUT_MS",  "MS",             1, 60000,             200,                              \
      "per round-trip command timeout to the Redis nodes")                                                                                                       \
    X(NUM,    int,      redis_connect_ms, "redis-connect-ms",  "COUPON_REDIS_CONNECT_MS",  "MS",             1, 60000,             200,                              \
      "per node connect timeout")                                                                                                                                \
    X(CUSTOM, -,        strategy,         "strategy",          "COUPON_STRATEGY",          "NAME",           0, 0,                 "redlock",                        \
      "claim strategy, from the list below")                                                                                                                                 \
    X(NUM,    int,      threads,          "threads",           "COUPON_THREADS",           "N",              1, 256,               0,                                \
      "HTTP threads: parse, validate, answer, serve reads (default: the strategy's, listed under --strategy)")                                                                              \
    X(NUM,    int,      claim_workers,    "claim-workers",     "COUPON_CLAIM_WORKERS",     "N",              1, 256,               0,                                \
      "threads that run the claims (lock wait + store write) off the HTTP threads (default: the strategy's, listed under --strategy, else --threads)")                                                        \
    X(NUM,    int,      claim_queue,      "claim-queue",       "COUPON_CLAIM_QUEUE",       "N",              1, 100000,            1024,                             \
      "claims accepted and waiting for a claim worker; one more is answered 503 / 1005 at once")                                                                \
    X(CUSTOM, -,        admin_token,      "admin-token",       "COUPON_ADMIN_TOKEN",       "TOKEN",          0, 0,                 NULL,                             \
      "bearer token for the admin endpoints: at least " CONFIG_STR(CONFIG_MIN_ADMIN_TOKEN) " characters of [A-Za-z0-9-._~+/=] (e.g. openssl rand -hex 16; unset: they answer 403)")                                                                                          \
    X(STR,    char *,   bundle_lock,      "bundle-lock",       "COUPON_BUNDLE_LOCK",       "NAME",           0, 0,                 NULL,                             \
      "how a bundle (POST /api/v1/coupon/bundle) locks its coupons: request-order, sorted, multi, atomic-sql "           \
      "(default multi; atomic-sql under a --strategy without a lock)")                                                     \
    X(NUM,    unsigned, fault_bundle_gap_ms, "fault-bundle-gap-ms", "COUPON_FAULT_BUNDLE_GAP_MS", "MS",       0, 60000,             0,                                \
      "fault injection: request-order and sorted bundles wait MS between one coupon's lock and the next (a slow "        \
      "lock round): the window in which opposite orders deadlock")                                                       \
    X(NUM,    unsigned, work_us,          "work-us",           "COUPON_WORK_US",           "US",             0, 10000000,          0,                                \
      "the business step of the critical section, between the stock read and the write")                                                                        \
    X(ALIAS,  unsigned, work_us,          "unsafe-delay-us",   "COUPON_UNSAFE_DELAY_US",   "US",             0, 10000000,          0,                                \
      "alias of --work-us")                                                                                                                                      \
    X(CUSTOM, -,        fence,            "fence",             "COUPON_FENCE",             "off|write|full", 0, 0,                 "full",                           \
      "storage fencing of the lock strategies: none, on the write only, or on the read and the write")                                                          \
    X(CUSTOM, -,        fault_pause,      "fault-pause-ms",    "COUPON_FAULT_PAUSE",       "MS[:EVERY]",     0, 0,                 NULL,                             \
      "fault injection: stall MS inside the critical section, after the read, on every EVERY-th claim of this server (EVERY 1 if omitted; off unless given); MS:signal stalls only the next claim after each SIGUSR1")  \
    X(NUM,    unsigned, fault_crash_after_lock, "fault-crash-after-lock", "COUPON_FAULT_CRASH_AFTER_LOCK", "N", 0, 1000000000, 0,                     \
      "fault injection: on this server's N-th successful lock acquisition, _exit at once without releasing (setnx-expire: between SETNX and EXPIRE); 0 = off") \
    X(NUM,    unsigned, clock_offset_ms,  "clock-offset-ms",   "COUPON_CLOCK_OFFSET_MS",   "MS",             0, 86400000,          0,                                \
      "fault injection: added to the wall clock the setnx-getset recipe reads (a clock running ahead)")                                                        \
    X(STR,    char *,   hold_log,         "hold-log",          "COUPON_HOLD_LOG",          "FILE",           0, 0,                 NULL,                             \
      "append one line per lock hold of the redlock strategy (pid, fence, CLOCK_MONOTONIC times, applied/refused) to FILE, for the chaos checker; off unless given") \
    X(NUM,    int,      stock_view_ms,    "stock-view-ms",     "COUPON_STOCK_VIEW_MS",     "MS",             0, 60000,             100,                              \
      "how long what this server's claims learned of a coupon's stock spares the sold-out fast path a store round trip (0 = a round trip per claim)") \
    X(NUM,    int,      db_busy_ms,       "db-busy-ms",        "COUPON_DB_BUSY_MS",        "MS",             1, 600000,            5000,                             \
      "SQLite busy timeout; PostgreSQL: each statement's bound")                                                                                                 \
    X(NUM,    size_t,   max_body,         "max-body-bytes",    "COUPON_MAX_BODY_BYTES",    "N",              1, 1048576,           16384,                            \
      "largest request body; larger: 413 / 1009")                                                                                                                \
    X(NUM,    size_t,   max_header,       "max-header-bytes",  "COUPON_MAX_HEADER_BYTES",  "N",              256, 32768,           8192,                             \
      "largest request line + headers; larger: 431 / 1009")                                                                                                      \
    X(NUM,    unsigned, max_connections,  "max-connections",   "COUPON_MAX_CONNECTIONS",   "N",              1, 100000,            2048,                             \
      "simultaneous connections")                                                                                                                                \
    X(NUM,    unsigned, max_conn_per_ip,  "max-connections-per-ip", "COUPON_MAX_CONNECTIONS_PER_IP", "N",       0, 100000,            128,                              \
      "simultaneous connections from one client address, an IPv6 client by its /64 (0 = no cap): 9 addresses at the cap hold 1152 of 2048 slots, the rest stay free for others; a load tester's 128 connections fit; a --trusted-proxy peer is not capped (the proxy caps each client by its address)")                                                             \
    X(NUM,    unsigned, conn_timeout_s,   "conn-timeout-s",    "COUPON_CONN_TIMEOUT_S",    "S",              1, 3600,              30,                               \
      "idle timeout of a connection that is being answered or sending its body (libmicrohttpd's, reset by every byte)")                                                                                                                                 \
    X(NUM,    unsigned, header_timeout_s, "header-timeout-s",  "COUPON_HEADER_TIMEOUT_S",  "S",              0, 3600,              5,                                \
      "longest a connection may take to send its request head, from its accept or its previous answer (so also the longest a kept-alive connection idles); later: closed (slowloris); 0 = only --request-timeout-s") \
    X(NUM,    unsigned, request_timeout_s, "request-timeout-s", "COUPON_REQUEST_TIMEOUT_S", "S",             1, 3600,              10,                               \
      "longest a connection may take to send its whole request (head and body), from its accept or its previous answer; later: closed") \
    X(NUM,    unsigned, min_body_rate,    "min-body-rate",     "COUPON_MIN_BODY_RATE",     "BYTES/S",        0, 1048576,           512,                              \
      "slowest a request body may arrive, after a 1 s grace from the end of its head; slower: closed (0 = off)") \
    X(NUM,    unsigned, min_send_rate,    "min-send-rate",     "COUPON_MIN_SEND_RATE",     "BYTES/S",        0, 1048576,           1024,                             \
      "slowest a client may read what it is owed, over every 2 s while it owes answer bytes; slower: reset (a client that pipelines and does not read; 0 = off)") \
    X(STR,    char *,   trusted_proxy,    "trusted-proxy",     "COUPON_TRUSTED_PROXY",     "CIDR[,CIDR...]", 0, 0,                 NULL,                             \
      "proxies in front (HAProxy option forwardfor): from these networks the client address that X-Forwarded-For names (its rightmost entry that is not itself a trusted proxy) is the one the admin back-off counts, and these peers are not capped by --max-connections-per-ip; from any other peer the header is ignored (unset: always ignored)") \
    X(NUM,    unsigned, health_interval_ms, "health-interval-ms", "COUPON_HEALTH_INTERVAL_MS", "MS",         50, 60000,            500,                              \
      "how often the health prober checks the lock quorum and the store's writes; /healthz answers from its last result") \
    X(NUM,    int,      shutdown_grace_ms, "shutdown-grace-ms", "COUPON_SHUTDOWN_GRACE_MS", "MS",            0, 600000,            5000,                             \
      "on SIGINT/SIGTERM, longest wait for requests in flight")                                                                                                 \
    X(CUSTOM, -,        log_level,        "log-level",         "COUPON_LOG_LEVEL",         "error|warn|info|debug", 0, 0,          "info",                           \
      "least severe operator log line written to stderr")                                                                                                        \
    X(STR,    char *,   access_log,       "access-log",        "COUPON_ACCESS_LOG",        "FILE|-",         0, 0,                 NULL,                             \
      "one line per request (time method path status code seconds), appended to FILE or stdout for -; off unless given")

#define CONFIG_FIELD_NUM(ctype, field) ctype field;
#define CONFIG_FIELD_STR(ctype, field) char *field; /* owned */
#define CONFIG_FIELD_CUSTOM(ctype, field)
#define CONFIG_FIELD_ALIAS(ctype, field)
#define CONFIG_FIELD(kind, ctype, field, name, env, arg, lo, hi, def, help) CONFIG_FIELD_##kind(ctype, field)

/* A claim strategy as the options know it. The registry is claim/'s
 * (claim/strategies.h): main.c hands its list to config_load, so that
 * core/ includes nothing above it. */
typedef struct config_strategy {
    const char *name;    /* --strategy NAME */
    const char *summary; /* one line for --help */
    int default_threads; /* --threads when not given */
    int default_claim_workers; /* --claim-workers when not given; 0: --threads */
} config_strategy;

typedef struct app_config {
    COUPON_OPTIONS(CONFIG_FIELD)
    /* The CUSTOM rows' fields: */
    char *listen_host;             /* --listen: as given, without IPv6 brackets; owned */
    int listen_port;               /* --listen: 0 = pick a free port */
    char *redis[CONFIG_MAX_REDIS]; /* --redis: as libdlock parses them; owned */
    size_t n_redis;
    char *strategy;                /* --strategy: a name of strategies[]; owned */
    const config_strategy *strategies; /* config_load's list (borrowed), for --strategy and --help */
    size_t n_strategies;
    char *admin_token;             /* --admin-token: NULL = admin endpoints disabled (403); owned */
    db_fence_mode fence;           /* --fence: how much of the section the store fences */
    unsigned fault_pause_ms;       /* --fault-pause-ms: stall inside the section (0 = off) ... */
    unsigned fault_pause_every;    /* ... on every this-many-th claim of this server; 0 = after each SIGUSR1 */
    log_level log_level;           /* --log-level */
} app_config;

#undef CONFIG_FIELD
#undef CONFIG_FIELD_NUM
#undef CONFIG_FIELD_STR
#undef CONFIG_FIELD_CUSTOM
#undef CONFIG_FIELD_ALIAS

typedef enum config_result {
    CONFIG_OK = 0,
    CONFIG_HELP = 1,  /* --help or --version printed; exit 0 */
    CONFIG_ERROR = 2  /* errbuf holds a one-line reason; exit 2 */
} config_result;

/* Fills *cfg from the defaults, then the COUPON_* environment variables,
 * then argv (the command line wins). strategies[0..n_strategies): what
 * --strategy may name (the first is no default: the table's is); the list
 * must outlive cfg. On CONFIG_ERROR, errbuf names the option or variable
 * and the bad value. Call config_free() on every path. */
config_result config_load(app_config *cfg, const config_strategy *strategies, size_t n_strategies, int argc,
                          char **argv, char *errbuf, size_t errlen);
/* The entry of cfg->strategies for cfg->strategy (never NULL after CONFIG_OK). */
const config_strategy *config_strategy_of(const app_config *cfg);
void config_free(app_config *cfg);
/* "listen=127.0.0.1:8080 db=coupon.db ..." : every option's effective value,
 * from the table, for the start-up log line. The admin token shows as "set"
 * or "unset", never itself. Truncated to fit. */
void config_describe(const app_config *cfg, char *out, size_t outlen);
/* "HOST:PORT" for display, with brackets around an IPv6 host. */
void config_format_hostport(const char *host, int port, char *out, size_t outlen);

#endif /* APP_CONFIG_H */
