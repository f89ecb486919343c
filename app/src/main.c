/* main.c - coupon-server: start-up in its steps (options, logs, signals,
 * the store and lock clients, the claim workers, HTTP, the lock watch),
 * the wait for SIGINT/SIGTERM, and the orderly stop; the one place that
 * wires the strategies (claim/) into the options (core/). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <jansson.h>

#include "app.h"
#include "claim/bundle.h"
#include "claim/claimq.h"
#include "claim/hold_log.h"
#include "claim/section.h"
#include "claim/stock_view.h"
#include "claim/strategies.h"
#include "core/lockwatch.h"
#include "core/log.h"
#include "core/metrics.h"
#include "http/peer.h"
#include "http/routes.h"
#include "http/server.h"

/* Written by the signal handler, read by main: the self-pipe turns an
 * asynchronous signal into an ordinary readable fd, so all shutdown work
 * (which takes locks and frees memory, neither async-signal-safe) runs on
 * the main thread, never inside the handler. */
static int stop_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno; /* the interrupted code may be about to read errno */
    unsigned char b = (unsigned char)sig;
    ssize_t w = write(stop_pipe[1], &b, 1);
    (void)w; /* a full pipe already holds a wake-up */
    errno = saved;
}

/* --fault-pause-ms MS:signal: arm the next section's stall. */
static void on_fault_signal(int sig)
{
    (void)sig;
    section_fault_arm();
}

static int catch_signals(const app_config *cfg)
{
    struct sigaction sa;

    if (pipe(stop_pipe) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        int fl = fcntl(stop_pipe[i], F_GETFL);
        /* Non-blocking: a burst of signals must never block the handler. */
        if (fl < 0 || fcntl(stop_pipe[i], F_SETFL, fl | O_NONBLOCK) != 0 ||
            fcntl(stop_pipe[i], F_SETFD, FD_CLOEXEC) != 0)
            return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return -1;
    /* Only when asked for: otherwise SIGUSR1 keeps its default action. */
    sa.sa_handler = on_fault_signal;
    if (cfg->fault_pause_ms > 0 && cfg->fault_pause_every == 0 && sigaction(SIGUSR1, &sa, NULL) != 0)
        return -1;
    /* A peer that closes first (a Redis node, a client) must give EPIPE,
     * not kill the process. */
    sa.sa_handler = SIG_IGN;
    sa.sa_flags = 0;
    return sigaction(SIGPIPE, &sa, NULL);
}

/* Returns the signal that asked for the stop (0 if unknown). */
static int wait_for_stop(void)
{
    struct pollfd pfd = {.fd = stop_pipe[0], .events = POLLIN};
    unsigned char b = 0;
    for (;;) {
        int r = poll(&pfd, 1, -1);
        if (r > 0)
            return read(stop_pipe[0], &b, 1) == 1 ? (int)b : 0;
        if (r < 0 && errno != EINTR)
            return 0;
    }
}

/* The process as start-up builds it: stop() takes down whatever was
 * reached, in reverse order, from the pointers left NULL or set here. */
typedef struct process {
    int argc;
    char **argv;
    config_strategy strategies[64]; /* the registry's, as the options see them */
    app_config cfg;
    app a;
    worker_pool *pool;       /* the HTTP threads' slots */
    worker_pool *claim_pool; /* the claim workers' slots */
    claimq *claims;
    server *srv;
    int port;
    sigset_t oldmask; /* the mask before start-up blocked the stop signals */
    int stopping;     /* a signal asked for the stop */
    char err[512];    /* why a step failed: the one line on stderr */
} process;

/* What a step tells main: go on, or stop with an exit status (the
 * contract: 2 for bad options or an unusable address or store, 1 when the
 * system failed, 0 after --help or a signal). */
typedef enum step {
    STEP_NEXT = -1,
    STEP_DONE = 0,
    STEP_FAILED = 1,
    STEP_USAGE = 2
} step;

static step fail(process *p, step s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static step fail(process *p, step s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof p->err, fmt, ap);
    va_end(ap);
    return s;
}

/* The options, with the registry's strategies to choose from. */
static step read_options(process *p)
{
    const strategy *s;
    size_t n = 0;

    for (; (s = strategy_at(n)) != NULL; n++) {
        /* Room for the registry (11 today); a longer one must not hide a strategy. */
        if (n == sizeof p->strategies / sizeof p->strategies[0])
            return fail(p, STEP_FAILED, "more than %zu strategies registered", n);
        p->strategies[n] = (config_strategy){s->name, s->summary, s->default_threads, s->default_claim_workers};
    }
    switch (config_load(&p->cfg, p->strategies, n, p->argc, p->argv, p->err, sizeof p->err)) {
    case CONFIG_OK:
        break;
    case CONFIG_HELP:
        return STEP_DONE;
    case CONFIG_ERROR:
        return STEP_USAGE;
    }
    p->a.cfg = &p->cfg;
    p->a.strat = strategy_by_name(p->cfg.strategy); /* config_load checked the name */
    /* --bundle-lock resolved before the pool: its lock ways need a lock client per slot. */
    if (bundle_setup(&p->cfg, p->a.strat->uses_lock, p->err, sizeof p->err) != 0)
        return STEP_USAGE;
    /* The start-up line says the way resolved, not "unset". */
    if (p->cfg.bundle_lock == NULL && (p->cfg.bundle_lock = strdup(bundle_lock_name())) == NULL)
        return fail(p, STEP_FAILED, "out of memory");
    /* Whether a coupon's 0 stock is final for the fast path's view: every
     * claim and every bundle of this process can only lower a stock. The
     * bundle's lock ways run their section under --fence like a claim. */
    const strategy *st = p->a.strat;
    int falls = st->stock_falls == STOCK_FALLS_ALWAYS ||
                (st->stock_falls == STOCK_FALLS_FENCED && p->cfg.fence == DB_FENCE_FULL);
    if (bundle_uses_lock() && p->cfg.fence != DB_FENCE_FULL)
        falls = 0;
    if (stock_view_setup(p->cfg.stock_view_ms, falls, p->cfg.db_busy_ms) != 0)
        return fail(p, STEP_FAILED, "cannot set up the stock view's clock");
    /* A bad --trusted-proxy is a usage error, before anything starts. */
    if (peer_trust(p->cfg.trusted_proxy, p->err, sizeof p->err) != 0)
        return STEP_USAGE;
    atomic_init(&p->a.in_flight, 0);
    atomic_init(&p->a.stopping, 0);
    log_set_level(p->cfg.log_level);
    metrics_init(COUPON_VERSION);
    /* jansson seeds its hash function on first use; doing it here, before
     * any thread exists, keeps that one-time write out of a race. */
    json_object_seed(0);
    return STEP_NEXT;
}

/* Before any thread: the logs' descriptors are then only read by them. */
static step open_logs(process *p)
{
    if (access_log_open(p->cfg.access_log, p->err, sizeof p->err) != 0 ||
        hold_log_open(p->cfg.hold_log, p->err, sizeof p->err) != 0)
        return STEP_USAGE;
    return STEP_NEXT;
}

/* Descriptors the process may need at most:
 *   - every client connection;
 *   - the store's and the lock's connections of every slot (an HTTP
 *     thread, a claim worker, the health prober, the lock watch). A SQLite
 *     file takes up to 4 with its WAL, shared-memory and journal files, a
 *     PostgreSQL connection 1; each Redis node a round connection and a
 *     wake-up one;
 *   - libmicrohttpd's epoll and wake-up descriptors per thread;
 *   - a few more (the listen socket, the logs, the stop pipe, stdio). */
static rlim_t fds_needed(const app_config *cfg)
{
    rlim_t slots = (rlim_t)cfg->threads + (rlim_t)cfg->claim_workers + 2;
    return (rlim_t)cfg->max_connections + slots * (4 + 2 * (rlim_t)cfg->n_redis) + 2 * (rlim_t)cfg->threads + 32;
}

/* A connection past RLIMIT_NOFILE would make accept(2) fail with EMFILE
 * under load, and libmicrohttpd then closes connections without an
 * answer: refused at start instead, saying what is needed. The soft limit
 * is raised to what is needed first, when the hard limit allows it. */
static step check_fd_limit(process *p)
{
    struct rlimit rl;
    rlim_t need = fds_needed(&p->cfg);

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return fail(p, STEP_FAILED, "cannot read RLIMIT_NOFILE: %s", strerror(errno));
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        struct rlimit up = {rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0)
            rl.rlim_cur = up.rlim_cur;
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
        return fail(p, STEP_USAGE,
                    "RLIMIT_NOFILE is %llu (hard %llu), but --max-connections %u plus the store and Redis "
                    "connections of %d HTTP threads and %d claim workers need about %llu descriptors: "
                    "raise it (ulimit -n %llu) or lower --max-connections",
                    (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max, p->cfg.max_connections,
                    p->cfg.threads, p->cfg.claim_workers, (unsigned long long)need, (unsigned long long)need);
    return STEP_NEXT;
}

static step install_signals(process *p)
{
    sigset_t stopsigs;

    if (catch_signals(&p->cfg) != 0)
        return fail(p, STEP_FAILED, "cannot install signal handlers: %s", strerror(errno));
    /* Request threads (and libdlock's watchdogs) inherit this mask, so a
     * signal is always handled on the main thread and never interrupts a
     * Redis or SQLite call with EINTR in the middle of a claim. serve()
     * restores the old mask once every thread has started. */
    sigemptyset(&stopsigs);
    sigaddset(&stopsigs, SIGINT);
    sigaddset(&stopsigs, SIGTERM);
    sigaddset(&stopsigs, SIGUSR1);
    int e = pthread_sigmask(SIG_BLOCK, &stopsigs, &p->oldmask);
    if (e != 0)
        return fail(p, STEP_FAILED, "cannot block the stop signals: %s", strerror(e));
    return STEP_NEXT;
}

/* Opens one of the two pools of worker slots; 0, or the step that failed. */
static step open_pool(process *p, size_t n, pool_locks locks, worker_pool **out)
{
    char why[sizeof p->err - 64];

    switch (pool_new(&p->cfg, n, locks, out, why, sizeof why)) {
    case POOL_OK:
        return STEP_NEXT;
    case POOL_ERR_DB:
        return fail(p, STEP_USAGE, "%s", why);
    case POOL_ERR_LOCK:
        return fail(p, STEP_USAGE, "--redis: %s", why);
    case POOL_ERR_SYSTEM:
        break;
    }
    return fail(p, STEP_FAILED, "%s", why);
}

/* The worker slots: the store's connections and the lock clients. One
 * slot per HTTP thread (checked out per request: a thread never waits for
 * a slot) and, in a pool of their own, one per claim worker (held for its
 * life), whose lock clients alone keep locks under --lock-cache-ms. A
 * store that cannot take writes would answer every claim with an error:
 * better to refuse to start, with the reason. */
static step open_store(process *p)
{
    const app_config *cfg = &p->cfg;
    int uses_lock = p->a.strat->uses_lock || bundle_uses_lock();
    pool_locks claim_locks = !uses_lock ? POOL_NO_LOCK
                             : p->a.strat->uses_lock && cfg->lock_cache_ms > 0 ? POOL_LOCK_CACHED
                                                                                : POOL_LOCK;
    step st = open_pool(p, (size_t)cfg->threads, uses_lock ? POOL_LOCK : POOL_NO_LOCK, &p->pool);

    if (st == STEP_NEXT)
        st = open_pool(p, (size_t)cfg->claim_workers, claim_locks, &p->claim_pool);
    if (st != STEP_NEXT)
        return st;
    p->a.pool = p->pool;
    worker *w = pool_checkout(p->pool);
    db_status ds = db_write_probe(w->db);
    if (ds != DB_OK)
        (void)fail(p, STEP_USAGE, "--db %s: the database cannot be written: %s", cfg->db_path, db_errmsg(w->db));
    pool_return(p->pool, w);
    return ds == DB_OK ? STEP_NEXT : STEP_USAGE;
}

/* Before the HTTP threads that feed them. */
static step start_claim_workers(process *p)
{
    const app_config *cfg = &p->cfg;

    if (claimq_start(cfg, p->a.strat, p->claim_pool, (size_t)cfg->claim_workers, (size_t)cfg->claim_queue, &p->claims,
                     p->err, sizeof p->err) != 0)
        return STEP_FAILED;
    p->a.claims = p->claims;
    return STEP_NEXT;
}

static step start_http(process *p)
{
    int started = server_start(&p->a, &p->srv, &p->port, p->err, sizeof p->err);

    if (started == 0)
        return STEP_NEXT;
    return started == SERVER_ERR_BIND ? STEP_USAGE : STEP_FAILED;
}

/* The node log and gauges follow the lock service from here on (after the
 * bind: a usage error stays the one line it should be). */
static step watch_lock(process *p)
{
    if (p->a.strat->uses_lock && lockwatch_start(&p->cfg, p->err, sizeof p->err) != 0)
        return STEP_FAILED;
    return STEP_NEXT;
}

/* Says where it listens, then waits for SIGINT/SIGTERM. */
static step serve(process *p)
{
    char hostport[320];

    config_format_hostport(p->cfg.listen_host, p->port, hostport, sizeof hostport);
    /* Scripts and tests wait for this exact line to learn the real port. */
    printf("listening on http://%s\n", hostport);
    fflush(stdout);
    if (log_enabled(LOG_INFO)) {
        char opts[2048];
        config_describe(&p->cfg, opts, sizeof opts);
        log_event_line(LOG_INFO, LOG_EV_START, "coupon-server %s listening on http://%s pid %ld: %s", COUPON_VERSION,
                       hostport, (long)getpid(), opts);
    }
    int e = pthread_sigmask(SIG_SETMASK, &p->oldmask, NULL);
    if (e != 0)
        return fail(p, STEP_FAILED, "cannot unblock the stop signals: %s", strerror(e));
    int sig = wait_for_stop();
    log_event_line(LOG_INFO, LOG_EV_STOP, "%s: stopping; finishing the requests in flight (up to %d ms)",
                   sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "signal", p->cfg.shutdown_grace_ms);
    p->stopping = 1;
    return STEP_DONE;
}

/* Whatever start-up reached, in reverse; each call accepts what was never made. */
static void stop(process *p)
{
    server_stop(p->srv);     /* stops the claim queue in its drain */
    claimq_free(p->claims);  /* after the server: its threads submit to the queue */
    lockwatch_stop();
    pool_free(p->claim_pool);
    pool_free(p->pool);
    if (p->stopping)
        log_event_line(LOG_INFO, LOG_EV_STOPPED, "stopped");
    access_log_close();
    hold_log_close();
    config_free(&p->cfg);
    for (int i = 0; i < 2; i++)
        if (stop_pipe[i] >= 0)
            close(stop_pipe[i]);
}

int main(int argc, char **argv)
{
    static step (*const START[])(process *) = {read_options, check_fd_limit, open_logs, install_signals, open_store,
                                               start_claim_workers, start_http, watch_lock, serve};
    static process p; /* static: zeroed, and large for a stack */
    step s = STEP_NEXT;

    p.argc = argc;
    p.argv = argv;
    for (size_t i = 0; s == STEP_NEXT && i < sizeof START / sizeof START[0]; i++)
        s = START[i](&p);
    /* The one error path: one line, then the same stop as after a signal. */
    if (s == STEP_USAGE || s == STEP_FAILED)
        fprintf(stderr, "coupon-server: %s\n", p.err);
    stop(&p);
    return (int)s;
}
