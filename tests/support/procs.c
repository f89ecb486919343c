/* procs.c - test support basics: loopback ports, monotonic time, child
 * reaping with bounds, and the registry that kills leftover children at exit. */
#include "procs_base.h"
#include "procs_internal.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int free_loopback_port(void)
{
    int result = -1;
    int fd = -1;
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fprintf(stderr, "free_loopback_port: socket: %s\n", strerror(errno));
        goto out;
    }
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        fprintf(stderr, "free_loopback_port: bind: %s\n", strerror(errno));
        goto out;
    }
    result = ntohs(sa.sin_port);
out:
    if (fd >= 0)
        close(fd);
    return result;
}

int64_t test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void test_sleep_ms(int64_t ms)
{
    struct timespec ts;
    if (ms <= 0)
        return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    /* nanosleep writes the remainder back, so a signal only shortens the
     * current slice, never the total. */
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void procs_close_extra_fds(void)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0)
        return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536)
        max = 65536;
    for (int fd = 3; fd < max; fd++)
        close(fd);
}

void procs_die_with_parent(pid_t parent)
{
    /* Tied to the forking thread: suites start servers from the test's own
     * thread. The getppid check closes the race where the parent died
     * before prctl ran. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(127);
}

pid_t procs_spawn_quiet(const char *const *argv, const char *what)
{
    pid_t parent = getpid();
    pid_t pid = fork();

    if (pid < 0) {
        fprintf(stderr, "%s: fork: %s\n", what, strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(devnull, 2) < 0)
            _exit(127);
        procs_close_extra_fds();
        procs_die_with_parent(parent);
        setpgid(0, 0);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    procs_track(pid);
    return pid;
}

int procs_wait_bounded(pid_t pid, int64_t timeout_ms, int *status)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    int st = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (status)
                *status = st;
            return 1;
        }
        if (r < 0 && errno != EINTR)
            return -1;
        if (test_now_ms() >= deadline)
            return 0;
        test_sleep_ms(5);
    }
}

int procs_stop_pid(pid_t pid, int sig, int64_t timeout_ms, int *status)
{
    int st = 0;
    int r;
    if (pid <= 0)
        return -1;
    if (kill(pid, sig) != 0 && errno != ESRCH)
        return -1;
    /* A stopped process keeps SIGTERM pending forever; wake it so a
     * graceful stop of a paused server does not always end in SIGKILL. */
    if (sig != SIGKILL && sig != SIGSTOP)
        kill(pid, SIGCONT);
    r = procs_wait_bounded(pid, timeout_ms, &st);
    if (r == 0) {
        kill(pid, SIGKILL);
        while ((r = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
        }
        r = (r == pid) ? 1 : -1;
    }
    procs_untrack(pid);
    if (r != 1)
        return -1;
    if (status)
        *status = st;
    return 0;
}

int procs_exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return -1;
}

#define PROCS_MAX_TRACKED 256
static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t g_reg[PROCS_MAX_TRACKED];
static pid_t g_reg_owner;
static int g_reg_atexit;

static void procs_kill_leftovers(void)
{
    /* Forked test workers inherit the table and the handler: only the
     * process that started the children may kill them. */
    if (getpid() != g_reg_owner)
        return;
    pthread_mutex_lock(&g_reg_mu);
    for (size_t i = 0; i < PROCS_MAX_TRACKED; i++) {
        if (g_reg[i] > 0) {
            kill(g_reg[i], SIGKILL);
            while (waitpid(g_reg[i], NULL, 0) < 0 && errno == EINTR) {
            }
            g_reg[i] = 0;
        }
    }
    pthread_mutex_unlock(&g_reg_mu);
}

void procs_track(pid_t pid)
{
    pthread_mutex_lock(&g_reg_mu);
    if (g_reg_owner != getpid()) {
        /* A forked child starting its own servers owns a fresh table. */
        memset(g_reg, 0, sizeof g_reg);
        g_reg_owner = getpid();
    }
    if (!g_reg_atexit) {
        g_reg_atexit = atexit(procs_kill_leftovers) == 0;
    }
    for (size_t i = 0; i < PROCS_MAX_TRACKED; i++) {
        if (g_reg[i] == 0) {
            g_reg[i] = pid;
            break;
        }
    }
    pthread_mutex_unlock(&g_reg_mu);
}

void procs_untrack(pid_t pid)
{
    pthread_mutex_lock(&g_reg_mu);
    for (size_t i = 0; i < PROCS_MAX_TRACKED; i++) {
        if (g_reg[i] == pid)
            g_reg[i] = 0;
    }
    pthread_mutex_unlock(&g_reg_mu);
}

int procs_wait_state(pid_t pid, int flag, const char *what, const char *name)
{
    int64_t deadline = test_now_ms() + 10000;
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, flag | WNOHANG);
        if (w == pid && ((flag == WUNTRACED && WIFSTOPPED(st)) || (flag == WCONTINUED && WIFCONTINUED(st))))
            return 0;
        if (w == pid) {
            fprintf(stderr, "%s: %s exited (status %d)\n", what, name, procs_exit_code(st));
            procs_untrack(pid);
            return -2;
        }
        if (w < 0 && errno != EINTR) {
            fprintf(stderr, "%s: waitpid: %s\n", what, strerror(errno));
            return -1;
        }
        if (test_now_ms() >= deadline) {
            fprintf(stderr, "%s: %s did not change state\n", what, name);
            return -1;
        }
        test_sleep_ms(1);
    }
}

int procs_signal_wait(pid_t *pid, int sig, int flag, const char *what, const char *name)
{
    if (!pid || *pid <= 0) {
        fprintf(stderr, "%s: not running\n", what);
        return -1;
    }
    if (kill(*pid, sig) != 0) {
        fprintf(stderr, "%s: kill: %s\n", what, strerror(errno));
        return -1;
    }
    int rc = procs_wait_state(*pid, flag, what, name);
    if (rc == -2)
        *pid = 0; /* it exited: reaped and untracked */
    return rc == 0 ? 0 : -1;
}
