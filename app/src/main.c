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
#include "claim/hold_log.h"
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

static int install_signals(void)
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
    /* A peer that closes first (a Redis node, a client) must give EPIPE,
     * not kill the process. */
    sa.sa_handler = SIG_IGN;
    sa.sa_flags = 0;
    return sigaction(SIGPIPE, &sa, NULL);
}

static void wait_for_stop(void)
{
    struct pollfd pfd = {.fd = stop_pipe[0], .events = POLLIN};
    for (;;) {
        int r = poll(&pfd, 1, -1);
        if (r > 0)
            return;
        if (r < 0 && errno != EINTR)
            return;
    }
}

int main(int argc, char **argv)
{
    int rc = 1;
    app_config cfg;
    app a;
    worker_pool *pool = NULL;
    server *srv = NULL;
    char err[512] = "";
    sigset_t stopsigs, oldmask;
    int port = 0;

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
    a.cfg = &cfg;
    a.strat = strategy_by_name(cfg.strategy);
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

    if (install_signals() != 0) {
        fprintf(stderr, "coupon-server: cannot install signal handlers: %s\n", strerror(errno));
        goto out;
    }
    /* Request threads (and libdlock's watchdogs) inherit this mask, so a
     * signal is always handled on the main thread and never interrupts a
     * Redis or SQLite call with EINTR in the middle of a claim. */
    sigemptyset(&stopsigs);
    sigaddset(&stopsigs, SIGINT);
    sigaddset(&stopsigs, SIGTERM);
    if (pthread_sigmask(SIG_BLOCK, &stopsigs, &oldmask) != 0)
        goto out;

    /* One slot per pool thread: a thread never waits for a slot. */
    switch (pool_new(&cfg, (size_t)cfg.threads, a.strat->uses_lock, &pool, err, sizeof err)) {
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

    if (server_start(&a, &srv, &port, err, sizeof err) != 0) {
        fprintf(stderr, "coupon-server: %s\n", err);
        goto out;
    }
    char hostport[320];
    config_format_hostport(cfg.listen_host, port, hostport, sizeof hostport);
    /* Scripts and tests wait for this exact line to learn the real port. */
    printf("listening on http://%s\n", hostport);
    fflush(stdout);

    if (pthread_sigmask(SIG_SETMASK, &oldmask, NULL) != 0)
        goto out;
    wait_for_stop();
    rc = 0;
out:
    server_stop(srv);
    pool_free(pool);
    hold_log_close();
    config_free(&cfg);
    for (int i = 0; i < 2; i++)
        if (stop_pipe[i] >= 0)
            close(stop_pipe[i]);
    return rc;
}
