/* server_proc.c - coupon-server processes for the suites: start on a free
 * port (--listen 127.0.0.1:0, real port read from its banner) and stop by PID. */
#include "procs.h"
#include "procs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SERVER_READY_MS 10000
#define SERVER_STOP_MS 10000
#define SERVER_MAX_ARGS 64
/* Words of DLOCK_TEST_SERVER_WRAPPER, e.g. "valgrind --error-exitcode=99":
 * the CI's memcheck run starts every coupon-server under it. */
#define SERVER_MAX_WRAP 12

/* Looks for "listening on http://HOST:PORT" in text; returns the port or 0. */
static int banner_port(const char *text)
{
    const char *p = strstr(text, "listening on http://");
    if (!p)
        return 0;
    const char *eol = strchr(p, '\n');
    if (!eol)
        return 0; /* only a complete line: the port may still be half-written */
    const char *colon = NULL;
    for (const char *q = p + strlen("listening on http://"); q < eol; q++)
        if (*q == ':')
            colon = q;
    if (!colon)
        return 0;
    long port = strtol(colon + 1, NULL, 10);
    return (port > 0 && port < 65536) ? (int)port : 0;
}

int server_start(server_proc *s, const char *const *extra_args)
{
    int result = -1;
    char path[] = "/tmp/dlock-server-out-XXXXXX";
    int fd = -1;
    const char *argv[SERVER_MAX_WRAP + SERVER_MAX_ARGS + 4];
    size_t n = 0;
    const char *bin = getenv("COUPON_SERVER_BIN");
    const char *wrapper = getenv("DLOCK_TEST_SERVER_WRAPPER");
    char wrap[1024];
    const char *exe = bin;
    pid_t parent = getpid();
    char text[8192];
    size_t have = 0;

    if (!s) {
        fprintf(stderr, "server_start: NULL\n");
        return -1;
    }
    s->pid = 0;
    s->port = 0;
    s->url[0] = '\0';
    if (!bin || !bin[0]) {
        fprintf(stderr, "server_start: COUPON_SERVER_BIN is not set\n");
        return -1;
    }
    if (wrapper != NULL && wrapper[0] != '\0') {
        /* The wrapper execs the server in the same process (valgrind does), so
         * s->pid, signals and the exit status stay the server's. */
        if (snprintf(wrap, sizeof wrap, "%s", wrapper) >= (int)sizeof wrap) {
            fprintf(stderr, "server_start: DLOCK_TEST_SERVER_WRAPPER too long\n");
            return -1;
        }
        for (char *save = NULL, *w = strtok_r(wrap, " ", &save); w != NULL; w = strtok_r(NULL, " ", &save)) {
            if (n >= SERVER_MAX_WRAP) {
                fprintf(stderr, "server_start: DLOCK_TEST_SERVER_WRAPPER has too many words\n");
                return -1;
            }
            argv[n++] = w;
        }
        exe = argv[0];
    }
    argv[n++] = bin;
    for (size_t i = 0; extra_args && extra_args[i]; i++) {
        if (n >= SERVER_MAX_WRAP + SERVER_MAX_ARGS) {
            fprintf(stderr, "server_start: too many arguments\n");
            return -1;
        }
        argv[n++] = extra_args[i];
    }
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n] = NULL;

    /* stdout goes to a file, not a pipe: nobody has to keep draining it,
     * so a chatty server can never block on a full pipe mid-test. */
    fd = mkstemp(path);
    if (fd < 0) {
        fprintf(stderr, "server_start: mkstemp: %s\n", strerror(errno));
        goto out;
    }
    s->pid = fork();
    if (s->pid < 0) {
        fprintf(stderr, "server_start: fork: %s\n", strerror(errno));
        s->pid = 0;
        goto out;
    }
    if (s->pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(fd, 1) < 0)
            _exit(127);
        procs_close_extra_fds();
        procs_die_with_parent(parent);
        /* execvp: the wrapper is found on PATH; the server's path is absolute. */
        execvp(exe, (char *const *)argv);
        _exit(127);
    }
    procs_track(s->pid);

    /* Under a wrapper (valgrind) a start takes several times longer. */
    int64_t deadline = test_now_ms() + (exe != bin ? 3 * SERVER_READY_MS : SERVER_READY_MS);
    for (;;) {
        ssize_t r = pread(fd, text + have, sizeof text - 1 - have, (off_t)have);
        if (r > 0) {
            have += (size_t)r;
            text[have] = '\0';
            s->port = banner_port(text);
            if (s->port > 0)
                break;
            continue;
        }
        if (r < 0 && errno != EINTR) {
            fprintf(stderr, "server_start: read: %s\n", strerror(errno));
            goto out;
        }
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            procs_untrack(s->pid);
            s->pid = 0;
            fprintf(stderr, "server_start: %s exited before listening (status %d)\n", bin,
                    procs_exit_code(st));
            goto out;
        }
        if (have == sizeof text - 1 || test_now_ms() >= deadline) {
            fprintf(stderr, "server_start: no \"listening on\" line within %d ms\n",
                    SERVER_READY_MS);
            goto out;
        }
        test_sleep_ms(5);
    }
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
    result = 0;
out:
    if (result != 0 && s->pid > 0) {
        procs_stop_pid(s->pid, SIGKILL, SERVER_STOP_MS, NULL);
        s->pid = 0;
        s->port = 0;
    }
    if (fd >= 0) {
        close(fd);
        /* The child keeps its own descriptor: later output goes to the
         * unlinked file and vanishes with the process. */
        unlink(path);
    }
    return result;
}

int server_stop(server_proc *s, int sig, int *exit_status)
{
    int st = 0;
    if (exit_status)
        *exit_status = -1;
    if (!s || s->pid <= 0) {
        fprintf(stderr, "server_stop: not running\n");
        return -1;
    }
    if (procs_stop_pid(s->pid, sig, SERVER_STOP_MS, &st) != 0) {
        fprintf(stderr, "server_stop: pid %d could not be reaped\n", (int)s->pid);
        return -1;
    }
    s->pid = 0;
    if (exit_status)
        *exit_status = procs_exit_code(st);
    return 0;
}

int server_pause(server_proc *s)
{
    return procs_signal_wait(s ? &s->pid : NULL, SIGSTOP, WUNTRACED, "server_pause", s ? s->url : "");
}

int server_resume(server_proc *s)
{
    return procs_signal_wait(s ? &s->pid : NULL, SIGCONT, WCONTINUED, "server_resume",
                             s ? s->url : "");
}
