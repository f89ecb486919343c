/* log.c - the operator's log on stderr (levels, UTC timestamps, a per-class
 * rate limit with a count of what it held back) and the access log. */
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const LEVEL_NAMES[] = {"error", "warn", "info", "debug"};

static const char *const EVENT_NAMES[LOG_EV__COUNT] = {
#define LOG_EVENT_NAME(row, name) [LOG_EV_##row] = name,
    LOG_EVENTS(LOG_EVENT_NAME)
#undef LOG_EVENT_NAME
};

/* Written once before any thread exists (log_set_level), read by all. */
static atomic_int g_level = LOG_INFO;

/* The rate limit of one class: the second of its last line and how many
 * lines were dropped since. A mutex per class: logging is rare next to
 * requests, and the class's state must change as one. */
typedef struct limiter {
    pthread_mutex_t mu;
    time_t last_sec;    /* CLOCK_MONOTONIC second of the last line written */
    uint64_t suppressed; /* lines dropped since that one */
    int used;           /* a line was ever written */
} limiter;

static limiter limiters[LOG_EV__COUNT] = {
#define LOG_EVENT_LIMITER(row, name) [LOG_EV_##row] = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0},
    LOG_EVENTS(LOG_EVENT_LIMITER)
#undef LOG_EVENT_LIMITER
};

static int access_fd = -1;
static int access_owned; /* access_fd is a file we opened (not stdout) */

int log_level_parse(const char *name, log_level *out)
{
    for (int i = 0; name != NULL && i <= LOG_DEBUG; i++) {
        if (strcmp(name, LEVEL_NAMES[i]) == 0) {
            *out = (log_level)i;
            return 0;
        }
    }
    return -1;
}

const char *log_level_name(log_level l)
{
    return (unsigned)l <= LOG_DEBUG ? LEVEL_NAMES[l] : "?";
}

void log_set_level(log_level level)
{
    atomic_store(&g_level, (int)level);
}

int log_enabled(log_level level)
{
    return (int)level <= atomic_load_explicit(&g_level, memory_order_relaxed);
}

/* "2026-11-23T10:14:03.123Z": UTC, so lines of servers in different zones sort together. */
static size_t timestamp(char *out, size_t len)
{
    struct timespec ts;
    struct tm tm;

    if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || gmtime_r(&ts.tv_sec, &tm) == NULL)
        return (size_t)snprintf(out, len, "0000-00-00T00:00:00.000Z");
    size_t n = strftime(out, len, "%Y-%m-%dT%H:%M:%S", &tm);
    int m = snprintf(out + n, len - n, ".%03ldZ", ts.tv_nsec / 1000000L);
    return n + (m > 0 ? (size_t)m : 0);
}

/* The whole line in one write: stderr is unbuffered, and several fprintf
 * calls from threads would interleave mid-line. */
static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere left to report a broken log */
        buf += w;
        len -= (size_t)w;
    }
}

/* 1 when this class may write a line now; *dropped gets how many were held
 * back since its last line (and is reset). */
static int admit(log_event ev, uint64_t *dropped)
{
    limiter *l = &limiters[ev];
    struct timespec now;
    int ok;

    /* Monotonic: a wall-clock step must neither open nor shut the gate. */
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&l->mu);
    ok = !l->used || now.tv_sec != l->last_sec;
    if (ok) {
        *dropped = l->suppressed;
        l->suppressed = 0;
        l->last_sec = now.tv_sec;
        l->used = 1;
    } else {
        l->suppressed++;
    }
    pthread_mutex_unlock(&l->mu);
    return ok;
}

void log_event_vline(log_level level, log_event ev, const char *fmt, va_list ap)
{
    char line[1024];
    uint64_t dropped = 0;
    size_t n;
    int m;

    if (!log_enabled(level) || (unsigned)ev >= LOG_EV__COUNT || !admit(ev, &dropped))
        return;
    n = timestamp(line, sizeof line);
    m = snprintf(line + n, sizeof line - n, " %s %s ", log_level_name(level), EVENT_NAMES[ev]);
    n += m > 0 ? (size_t)m : 0;
    m = vsnprintf(line + n, sizeof line - n, fmt, ap);
    /* Truncated messages keep their line shape: room is kept for the tail. */
    n = m < 0 ? n : (n + (size_t)m < sizeof line - 48 ? n + (size_t)m : sizeof line - 48);
    /* Newlines inside a message (libmicrohttpd's end in one) would split the line. */
    for (size_t i = 0; i < n; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    while (n > 0 && line[n - 1] == ' ')
        n--;
    if (dropped > 0) {
        m = snprintf(line + n, sizeof line - n, " [%llu similar suppressed]", (unsigned long long)dropped);
        n += m > 0 ? (size_t)m : 0;
    }
    line[n++] = '\n';
    write_all(STDERR_FILENO, line, n);
}

void log_event_line(log_level level, log_event ev, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_event_vline(level, ev, fmt, ap);
    va_end(ap);
}

int access_log_open(const char *path, char *errbuf, size_t errlen)
{
    if (path == NULL)
        return 0;
    if (strcmp(path, "-") == 0) {
        access_fd = STDOUT_FILENO;
        access_owned = 0;
        return 0;
    }
    /* O_APPEND: each line is one write at the end, so several servers (or
     * logrotate's copytruncate) sharing the file never overwrite a line. */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(errbuf, errlen, "--access-log: cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    access_fd = fd;
    access_owned = 1;
    return 0;
}

/* A request's field (method, path) for the access log. A byte that is not
 * visible ASCII, or is a space, a quote, a backslash or '%' itself, is
 * written %XX. So one request is one line of space-separated fields
 * whatever it carries (a decoded %20 or %0A cannot forge a field or a
 * line), and the escaping reads back unambiguously. Cut at max_in bytes. */
static void escape_field(const char *in, size_t max_in, char *out, size_t cap)
{
    static const char HEX[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; in[i] != '\0' && i < max_in && o + 4 <= cap; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '%') {
            out[o++] = '%';
            out[o++] = HEX[c >> 4];
            out[o++] = HEX[c & 15];
        } else {
            out[o++] = (char)c;
        }
    }
    if (o == 0 && cap >= 2)
        out[o++] = '-'; /* an empty field would shift the others */
    out[o] = '\0';
}

void access_log_line(const char *method, const char *path, unsigned status, int code, int64_t duration_us)
{
    char line[6600], ts[40], m[100], p[6100];

    if (access_fd < 0)
        return;
    timestamp(ts, sizeof ts);
    escape_field(method, 32, m, sizeof m);
    escape_field(path, 2000, p, sizeof p);
    int n = snprintf(line, sizeof line, "%s %s %s %u %d %lld.%06lld\n", ts, m, p, status, code,
                     (long long)(duration_us / 1000000), (long long)(duration_us % 1000000));
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    line[len - 1] = '\n';
    ssize_t w;
    do
        w = write(access_fd, line, len);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)len)
        log_event_line(LOG_ERROR, LOG_EV_ACCESS_LOG, "access log write failed: %s",
                       w < 0 ? strerror(errno) : "short write");
}

void access_log_close(void)
{
    if (access_owned && access_fd >= 0)
        close(access_fd);
    access_fd = -1;
    access_owned = 0;
}
