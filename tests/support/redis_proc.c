/* redis_proc.c - real redis-server processes for the suites: start on a
 * free loopback port, kill, restart, pause, resume, stop, and a tiny RESP
 * client (redis_cmd) that needs no hiredis. */
#include "procs_base.h"
#include "procs_internal.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define REDIS_READY_MS 5000
#define REDIS_STOP_MS 5000
#define REDIS_PORT_TRIES 5
/* redis_cmd bound: long enough for an fsync'd AOF write on a busy machine,
 * short enough that a paused node cannot hang a test. */
#define REDIS_CMD_MS 2000

/* ---- tiny RESP client ---------------------------------------------------- */

typedef struct resp_conn {
    int fd;
    int64_t deadline;
    char buf[4096];
    size_t len, pos;
} resp_conn;

static int resp_connect(resp_conn *c, int port, int64_t timeout_ms)
{
    int result = -1;
    struct sockaddr_in sa;
    int one = 1;
    int err = 0;
    socklen_t errlen = sizeof err;

    c->fd = -1;
    c->len = c->pos = 0;
    c->deadline = test_now_ms() + timeout_ms;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (c->fd < 0)
        goto out;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((uint16_t)port);
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (errno != EINPROGRESS)
            goto out;
        struct pollfd p = {.fd = c->fd, .events = POLLOUT};
        for (;;) {
            int64_t left = c->deadline - test_now_ms();
            if (left <= 0)
                goto out;
            int n = poll(&p, 1, (int)left);
            if (n > 0)
                break;
            if (n < 0 && errno != EINTR)
                goto out;
        }
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &errlen) != 0 || err != 0)
            goto out;
    }
    result = 0;
out:
    if (result != 0 && c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    return result;
}

static void resp_close(resp_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

static int resp_wait(resp_conn *c, short ev)
{
    struct pollfd p = {.fd = c->fd, .events = ev};
    for (;;) {
        int64_t left = c->deadline - test_now_ms();
        if (left <= 0)
            return -1;
        int n = poll(&p, 1, (int)left);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

static int resp_write_all(resp_conn *c, const char *p, size_t n)
{
    while (n > 0) {
        /* MSG_NOSIGNAL: a server killed mid-test must give an error, not a
         * SIGPIPE that kills the suite. */
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (resp_wait(c, POLLOUT) != 0)
                return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

static int resp_send(resp_conn *c, int argc, const char *const *argv)
{
    char head[32];
    int n = snprintf(head, sizeof head, "*%d\r\n", argc);
    if (resp_write_all(c, head, (size_t)n) != 0)
        return -1;
    for (int i = 0; i < argc; i++) {
        size_t len = strlen(argv[i]);
        n = snprintf(head, sizeof head, "$%zu\r\n", len);
        if (resp_write_all(c, head, (size_t)n) != 0 || resp_write_all(c, argv[i], len) != 0 ||
            resp_write_all(c, "\r\n", 2) != 0)
            return -1;
    }
    return 0;
}

static int resp_getc(resp_conn *c)
{
    while (c->pos == c->len) {
        ssize_t r = recv(c->fd, c->buf, sizeof c->buf, 0);
        if (r > 0) {
            c->len = (size_t)r;
            c->pos = 0;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (resp_wait(c, POLLIN) != 0)
                return -1;
        } else {
            return -1;
        }
    }
    return (unsigned char)c->buf[c->pos++];
}

/* One CRLF-terminated line into line (truncated to cap-1), without CRLF. */
static int resp_line(resp_conn *c, char *line, size_t cap)
{
    size_t n = 0;
    int prev = 0;
    for (;;) {
        int ch = resp_getc(c);
        if (ch < 0)
            return -1;
        if (prev == '\r' && ch == '\n') {
            if (n > 0)
                n--;
            break;
        }
        if (n + 1 < cap)
            line[n++] = (char)ch;
        prev = ch;
    }
    line[n] = '\0';
    return 0;
}

typedef struct text_out {
    char *p;
    size_t cap, len;
} text_out;

static void out_put(text_out *o, const char *s, size_t n)
{
    if (o->cap == 0)
        return;
    size_t room = o->cap - 1 - o->len;
    if (n > room)
        n = room;
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

/* Reads one reply, appends it as text; arrays are flattened, one element a
 * line. Returns 0 on a well-formed reply, -1 on transport/protocol errors. */
static int resp_read_reply(resp_conn *c, text_out *o, int depth)
{
    char line[1024];
    if (depth > 8 || resp_line(c, line, sizeof line) != 0)
        return -1;
    switch (line[0]) {
    case '+':
    case ':':
        out_put(o, line + 1, strlen(line + 1));
        return 0;
    case '-':
        /* Every error starts with "ERR" in our text, so suites can test one
         * prefix even for NOAUTH / NOSCRIPT / WRONGPASS replies. */
        if (strncmp(line + 1, "ERR", 3) != 0)
            out_put(o, "ERR ", 4);
        out_put(o, line + 1, strlen(line + 1));
        return 0;
    case '$': {
        long n = strtol(line + 1, NULL, 10);
        if (n < 0) {
            out_put(o, "(nil)", 5);
            return 0;
        }
        for (long i = 0; i < n + 2; i++) {
            int ch = resp_getc(c);
            if (ch < 0)
                return -1;
            if (i < n) {
                char b = (char)ch;
                out_put(o, &b, 1);
            }
        }
        return 0;
    }
    case '*': {
        long n = strtol(line + 1, NULL, 10);
        if (n < 0) {
            out_put(o, "(nil)", 5);
            return 0;
        }
        for (long i = 0; i < n; i++) {
            if (i > 0)
                out_put(o, "\n", 1);
            if (resp_read_reply(c, o, depth + 1) != 0)
                return -1;
        }
        return 0;
    }
    default:
        return -1;
    }
}

/* Connect, AUTH if the node has a password, run argv; reply text in out. */
int procs_redis_cmd_port(int port, const char *password, int64_t timeout_ms, char *out,
                         size_t outlen, int argc, const char *const *argv)
{
    int result = -1;
    resp_conn c = {.fd = -1};
    text_out o = {.p = out, .cap = outlen, .len = 0};
    char authbuf[128];
    text_out a = {.p = authbuf, .cap = sizeof authbuf, .len = 0};

    if (outlen > 0)
        out[0] = '\0';
    if (resp_connect(&c, port, timeout_ms) != 0)
        goto out;
    if (password && password[0]) {
        const char *auth[2] = {"AUTH", password};
        authbuf[0] = '\0';
        if (resp_send(&c, 2, auth) != 0 || resp_read_reply(&c, &a, 0) != 0)
            goto out;
    }
    if (resp_send(&c, argc, argv) != 0 || resp_read_reply(&c, &o, 0) != 0)
        goto out;
    result = 0;
out:
    resp_close(&c);
    return result;
}

int redis_cmd(const redis_proc *r, char *out, size_t outlen, int argc, const char *const *argv)
{
    if (!r || !argv || argc <= 0 || r->port <= 0) {
        fprintf(stderr, "redis_cmd: bad arguments\n");
        return -1;
    }
    if (procs_redis_cmd_port(r->port, r->password, REDIS_CMD_MS, out, outlen, argc, argv) != 0) {
        fprintf(stderr, "redis_cmd: %s on %s: no reply\n", argv[0], r->addr);
        return -1;
    }
    return 0;
}

/* ---- processes ----------------------------------------------------------- */

static const char *redis_bin(void)
{
    const char *b = getenv("DLOCK_REDIS_SERVER");
    return (b && b[0]) ? b : "redis-server";
}

/* ---- the wall-clock step shim -------------------------------------------- */

static int clockshift_lib(char *out, size_t len)
{
    const char *lib = getenv("DLOCK_CLOCKSHIFT_LIB");
    const char *bin = getenv("DLOCK_BINARY_DIR");
    int n;

    if (lib != NULL && lib[0] != '\0')
        n = snprintf(out, len, "%s", lib);
    else if (bin != NULL && bin[0] != '\0')
        n = snprintf(out, len, "%s/tests/lib/libclockshift.so", bin);
    else
        return -1;
    return (n < 0 || (size_t)n >= len || access(out, R_OK) != 0) ? -1 : 0;
}

int redis_clock_step(redis_proc *r, long long offset_ms)
{
    char path[300], tmp[310], text[32];
    int fd, n, ok;

    if (!r || !r->clock_shift || !r->dir[0]) {
        fprintf(stderr, "redis_clock_step: node not started with clock_shift\n");
        return -1;
    }
    snprintf(path, sizeof path, "%s/clock_offset_ms", r->dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    n = snprintf(text, sizeof text, "%lld\n", offset_ms);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "redis_clock_step: %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    ok = write(fd, text, (size_t)n) == n;
    ok = close(fd) == 0 && ok;
    /* rename: the shim reads either the old offset or the new one, never
     * a half-written file. */
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "redis_clock_step: %s: %s\n", path, strerror(errno));
        return -1;
    }
    test_sleep_ms(20);
    return 0;
}

static pid_t redis_spawn(const redis_proc *r)
{
    char port[16], logfile[300], master_port[16];
    char preload[400], offset_env[340];
    const char *argv[40];
    int n = 0;

    snprintf(port, sizeof port, "%d", r->port);
    snprintf(logfile, sizeof logfile, "%s/redis.log", r->dir);
    if (r->clock_shift) {
        char lib[300];

        if (clockshift_lib(lib, sizeof lib) != 0) {
            fprintf(stderr, "redis_start: no clock shim (set DLOCK_CLOCKSHIFT_LIB or "
                            "DLOCK_BINARY_DIR, and build target clockshift)\n");
            return -1;
        }
        /* env(1) sets the preload for the server alone and execs it, so
         * the pid stays the server's. */
        snprintf(preload, sizeof preload, "LD_PRELOAD=%s", lib);
        snprintf(offset_env, sizeof offset_env, "DLOCK_CLOCKSHIFT_FILE=%s/clock_offset_ms", r->dir);
        argv[n++] = "env";
        argv[n++] = preload;
        argv[n++] = offset_env;
    }
    argv[n++] = redis_bin();
    argv[n++] = "--port";
    argv[n++] = port;
    argv[n++] = "--bind";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--save";
    argv[n++] = "";
    argv[n++] = "--dir";
    argv[n++] = r->dir;
    argv[n++] = "--daemonize";
    argv[n++] = "no";
    argv[n++] = "--logfile";
    argv[n++] = logfile;
    /* A replica syncs at once: the default waits 5 s for more replicas
     * to share the diskless transfer. */
    argv[n++] = "--repl-diskless-sync-delay";
    argv[n++] = "0";
    argv[n++] = "--appendonly";
    if (r->persistent) {
        argv[n++] = "yes";
        /* always: an acknowledged write (the fence INCR) survives kill -9. */
        argv[n++] = "--appendfsync";
        argv[n++] = "always";
    } else {
        argv[n++] = "no";
    }
    if (r->password[0]) {
        argv[n++] = "--requirepass";
        argv[n++] = r->password;
    }
    if (r->cluster) {
        argv[n++] = "--cluster-enabled";
        argv[n++] = "yes";
    }
    if (r->replicaof_port > 0) {
        snprintf(master_port, sizeof master_port, "%d", r->replicaof_port);
        argv[n++] = "--replicaof";
        argv[n++] = "127.0.0.1";
        argv[n++] = master_port;
    }
    argv[n] = NULL;
    return procs_spawn_quiet(argv, "redis_start");
}

/* 1 ready, 0 child died (port taken?), -1 timeout. */
static int redis_wait_ready(redis_proc *r)
{
    int64_t deadline = test_now_ms() + REDIS_READY_MS;
    const char *ping[1] = {"PING"};
    char reply[128];
    int st;

    while (test_now_ms() < deadline) {
        pid_t w = waitpid(r->pid, &st, WNOHANG);
        if (w == r->pid) {
            procs_untrack(r->pid);
            r->pid = 0;
            return 0;
        }
        /* PONG only: LOADING (AOF replay after restart) is not ready yet. */
        if (procs_redis_cmd_port(r->port, r->password, 200, reply, sizeof reply, 1, ping) == 0 &&
            strcmp(reply, "PONG") == 0)
            return 1;
        test_sleep_ms(10);
    }
    return -1;
}

static int redis_launch(redis_proc *r, int pick_ports)
{
    int tries = pick_ports ? REDIS_PORT_TRIES : 3;
    for (int i = 0; i < tries; i++) {
        if (pick_ports) {
            r->port = free_loopback_port();
            if (r->port < 0)
                return -1;
        }
        snprintf(r->addr, sizeof r->addr, "127.0.0.1:%d", r->port);
        r->paused = 0;
        r->pid = redis_spawn(r);
        if (r->pid < 0) {
            r->pid = 0;
            return -1;
        }
        int ready = redis_wait_ready(r);
        if (ready == 1)
            return 0;
        if (ready < 0) {
            procs_stop_pid(r->pid, SIGKILL, REDIS_STOP_MS, NULL);
            r->pid = 0;
            fprintf(stderr, "redis_start: %s did not answer PING within %d ms (log %s/redis.log)\n",
                    r->addr, REDIS_READY_MS, r->dir);
            return -1;
        }
        /* The child exited: most likely another process took the port
         * between free_loopback_port and bind. A restart on a fixed port
         * only waits a little for it to free up. */
        if (!pick_ports)
            test_sleep_ms(100);
    }
    fprintf(stderr, "redis_start: redis-server on %s exited at start %d times (log %s/redis.log)\n",
            r->addr, tries, r->dir);
    return -1;
}

/* Removes dlock-redis-<pid>-* dirs under base whose owner process is gone:
 * its servers died with it (PR_SET_PDEATHSIG), so nobody uses them. */
static void sweep_dead_owners(const char *base)
{
    DIR *d = opendir(base);
    struct dirent *e;
    char path[512];
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        int pid = 0;
        if (sscanf(e->d_name, "dlock-redis-%d-", &pid) != 1 || pid <= 0)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        snprintf(path, sizeof path, "%s/%s", base, e->d_name);
        test_rmtree(path);
    }
    closedir(d);
}

int redis_start(redis_proc *r)
{
    if (!r) {
        fprintf(stderr, "redis_start: NULL\n");
        return -1;
    }
    if (r->pid > 0) {
        fprintf(stderr, "redis_start: %s already running (pid %d)\n", r->addr, (int)r->pid);
        return -1;
    }
    if (!r->dir[0]) {
        /* $TMPDIR lets a suite put fsync-always AOF files on tmpfs: kill -9
         * of the server still loses nothing, and 10 000 fsyncs stay fast. */
        sweep_dead_owners(test_tmp_base());
        /* The owner's PID in the name lets a later run sweep the dir if this
         * process dies without redis_stop (Criterion timeout: SIGKILL). */
        if (test_mkdtemp(r->dir, sizeof r->dir, "dlock-redis-%d-", (int)getpid()) != 0)
            return -1;
    }
    if (r->clock_shift && redis_clock_step(r, 0) != 0)
        return -1;
    return redis_launch(r, 1);
}

int redis_stop(redis_proc *r)
{
    int result = 0;
    if (!r)
        return 0;
    if (r->pid > 0 && procs_stop_pid(r->pid, SIGTERM, REDIS_STOP_MS, NULL) != 0) {
        fprintf(stderr, "redis_stop: %s (pid %d) could not be reaped\n", r->addr, (int)r->pid);
        result = -1;
    }
    r->pid = 0;
    r->paused = 0;
    if (r->dir[0]) {
        if (test_rmtree(r->dir) != 0)
            result = -1;
        r->dir[0] = '\0';
    }
    return result;
}

int redis_kill(redis_proc *r)
{
    if (!r || r->pid <= 0) {
        fprintf(stderr, "redis_kill: not running\n");
        return -1;
    }
    if (procs_stop_pid(r->pid, SIGKILL, REDIS_STOP_MS, NULL) != 0) {
        fprintf(stderr, "redis_kill: %s (pid %d) could not be reaped\n", r->addr, (int)r->pid);
        return -1;
    }
    r->pid = 0;
    r->paused = 0;
    return 0;
}

int redis_restart(redis_proc *r)
{
    if (!r || r->port <= 0 || !r->dir[0]) {
        fprintf(stderr, "redis_restart: never started\n");
        return -1;
    }
    if (r->pid > 0 && redis_kill(r) != 0)
        return -1;
    return redis_launch(r, 0);
}

/* A stop or continue that was already reaped is not reported twice, so the
 * wait for it is bounded (procs_wait_state): an unbounded waitpid could hang
 * the suite. */
int redis_pause(redis_proc *r)
{
    if (procs_signal_wait(r ? &r->pid : NULL, SIGSTOP, WUNTRACED, "redis_pause", r ? r->addr : "") != 0)
        return -1;
    r->paused = 1;
    return 0;
}

int redis_resume(redis_proc *r)
{
    if (procs_signal_wait(r ? &r->pid : NULL, SIGCONT, WCONTINUED, "redis_resume", r ? r->addr : "") != 0)
        return -1;
    r->paused = 0;
    return 0;
}

int redis_start_n(redis_proc *rs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (redis_start(&rs[i]) != 0) {
            redis_stop_n(rs, i);
            return -1;
        }
    }
    return 0;
}

void redis_stop_n(redis_proc *rs, size_t n)
{
    for (size_t i = 0; rs && i < n; i++)
        redis_stop(&rs[i]);
}

void redis_addrs_csv(const redis_proc *rs, size_t n, char *out, size_t outlen)
{
    size_t len = 0;
    if (outlen == 0)
        return;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(out + len, outlen - len, "%s%s", i ? "," : "", rs[i].addr);
        if (w < 0 || (size_t)w >= outlen - len)
            return;
        len += (size_t)w;
    }
}
