/* sentinel_proc.c - real Redis Sentinel processes for the suites: the plain
 * redis-server binary in sentinel mode, its config file written into its own
 * temp dir (Sentinel rewrites the file as it learns), on a free loopback
 * port; stopped by PID. */
#include "procs_base.h"
#include "procs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SENTINEL_READY_MS 5000
#define SENTINEL_STOP_MS 5000
#define SENTINEL_PORT_TRIES 5

static const char *redis_bin(void)
{
    const char *b = getenv("DLOCK_REDIS_SERVER");
    return (b && b[0]) ? b : "redis-server";
}

static int write_conf(const sentinel_proc *s, const char *name, int master_port, int down_after_ms,
                      int failover_timeout_ms, char *path, size_t pathlen)
{
    FILE *f;
    int ok;

    snprintf(path, pathlen, "%s/sentinel.conf", s->dir);
    f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "sentinel_start: %s: %s\n", path, strerror(errno));
        return -1;
    }
    /* Quorum 1: one sentinel may call the master down and fail it over,
     * which keeps the suites small; what it shows of replication does not
     * depend on how many sentinels agree. */
    ok = fprintf(f,
                 "port %d\n"
                 "bind 127.0.0.1\n"
                 "daemonize no\n"
                 "dir %s\n"
                 "logfile %s/sentinel.log\n"
                 "sentinel monitor %s 127.0.0.1 %d 1\n"
                 "sentinel down-after-milliseconds %s %d\n"
                 "sentinel failover-timeout %s %d\n"
                 "sentinel parallel-syncs %s 1\n",
                 s->port, s->dir, s->dir, name, master_port, name, down_after_ms, name,
                 failover_timeout_ms, name) > 0;
    if (fclose(f) != 0 || !ok) {
        fprintf(stderr, "sentinel_start: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

static pid_t spawn(const char *conf)
{
    const char *argv[] = {redis_bin(), conf, "--sentinel", NULL};

    return procs_spawn_quiet(argv, "sentinel_start");
}

/* 1 answers PING, 0 the child exited (port taken?), -1 timeout. */
static int wait_ready(sentinel_proc *s)
{
    int64_t deadline = test_now_ms() + SENTINEL_READY_MS;
    const char *ping[1] = {"PING"};
    char reply[64];
    int st;

    while (test_now_ms() < deadline) {
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            procs_untrack(s->pid);
            s->pid = 0;
            return 0;
        }
        if (procs_redis_cmd_port(s->port, NULL, 200, reply, sizeof reply, 1, ping) == 0 &&
            strcmp(reply, "PONG") == 0)
            return 1;
        test_sleep_ms(20);
    }
    return -1;
}

int sentinel_start(sentinel_proc *s, const char *master_name, int master_port, int down_after_ms,
                   int failover_timeout_ms)
{
    char conf[320];

    if (s == NULL || master_name == NULL || s->pid > 0) {
        fprintf(stderr, "sentinel_start: bad arguments or already running\n");
        return -1;
    }
    /* Named like the redis dirs, so redis_start's sweep removes it when
     * this process dies without sentinel_stop. */
    if (test_mkdtemp(s->dir, sizeof s->dir, "dlock-redis-%d-sentinel-", (int)getpid()) != 0)
        return -1;
    for (int i = 0; i < SENTINEL_PORT_TRIES; i++) {
        int ready;

        s->port = free_loopback_port();
        if (s->port < 0)
            break;
        snprintf(s->addr, sizeof s->addr, "127.0.0.1:%d", s->port);
        if (write_conf(s, master_name, master_port, down_after_ms, failover_timeout_ms, conf,
                       sizeof conf) != 0)
            break;
        s->pid = spawn(conf);
        if (s->pid < 0) {
            s->pid = 0;
            break;
        }
        ready = wait_ready(s);
        if (ready == 1)
            return 0;
        if (ready < 0) {
            procs_stop_pid(s->pid, SIGKILL, SENTINEL_STOP_MS, NULL);
            s->pid = 0;
            fprintf(stderr, "sentinel_start: %s did not answer PING within %d ms (log %s)\n",
                    s->addr, SENTINEL_READY_MS, s->dir);
            break;
        }
        /* Exited at start: most likely the port was taken meanwhile. */
    }
    fprintf(stderr, "sentinel_start: no sentinel started (log in %s)\n", s->dir);
    sentinel_stop(s);
    return -1;
}

int sentinel_stop(sentinel_proc *s)
{
    int result = 0;

    if (s == NULL)
        return 0;
    if (s->pid > 0 && procs_stop_pid(s->pid, SIGTERM, SENTINEL_STOP_MS, NULL) != 0) {
        fprintf(stderr, "sentinel_stop: %s (pid %d) could not be reaped\n", s->addr, (int)s->pid);
        result = -1;
    }
    s->pid = 0;
    if (s->dir[0]) {
        if (test_rmtree(s->dir) != 0)
            result = -1;
        s->dir[0] = '\0';
    }
    return result;
}

int sentinel_pause(sentinel_proc *s)
{
    return procs_signal_wait(s ? &s->pid : NULL, SIGSTOP, WUNTRACED, "sentinel_pause",
                             s ? s->addr : "");
}

int sentinel_resume(sentinel_proc *s)
{
    return procs_signal_wait(s ? &s->pid : NULL, SIGCONT, WCONTINUED, "sentinel_resume",
                             s ? s->addr : "");
}

int sentinel_cmd(const sentinel_proc *s, char *out, size_t outlen, int argc,
                 const char *const *argv)
{
    redis_proc probe;

    if (s == NULL || s->port <= 0) {
        fprintf(stderr, "sentinel_cmd: not started\n");
        return -1;
    }
    memset(&probe, 0, sizeof probe);
    probe.port = s->port;
    snprintf(probe.addr, sizeof probe.addr, "%s", s->addr);
    return redis_cmd(&probe, out, outlen, argc, argv);
}
