/* main.c - coupon-server: startup (options, store, worker slots, HTTP),
 * the wait for SIGINT/SIGTERM, and the orderly shutdown. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "app.h"
#include "claim/bundle.h"
#include "claim/claimq.h"
#include "claim/hold_log.h"
#include "claim/section.h"
#include "core/lockwatch.h"
#include "core/log.h"
#include "core/metrics.h"
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

static int install_signals(const app_config *cfg)
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

/* Start-up check: a store that cannot take writes would answer every claim
 * with an error; better to refuse to start, with the reason. */
static int check_db_writable(worker_pool *pool, const app_config *cfg, char *err, size_t errlen)
{
    worker *w = pool_checkout(pool);
    db_status st = db_write_probe(w->db);
    if (st != DB_OK)
        snprintf(err, errlen, "--db %s: the database cannot be written: %s", cfg->db_path, db_errmsg(w->db));
    pool_return(pool, w);
    return st == DB_OK ? 0 : -1;
}

int main(int argc, char **argv)
{
    int rc = 1;
    app_config cfg;
    app a;
    worker_pool *pool = NULL;
    claimq *claims = NULL;
    server *srv = NULL;
    char err[512] = "";
    sigset_t stopsigs, oldmask;
    int port = 0;
    int stopping = 0;

    memset(&a, 0, sizeof a);
    switch (config_load(&cfg, argc, argv, err, sizeof err)) {
    case CONFIG_OK:
        break;
    case CONFIG_HELP:
        rc = 0;
        goto out;
    case CONFIG_ERROR:
        fprintf(stderr, "coupon-server: %s\n", err);
        rc = 2;
        goto out;
    }
    log_set_level(cfg.log_level);
    metrics_init(COUPON_VERSION);
    if (access_log_open(cfg.access_log, err, sizeof err) != 0) {
        fprintf(stderr, "coupon-server: %s\n", err);
        rc = 2;
        goto out;
    }
    a.cfg = &cfg;
    a.strat = strategy_by_name(cfg.strategy);
    /* --bundle-lock resolved before the pool: its lock ways need a lock client per slot. */
    if (bundle_setup(&cfg, a.strat->uses_lock, err, sizeof err) != 0) {
        fprintf(stderr, "coupon-server: %s\n", err);
        rc = 2;
        goto out;
    }
    /* Before any thread: the log's descriptor is then only read by them. */
    if (hold_log_open(cfg.hold_log, err, sizeof err) != 0) {
        fprintf(stderr, "coupon-server: %s\n", err);
        rc = 2;
        goto out;
    }
    atomic_init(&a.in_flight, 0);
    atomic_init(&a.stopping, 0);
    /* jansson seeds its hash function on first use; doing it here, before
     * any thread exists, keeps that one-time write out of a race. */
    json_object_seed(0);

    if (install_signals(&cfg) != 0) {
        fprintf(stderr, "coupon-server: cannot install signal handlers: %s\n", strerror(errno));
        goto out;
    }
    /* Request threads (and libdlock's watchdogs) inherit this mask, so a
     * signal is always handled on the main thread and never interrupts a
     * Redis or SQLite call with EINTR in the middle of a claim. */
    sigemptyset(&stopsigs);
    sigaddset(&stopsigs, SIGINT);
    sigaddset(&stopsigs, SIGTERM);
    sigaddset(&stopsigs, SIGUSR1);
    if (pthread_sigmask(SIG_BLOCK, &stopsigs, &oldmask) != 0)
        goto out;

    /* One slot per HTTP thread (checked out per request: a thread never
     * waits for a slot) and one per claim worker (held for its life). */
    switch (pool_new(&cfg, (size_t)cfg.threads + (size_t)cfg.claim_workers, a.strat->uses_lock || bundle_uses_lock(), &pool, err,
                     sizeof err)) {
    case POOL_OK:
        break;
    case POOL_ERR_DB:
        fprintf(stderr, "coupon-server: %s\n", err);
        rc = 2;
        goto out;
    case POOL_ERR_LOCK:
        fprintf(stderr, "coupon-server: --redis: %s\n", err);
        rc = 2;
        goto out;
    case POOL_ERR_SYSTEM:
        fprintf(stderr, "coupon-server: %s\n", err);
        goto out;
    }
    a.pool = pool;
    if (check_db_writable(pool, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "coupon-server: %s\n", err);
        rc = 2;
        goto out;
    }
    /* The claim workers start before the HTTP threads that feed them. */
    if (claimq_start(&cfg, a.strat, pool, (size_t)cfg.claim_workers, (size_t)cfg.claim_queue, &claims, err,
                     sizeof err) != 0) {
        fprintf(stderr, "coupon-server: %s\n", err);
        goto out;
    }
    a.claims = claims;
    int started = server_start(&a, &srv, &port, err, sizeof err);
    if (started != 0) {
        fprintf(stderr, "coupon-server: %s\n", err);
        rc = started == SERVER_ERR_BIND ? 2 : 1;
        goto out;
    }
    /* The node log and gauges follow the lock service from here on (after
     * the bind: a usage error stays the one line it should be). */
    if (a.strat->uses_lock && lockwatch_start(&cfg, err, sizeof err) != 0) {
        fprintf(stderr, "coupon-server: %s\n", err);
        goto out;
    }
    char hostport[320];
    config_format_hostport(cfg.listen_host, port, hostport, sizeof hostport);
    /* Scripts and tests wait for this exact line to learn the real port. */
    printf("listening on http://%s\n", hostport);
    fflush(stdout);
    if (log_enabled(LOG_INFO)) {
        char opts[2048];
        config_describe(&cfg, opts, sizeof opts);
        log_event_line(LOG_INFO, LOG_EV_START, "coupon-server %s listening on http://%s pid %ld: %s", COUPON_VERSION,
                       hostport, (long)getpid(), opts);
    }

    if (pthread_sigmask(SIG_SETMASK, &oldmask, NULL) != 0)
        goto out;
    int sig = wait_for_stop();
    log_event_line(LOG_INFO, LOG_EV_STOP, "%s: stopping; finishing the requests in flight (up to %d ms)",
                   sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "signal", cfg.shutdown_grace_ms);
    stopping = 1;
    rc = 0;
out:
    server_stop(srv); /* stops the claim queue in its drain */
    claimq_free(claims); /* after the server: its threads submit to the queue */
    lockwatch_stop();
    pool_free(pool);
    if (stopping)
        log_event_line(LOG_INFO, LOG_EV_STOPPED, "stopped");
    access_log_close();
    hold_log_close();
    config_free(&cfg);
    for (int i = 0; i < 2; i++)
        if (stop_pipe[i] >= 0)
            close(stop_pipe[i]);
    return rc;
}
