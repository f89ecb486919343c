/* loadtest.h - private declarations shared by coupon-loadtest's parts
 * (options, workers, progress, coupon reads, audit, report); the histogram,
 * clock and option parser are common/'s (common.h).
 *
 * coupon-loadtest checks the coupon service from the outside: it speaks HTTP
 * to the servers and reads the SQLite file read-only. It links nothing of
 * app/, lock/ or db/, so a bug there cannot hide itself from this audit.
 *
 * Conventions: functions return 0 on success and -1 on failure, with a
 * one-line reason in the caller's err buffer; free functions accept NULL. */
#ifndef LOADTEST_H
#define LOADTEST_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"

/* Exit statuses (the contract's). */
#define LT_EXIT_OK 0       /* no oversell */
#define LT_EXIT_OVERSOLD 1 /* the audit found an oversell or a lost/invented success */
#define LT_EXIT_USAGE 2    /* bad arguments, unreachable server, unreadable DB */
#define LT_EXIT_STUCK 3    /* nothing oversold, but the sale stood still: every claim 1005, stock left */

#define LT_ERR_MAX 1024    /* one-line error messages */
#define LT_USER_MAX 64     /* the contract's longest user_id */

/* ---- options.c ---------------------------------------------------------- */

/* --route: how a claim picks its --url (route.c). */
typedef enum lt_route {
    LT_ROUTE_RR,     /* the connection's URL, connections dealt round robin over the URLs */
    LT_ROUTE_COUPON  /* the URL a consistent hash of the claim's coupon id picks */
} lt_route;

typedef struct lt_options {
    char **urls;             /* base URLs, trailing '/' removed; owned (lt_options_free) */
    size_t n_urls;
    int64_t coupon_id;       /* > 0 */
    unsigned threads;        /* 1..LT_THREADS_MAX */
    unsigned connections;    /* keep-alive connections in all, >= threads (default = threads) */
    uint64_t requests;       /* total over all threads; 0 = until --duration ends */
    double duration_s;       /* 0 = no time limit */
    uint64_t users;          /* 0 = a distinct user per request */
    const char *user_prefix; /* borrowed from argv, or NULL for the default */
    const char *db_path;     /* borrowed from argv, or NULL */
    int json;                /* print the report as one JSON object */
    int quiet;               /* no progress line */
    int use_get;             /* GET instead of the canonical POST */
    lt_route route;          /* --route: which URL each claim goes to */
    long timeout_ms;         /* whole request */
    long connect_timeout_ms;
    long give_up_ms;         /* a connection that cannot (re)connect for this long stops trying */
    double rate;             /* requests/s over the whole run (open loop); 0 = closed loop */
    double warmup_s;         /* the first S seconds are left out of latency and throughput */
    const char *timeline_path; /* --timeline CSV, borrowed from argv, or NULL */
    uint64_t seed;           /* PRNG seed for --users; 0 = from /dev/urandom */
    int help;                /* --help was given: print usage, exit 0 */
    int version;             /* --version was given: print it, exit 0 */
    int audit_only;          /* no load: read every source and judge the coupon as it is */
    /* The many-coupon sale (spread.c): --coupons, --zipf, --bundle. */
    int64_t *coupon_ids;     /* the --coupons set, ascending; owned; NULL without --coupons */
    size_t n_coupons;
    double zipf;             /* 0 = uniform; S > 0: the k-th coupon drawn with weight 1/k^S */
    unsigned bundle;         /* 0 = one coupon per claim; K = bundles of K distinct coupons */
} lt_options;

#define LT_COUPONS_MAX 100000u /* --coupons: most coupons one run spreads over */
#define LT_BUNDLE_MAX 16u      /* the API's longest bundle */

#define LT_THREADS_MAX 4096u
#define LT_CONNECTIONS_MAX 10000u /* ~10 KB of buffers each */

/* Parse argv into *o (zeroed first). Returns 0, or -1 with err set. */
int lt_options_parse(int argc, char **argv, lt_options *o, char *err, size_t errlen);
void lt_options_free(lt_options *o);
/* The --help text to f; 0, or -1 when f could not be written. */
int lt_usage(FILE *f);

/* ---- route.c ------------------------------------------------------------ */

/* The index of the URL (of n_urls) that claims of coupon_id go to under
 * --route coupon: jump consistent hashing of the mixed id (route.c says
 * why); the same for a coupon on every call and in every run. */
size_t lt_route_coupon(int64_t coupon_id, size_t n_urls);
/* "rr" or "coupon": --route's words, and the report's. */
const char *lt_route_name(lt_route r);
/* 0 and *out set for "rr" or "coupon"; -1 for anything else. */
int lt_route_parse(const char *name, lt_route *out);

/* ---- the latency histogram --------------------------------------------- */

/* common/'s (common.h): log-linear, in microseconds, fixed size, merged by
 * adding counts. The unit suites in tests/loadtest/ call it by the names it
 * had here, kept as aliases for them; the loadtest's own code uses cm_hist. */
typedef cm_hist lt_hist;
#define LT_HIST_MAX_BITS CM_HIST_MAX_BITS
#define LT_HIST_BUCKETS CM_HIST_BUCKETS
#define lt_hist_init cm_hist_init
#define lt_hist_record cm_hist_record
#define lt_hist_merge cm_hist_merge
#define lt_hist_quantile cm_hist_quantile
#define lt_hist_mean cm_hist_mean
#define lt_hist_index cm_hist_index
#define lt_hist_bucket_low cm_hist_bucket_low
#define lt_hist_bucket_high cm_hist_bucket_high

/* ---- stats.c --------------------------------------------------- */

#define LT_STATUS_SLOTS 600  /* HTTP statuses 0..599 counted directly */
#define LT_CODE_SLOTS 32     /* distinct JSON codes kept; more go to code_other */
#define LT_CURL_SLOTS 128    /* CURLcode values counted directly */
#define LT_CODE_MISSING LONG_MIN /* body had no parsable "code" (-1 is a valid code) */

/* What an answer meant for the claim, for the latency split: the 503s (lock
 * busy, lock service down, lease ended) are the answers a lock adds, and
 * their latency is the lock wait; sold-out answers skip the lock's section. */
typedef enum lt_outcome {
    LT_OUT_WON,      /* code 0: the claim got a coupon */
    LT_OUT_SOLD_OUT, /* code 1003 */
    LT_OUT_503,      /* HTTP 503 (1005, 1006, 1010) */
    LT_OUT_OTHER,    /* anything else answered (1004, 4xx, 500, no code) */
    LT_OUT_COUNT
} lt_outcome;

/* "won", "sold_out", "503", "other": the keys of the text and JSON reports. */
const char *lt_outcome_name(lt_outcome o);
lt_outcome lt_outcome_of(int status, long code);

typedef struct lt_code_count {
    long code;
    uint64_t count;
} lt_code_count;

typedef struct lt_stats {
    cm_hist hist;                          /* latency of answered requests, us */
    cm_hist by_outcome[LT_OUT_COUNT];      /* the same latencies split by outcome */
    uint64_t answered;                     /* requests that got an HTTP response */
    uint64_t by_status[LT_STATUS_SLOTS];
    uint64_t status_other;                 /* status >= 600 */
    lt_code_count codes[LT_CODE_SLOTS];
    size_t n_codes;
    uint64_t code_other;                   /* codes beyond LT_CODE_SLOTS distinct ones */
    uint64_t successes;                    /* code 0 */
    uint64_t errors;                       /* sent, but no HTTP response (timeout, reset) */
    uint64_t errors_by_curl[LT_CURL_SLOTS];
    /* Connections apart from requests: a refused connect sends nothing, so it
     * is neither an answer nor a request error, and it never counts in
     * throughput. */
    uint64_t connect_attempts;             /* every connect, the first ones and the reconnects */
    uint64_t connect_failures;             /* of which failed */
    uint64_t connect_by_curl[LT_CURL_SLOTS];
    uint64_t gave_up;                      /* connections that stopped retrying (--give-up-ms) */
    uint64_t unsent;                       /* requests due but never sent: no connection */
} lt_stats;

void lt_stats_init(lt_stats *s);
/* The same for an lt_stats that is already all zero bytes (calloc). */
void lt_stats_init_zeroed(lt_stats *s);
void lt_stats_add_code(lt_stats *s, long code, uint64_t n);
void lt_stats_merge(lt_stats *dst, const lt_stats *src);
/* The integer after the top-level "code" key of a JSON body, without a JSON
 * parser; LT_CODE_MISSING when absent or malformed. */
long lt_scan_code(const char *body, size_t len);

/* ---- http1.c ------------------------------------------------------------ */

/* Where a base URL points: what curl connects to and what the request says. */
typedef struct lt_target {
    char url[256];  /* the base URL, for curl's CONNECT_ONLY connect */
    char host[200]; /* Host header value, "host:port" */
    char path[200]; /* path prefix without a trailing '/', often "" */
} lt_target;

typedef struct lt_http_resp {
    int status;       /* 200..599 (1xx interim answers are skipped) */
    int keep_alive;   /* 0: the server closes (Connection: close, HTTP/1.0, no length) */
    size_t consumed;  /* bytes of the buffer this response used */
    size_t body_len;  /* body bytes copied out (truncated to the caller's cap) */
} lt_http_resp;

int lt_target_parse(const char *base_url, lt_target *t, char *err, size_t errlen);
/* The claim request (POST, or GET with use_get); its length, or -1 if cap is too small. */
int lt_http_format_claim(char *buf, size_t cap, const lt_target *t, int use_get, int64_t coupon_id,
                         const char *user);
/* One response from buf[0..len); eof: the server has closed. Returns 1 when
 * complete (*out filled, body copied), 0 when more bytes are needed, -1
 * when malformed. Never reads past len. */
int lt_http_parse(const char *buf, size_t len, int eof, char *body, size_t body_cap, lt_http_resp *out);

/* ---- worker.c ----------------------------------------------------------- */

typedef struct lt_timeline lt_timeline; /* timeline.c */

/* What all workers share. */
typedef struct lt_run {
    const lt_options *opt;
    lt_target *targets;               /* one per URL; owned by main */
    atomic_uint_fast64_t next_ticket; /* request number handed out next */
    atomic_int stop;                  /* set by SIGINT/SIGTERM or a failed worker */
    int64_t start_ns;                 /* CLOCK_MONOTONIC when the load began */
    int64_t deadline_ns;              /* CLOCK_MONOTONIC, 0 = none */
    int64_t warmup_end_ns;            /* requests started before it are warm-up; 0 = none */
    char user_tag[40];                /* prefix of per-request users: distinct across runs */
    uint64_t seed;
} lt_run;

typedef struct lt_worker {
    unsigned index;
    unsigned first_conn;              /* global number of its first connection */
    unsigned n_conns;                 /* connections this thread drives */
    lt_run *run;
    lt_stats stats;                   /* owned by the worker thread until joined */
    lt_stats warm;                    /* requests of the warm-up: for the audit only */
    lt_timeline *timeline;            /* its own buckets (--timeline), or NULL */
    atomic_uint_fast64_t done;        /* published for the progress line (relaxed) */
    atomic_uint_fast64_t errors;
    atomic_uint_fast64_t connect_failures;
    char err[LT_ERR_MAX];             /* set when the worker failed */
    int failed;
    pthread_t tid;
    int started;
} lt_worker;

/* Start opt->threads workers sharing opt->connections connections, URLs
 * assigned round-robin by connection (--route rr) or all the coupon's URL
 * (--route coupon). *out is calloc'd (free with
 * lt_workers_free after lt_workers_join). */
int lt_workers_start(lt_run *run, lt_worker **out, char *err, size_t errlen);
void lt_workers_join(lt_worker *w, unsigned n);
void lt_workers_free(lt_worker *w, unsigned n); /* and their timelines */

/* ---- timeline.c --------------------------------------------------------- */

#define LT_TIMELINE_BUCKET_MS 250

/* Per 250 ms of the run (by the time each answer arrived): answers, claims
 * won, the 503s by code, transport errors, and a small latency histogram
 * for p50/p99 (16 buckets per power of two: the middle is within 3 %).
 * One per worker, merged at the end; buckets grow as the run goes on. */
lt_timeline *lt_timeline_new(void); /* NULL when out of memory */
void lt_timeline_free(lt_timeline *t);
/* One answer (status, JSON code, latency) or one error, at since_ns after
 * the run's start. 0, or -1 when out of memory (counted: the CSV says so). */
int lt_timeline_answer(lt_timeline *t, int64_t since_ns, int status, long code, uint64_t latency_us);
int lt_timeline_error(lt_timeline *t, int64_t since_ns);
/* Adds src's buckets to dst. 0, or -1 when out of memory. */
int lt_timeline_merge(lt_timeline *dst, const lt_timeline *src);
/* The CSV: a header line, then one line per bucket from 0 to the last one
 * with anything in it. 0, or -1 with err set (unwritable, or buckets lost). */
int lt_timeline_write_csv(const lt_timeline *t, FILE *f, char *err, size_t errlen);

/* ---- progress.c --------------------------------------------------------- */

typedef struct lt_progress lt_progress;

/* A thread that prints "done/total, rate, errors" to f: in place with '\r'
 * when f is a terminal, else one line per second. NULL *out when quiet. */
int lt_progress_start(FILE *f, const lt_worker *w, unsigned n, uint64_t total, lt_progress **out,
                      char *err, size_t errlen);
void lt_progress_stop(lt_progress *p); /* joins and frees; NULL ok */

/* ---- coupon_http.c / coupon_sqlite.c ------------------------------------ */

/* One reading of a coupon, from a server or from the DB. */
typedef struct lt_coupon_view {
    int ok;                   /* nonzero when the read succeeded */
    int not_found;            /* the source answered: no such coupon */
    char source[160];         /* the URL, or "db <path>" */
    int64_t total;
    int64_t stock;
    int64_t issued;           /* COUNT(coupon_record) */
    int64_t per_user_limit;   /* 0 = unlimited */
    int has_users;            /* the two fields below are known (DB only) */
    int64_t users_over_limit; /* users holding more than per_user_limit */
    int64_t excess_records;   /* records beyond the per-user limit, summed over users */
    char err[LT_ERR_MAX];
} lt_coupon_view;

/* GET <base>/api/v1/coupon/<id>; 0 when read (view->ok), else -1 and view->err. */
int lt_coupon_http_read(const char *base_url, int64_t coupon_id, long timeout_ms,
                        lt_coupon_view *view);

typedef struct lt_db lt_db;
/* Opens the SQLite file read-only (SQLITE_OPEN_READONLY): the audit never
 * writes. A "postgresql://" or "postgres://" URL opens a read-only
 * PostgreSQL session instead (coupon_pg.c). */
int lt_db_open(const char *path, lt_db **out, char *err, size_t errlen);
int lt_db_read(lt_db *db, int64_t coupon_id, lt_coupon_view *view);
void lt_db_close(lt_db *db);

/* coupon_pg.c: the same reads on PostgreSQL, behind lt_db. lt_pg_read
 * fills total, stock, issued, per_user_limit, the user excess (or
 * not_found); -1 with detail on failure. */
typedef struct lt_pg lt_pg;
int lt_pg_open(const char *url, lt_pg **out, char *err, size_t errlen);
int lt_pg_read(lt_pg *p, int64_t coupon_id, lt_coupon_view *view, char *detail, size_t dlen);
void lt_pg_close(lt_pg *p);

/* One coupon_record row, for the spread and bundle audit (spread.c). */
typedef struct lt_record {
    int64_t id;
    int64_t coupon_id;
    char user_id[LT_USER_MAX + 1];
} lt_record;
/* Every record whose user_id starts with user_prefix ([A-Za-z0-9_.:-]
 * only), in id order; *out malloc'd (free()), *n its length. 0, or -1 with err. */
int lt_db_records(lt_db *db, const char *user_prefix, lt_record **out, size_t *n, char *err, size_t errlen);
int lt_pg_records(lt_pg *p, const char *user_prefix, lt_record **out, size_t *n, char *err, size_t errlen);

/* ---- audit.c ------------------------------------------------------------ */

#define LT_FINDINGS_MAX 64

typedef struct lt_finding {
    char what[224];
    int64_t excess;
} lt_finding;

typedef struct lt_audit {
    int64_t coupon_id;
    lt_coupon_view before;      /* first URL, before the run */
    int have_db;
    lt_coupon_view db_before;
    lt_coupon_view *after;      /* one per URL; owned (lt_audit_free) */
    size_t n_after;
    lt_coupon_view db_after;
    uint64_t successes_seen;    /* code 0 answers the workers got */
    uint64_t transport_errors;  /* answers the workers never got */
    lt_finding findings[LT_FINDINGS_MAX];
    size_t n_findings;
    size_t findings_dropped;    /* beyond LT_FINDINGS_MAX; still counted in oversold_by */
    int64_t oversold_by;        /* the largest excess of any finding; 0 = NO OVERSELL */
    int incomplete;             /* a source could not be read after the run */
    uint64_t answered;          /* claims that got an HTTP answer */
    uint64_t lock_refusals;     /* of which code 1005 (lock not acquired in time) */
    int stuck;                  /* no oversell, stock left, yet every answer was 1005 */
} lt_audit;

/* Fill the findings and oversold_by from the views (see lt_usage for N). */
void lt_audit_evaluate(lt_audit *a);
void lt_audit_free(lt_audit *a); /* frees a->after; NULL ok */

/* ---- report.c ----------------------------------------------------------- */

typedef struct lt_summary {
    const lt_options *opt;
    const lt_stats *stats;      /* merged over workers, warm-up left out */
    const lt_stats *warm;       /* the warm-up's, merged over workers */
    double elapsed_s;           /* the measured part: from the warm-up's end */
    uint64_t requests_done;     /* answered + transport errors, warm-up left out */
    int interrupted;            /* stopped early by a signal */
    const lt_audit *audit;
} lt_summary;

const char *lt_verdict(const lt_audit *a, char *buf, size_t len);
int lt_report_text(FILE *f, const lt_summary *s);
int lt_report_json(FILE *f, const lt_summary *s);

/* ---- spread.c ----------------------------------------------------------- */

/* The run with --coupons (and --bundle): load, per-coupon and per-bundle
 * audit, report; returns the exit status. */
int lt_spread_main(const lt_options *o);

#endif /* LOADTEST_H */
