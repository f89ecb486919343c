/* run_command.c - run a program with a time limit and capture its combined
 * stdout+stderr (for CLI, load-tester and install suites), find the
 * project's scripts, and pick lines out of what they printed. */
#include "procs_base.h"
#include "procs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Cap on captured output: a runaway program cannot exhaust the suite's memory. */
#define RUN_MAX_OUTPUT (64u << 20)

int run_command(const char *const *argv, int timeout_ms, char **output)
{
    int result = -1;
    int pfd[2] = {-1, -1};
    pid_t pid = -1;
    pid_t parent = getpid();
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int st = 0;
    int timed_out = 0;

    if (output)
        *output = NULL;
    if (!argv || !argv[0]) {
        fprintf(stderr, "run_command: no command\n");
        return -1;
    }
    if (pipe(pfd) != 0) {
        fprintf(stderr, "run_command: pipe: %s\n", strerror(errno));
        goto out;
    }
    /* Close-on-exec: children forked by other threads must not inherit the
     * write end, or our read would wait for them to exit. */
    fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
    fcntl(pfd[1], F_SETFD, FD_CLOEXEC);
    cap = 4096;
    buf = malloc(cap);
    if (!buf) {
        fprintf(stderr, "run_command: out of memory\n");
        goto out;
    }
    buf[0] = '\0';
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "run_command: fork: %s\n", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(pfd[1], 1) < 0 || dup2(pfd[1], 2) < 0)
            _exit(127);
        procs_close_extra_fds();
        procs_die_with_parent(parent);
        /* Own process group: on timeout the whole tree is killed, so a
         * grandchild holding the pipe cannot keep us reading forever. */
        setpgid(0, 0);
        execv(argv[0], (char *const *)argv);
        fprintf(stderr, "run_command: exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    procs_track(pid);
    close(pfd[1]);
    pfd[1] = -1;

    int64_t deadline = test_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        int64_t left = deadline - test_now_ms();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        int n = poll(&p, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "run_command: poll: %s\n", strerror(errno));
            timed_out = 1;
            break;
        }
        if (n == 0)
            continue;
        if (len + 4096 + 1 > cap && cap < RUN_MAX_OUTPUT) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                fprintf(stderr, "run_command: out of memory\n");
                timed_out = 1;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        char sink[4096];
        char *dst = (len + 4096 + 1 <= cap) ? buf + len : sink;
        ssize_t r = read(pfd[0], dst, 4096);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break; /* EOF: every writer closed */
        if (dst != sink) {
            len += (size_t)r;
            buf[len] = '\0';
        }
    }
    if (timed_out) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        fprintf(stderr, "run_command: %s killed after %d ms\n", argv[0], timeout_ms);
    }
    {
        int64_t left = deadline - test_now_ms();
        int w = procs_wait_bounded(pid, left > 0 ? left : 0, &st);
        if (w != 1) {
            kill(-pid, SIGKILL);
            if (procs_stop_pid(pid, SIGKILL, 5000, &st) != 0) {
                fprintf(stderr, "run_command: cannot reap %s\n", argv[0]);
                pid = -1;
                goto out;
            }
            timed_out = 1;
        } else {
            procs_untrack(pid);
        }
    }
    pid = -1;
    result = procs_exit_code(st);
    if (output) {
        *output = buf;
        buf = NULL;
    }
out:
    if (pid > 0) {
        kill(-pid, SIGKILL);
        procs_stop_pid(pid, SIGKILL, 5000, NULL);
    }
    if (pfd[0] >= 0)
        close(pfd[0]);
    if (pfd[1] >= 0)
        close(pfd[1]);
    free(buf);
    return result;
}

int test_script_paths(const char *name, char *script, size_t slen, char *bin_dir, size_t blen)
{
    const char *src = getenv("DLOCK_SOURCE_DIR"), *bin = getenv("DLOCK_BINARY_DIR");
    if (src == NULL || bin == NULL)
        return -1;
    int a = snprintf(script, slen, "%s/scripts/%s", src, name);
    int b = snprintf(bin_dir, blen, "%s/bin", bin);
    return a < 0 || (size_t)a >= slen || b < 0 || (size_t)b >= blen ? -1 : 0;
}

int text_line(const char *text, const char *prefix, const char *needle, char *line, size_t len)
{
    size_t n = strlen(prefix);
    for (const char *p = text; p != NULL && *p != '\0';) {
        const char *eol = strchr(p, '\n');
        size_t l = eol ? (size_t)(eol - p) : strlen(p);
        if (l >= n && strncmp(p, prefix, n) == 0) {
            snprintf(line, len, "%.*s", (int)l, p);
            if (needle == NULL || strstr(line, needle) != NULL)
                return 0;
        }
        p = eol ? eol + 1 : NULL;
    }
    return -1;
}

int text_left_nothing(const char *text, char *why, size_t len)
{
    int named = 0;
    for (const char *p = text; (p = strstr(p, " pid ")) != NULL; p += 5) {
        long pid = strtol(p + 5, NULL, 10);
        if (pid <= 1)
            continue;
        named++;
        errno = 0;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) {
            snprintf(why, len, "pid %ld still running", pid);
            return -1;
        }
    }
    if (named == 0) {
        snprintf(why, len, "the output named no process");
        return -1;
    }
    const char *t = strstr(text, "temp dir ");
    char dir[256];
    if (t == NULL || sscanf(t + 9, "%255s", dir) != 1) {
        snprintf(why, len, "the output named no temp dir");
        return -1;
    }
    if (access(dir, F_OK) == 0) {
        snprintf(why, len, "temp dir %s left behind", dir);
        return -1;
    }
    return 0;
}
