/* haproxy_proc.c - HAProxy started and stopped by PID (haproxy_proc.h). */
#include "haproxy_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "raw_conn.h"

int haproxy_find(char *out, size_t len)
{
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/sbin:/usr/local/sbin", path != NULL ? path : "");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
        int n = snprintf(out, len, "%s/haproxy", d);
        if (n > 0 && (size_t)n < len && access(out, X_OK) == 0)
            return 0;
    }
    out[0] = '\0';
    return -1;
}

static int fail(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return -1;
}

/* waitpid for at most ms: 1 reaped, 0 still running. */
static int reap_within(pid_t pid, int64_t ms)
{
    int64_t deadline = test_now_ms() + ms;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD))
            return 1;
        if (test_now_ms() >= deadline)
            return 0;
        test_sleep_ms(10);
    }
}

/* The last 600 bytes of the log, for a message. */
static void log_tail(const haproxy_proc *h, char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen(h->log, "rb");
    if (f == NULL)
        return;
    if (fseek(f, -600, SEEK_END) != 0)
        rewind(f);
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    fclose(f);
}

/* Writes h->cfg with the shipped writer: bash sources the script and
 * calls haproxy_config DIR BIND SERVER..., which prints the file's path. */
static int write_config(haproxy_proc *h, const server_proc *const *servers, size_t n, char *why, size_t whylen)
{
    const char *src = getenv("DLOCK_SOURCE_DIR");
    char script[512], bind[64], addrs[2][64];
    if (src == NULL || n == 0 || n > 2)
        return fail(why, whylen, "DLOCK_SOURCE_DIR is not set (ctest sets it), or %zu servers", n);
    snprintf(script, sizeof script, "%s/scripts/lib/haproxy.sh", src);
    snprintf(bind, sizeof bind, "127.0.0.1:%d", h->front.port);
    const char *argv[9] = {"/bin/bash", "-c", "source \"$0\" && haproxy_config \"$@\"", script, h->dir, bind};
    for (size_t i = 0; i < n; i++) {
        snprintf(addrs[i], sizeof addrs[i], "127.0.0.1:%d", servers[i]->port);
        argv[6 + i] = addrs[i];
    }
    argv[6 + n] = NULL;
    char *out = NULL;
    int st = run_command(argv, 10000, &out);
    size_t l = out != NULL ? strcspn(out, "\n") : 0;
    if (st != 0 || l == 0 || l >= sizeof h->cfg) {
        fail(why, whylen, "haproxy_config exited %d: %s", st, out != NULL ? out : "");
        free(out);
        return -1;
    }
    snprintf(h->cfg, sizeof h->cfg, "%.*s", (int)l, out);
    free(out);
    const char *sed = getenv("APP_FRONT_HAPROXY_SED");
    if (sed != NULL && sed[0] != '\0') {
        const char *sargv[] = {"/bin/sed", "-i", "-e", sed, h->cfg, NULL};
        st = run_command(sargv, 10000, &out);
        fprintf(stderr, "haproxy: APP_FRONT_HAPROXY_SED '%s' applied to the shipped config (exit %d)\n", sed, st);
        free(out);
        if (st != 0)
            return fail(why, whylen, "sed '%s' exited %d", sed, st);
    }
    return 0;
}

int haproxy_start(haproxy_proc *h, const server_proc *const *servers, size_t n, char *why, size_t whylen)
{
    char bin[512], tail[640];
    memset(h, 0, sizeof *h);
    if (haproxy_find(bin, sizeof bin) != 0)
        return fail(why, whylen, "haproxy is not installed");
    if (test_mkdtemp(h->dir, sizeof h->dir, "coupon-front.") != 0)
        return fail(why, whylen, "no temp dir");
    h->front.port = free_loopback_port();
    snprintf(h->front.url, sizeof h->front.url, "http://127.0.0.1:%d", h->front.port);
    snprintf(h->log, sizeof h->log, "%s/haproxy.log", h->dir);
    if (h->front.port <= 0 || write_config(h, servers, n, why, whylen) != 0)
        goto fail;
    /* HAProxy's own check first: a refused configuration is a clear failure, not a dead process. */
    const char *cargv[] = {bin, "-c", "-q", "-f", h->cfg, NULL};
    char *out = NULL;
    int st = run_command(cargv, 10000, &out);
    if (st != 0) {
        fail(why, whylen, "haproxy -c refused %s (exit %d): %s", h->cfg, st, out != NULL ? out : "");
        free(out);
        goto fail;
    }
    free(out);
    int logfd = open(h->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (logfd < 0) {
        fail(why, whylen, "%s: %s", h->log, strerror(errno));
        goto fail;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* A test process that dies mid-way must not leave HAProxy running. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(127);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
            _exit(127);
        execl(bin, bin, "-db", "-f", h->cfg, (char *)NULL);
        _exit(127);
    }
    close(logfd);
    if (pid < 0) {
        fail(why, whylen, "fork: %s", strerror(errno));
        goto fail;
    }
    h->pid = pid;
    int64_t deadline = test_now_ms() + 10000;
    for (;;) {
        int fd = raw_connect(&h->front, "127.0.0.1", 500);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        int wst;
        if (waitpid(pid, &wst, WNOHANG) == pid) {
            h->pid = 0;
            log_tail(h, tail, sizeof tail);
            fail(why, whylen, "haproxy exited before accepting (status %d): %s", wst, tail);
            goto fail;
        }
        if (test_now_ms() >= deadline) {
            log_tail(h, tail, sizeof tail);
            fail(why, whylen, "haproxy did not accept on %s within 10 s: %s", h->front.url, tail);
            goto fail;
        }
        test_sleep_ms(50);
    }
fail:
    haproxy_stop(h);
    return -1;
}

void haproxy_stop(haproxy_proc *h)
{
    if (h->pid > 0) {
        /* SIGTERM: HAProxy's hard stop (closes everything at once). */
        kill(h->pid, SIGTERM);
        if (!reap_within(h->pid, 5000)) {
            kill(h->pid, SIGKILL);
            (void)reap_within(h->pid, 5000);
        }
        h->pid = 0;
    }
    if (h->dir[0] != '\0')
        test_rmtree(h->dir);
    h->dir[0] = '\0';
}

int haproxy_log_count(const haproxy_proc *h, const char *needle)
{
    FILE *f = fopen(h->log, "rb");
    if (f == NULL)
        return 0;
    char line[4096];
    int count = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (strstr(line, needle) != NULL)
            count++;
    fclose(f);
    return count;
}
