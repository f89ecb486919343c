/* config.h - coupon-server options: defaults, environment, command line, validation. */
#ifndef APP_CONFIG_H
#define APP_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "coupon_db.h"

#define CONFIG_MAX_REDIS 16 /* == DLOCK_MAX_NODES */
#define CONFIG_MAX_BATCH 64 /* most claims one lock acquisition may carry (--lock-batch) */

typedef struct app_config {
    char *listen_host;        /* as given, without IPv6 brackets; owned */
    int listen_port;          /* 0 = pick a free port */
    char *db_path;            /* owned */
    char *redis[CONFIG_MAX_REDIS]; /* "host:port" or "unix:/path"; owned */
    size_t n_redis;
    char *strategy;           /* a name strategy_by_name() knows; owned */
    char *admin_token;        /* NULL = admin endpoints disabled (403); owned */
    uint32_t lock_ttl_ms;
    int lock_wait_ms;
    int lock_retry_ms;        /* fixed retry pause (with equal jitter) while the lock is taken */
    int lock_batch;           /* most same-coupon claims of this process run under one acquisition */
    int redis_timeout_ms;     /* per round trip to the Redis nodes */
    int redis_connect_ms;
    int threads;              /* MHD pool threads == worker slots */
    unsigned work_us;         /* the business step between the read and the write */
    db_fence_mode fence;      /* how much of the section the store fences (lock strategies) */
    unsigned fault_pause_ms;  /* fault injection: stall inside the section (0 = off) ... */
    unsigned fault_pause_every; /* ... on every this-many-th claim of this server */
    int db_busy_ms;           /* SQLite busy timeout */
    size_t max_body;          /* bytes; larger bodies get 413 / 1009 */
    size_t max_header;        /* bytes of request line + headers; larger gets 431 / 1009 */
    unsigned max_connections;
    unsigned conn_timeout_s;  /* idle keep-alive connections are closed after this */
    int shutdown_grace_ms;    /* longest wait for requests in flight on SIGTERM */
} app_config;

typedef enum config_result {
    CONFIG_OK = 0,
    CONFIG_HELP = 1,  /* --help printed; exit 0 */
    CONFIG_ERROR = 2  /* errbuf holds a one-line reason; exit 2 */
} config_result;

/* Fills *cfg from the defaults, then the COUPON_* environment variables,
 * then argv (the command line wins). On CONFIG_ERROR, errbuf names the
 * option or variable and the bad value. Call config_free() on every path. */
config_result config_load(app_config *cfg, int argc, char **argv, char *errbuf, size_t errlen);
void config_free(app_config *cfg);
/* "HOST:PORT" for display, with brackets around an IPv6 host. */
void config_format_hostport(const char *host, int port, char *out, size_t outlen);

#endif /* APP_CONFIG_H */
