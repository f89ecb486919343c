/* log.h - the operator's log: one line per event on stderr, with a UTC
 * timestamp and a level, rate-limited per event class; and the optional
 * access log (one line per answered request).
 *
 * Line format (stderr):
 *   2026-11-23T10:14:03.123Z warn node-down redis node 127.0.0.1:6380 stopped answering (2 of 3 up)
 * After a class was rate-limited, its next line ends with
 *   " [N similar suppressed]".
 *
 * Never pass a secret (admin token, Redis password) to these calls. */
#ifndef APP_LOG_H
#define APP_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef enum log_level {
    LOG_ERROR = 0,
    LOG_WARN = 1,
    LOG_INFO = 2,
    LOG_DEBUG = 3
} log_level;

/* Every class of event an operator acts on. Each class is rate-limited on
 * its own: at most one line per class per second, so a flood of one kind
 * (a DB error on every claim) cannot hide the others. */
#define LOG_EVENTS(X)                                                               \
    X(START, "start")                 /* the server is up, with its options */      \
    X(STOP, "stop")                   /* a signal asked it to stop */                \
    X(STOPPED, "stopped")             /* it stopped: requests drained, DB closed */  \
    X(NODE_DOWN, "node-down")         /* a Redis node stopped answering */           \
    X(NODE_UP, "node-up")             /* a Redis node answers again */              \
    X(QUORUM_LOST, "quorum-lost")     /* fewer nodes than the quorum answer */       \
    X(QUORUM_BACK, "quorum-back")     /* the quorum answers again */                \
    X(FENCE_REFUSED, "fence-refused") /* the store refused a holder's fence (1010) */ \
    X(FENCE_HEALED, "fence-healed")   /* fence counters raised after Redis lost them */ \
    X(DB_ERROR, "db-error")           /* a store failure (busy past timeout, I/O) */ \
    X(LOCK_ERROR, "lock-error")       /* a lock call failed other than by contention */ \
    X(FAULT, "fault")                 /* an injected fault fired (--fault-pause-ms) */ \
    X(HTTPD, "httpd")                 /* libmicrohttpd's own messages */            \
    X(CONN_REFUSED, "conn-refused")   /* a connection refused: a limit, no descriptor */ \
    X(CONN_CUT, "conn-cut")           /* connections past a deadline, closed */      \
    X(ACCESS_LOG, "access-log")       /* the access log could not be written */

typedef enum log_event {
#define LOG_EVENT_ENUM(row, name) LOG_EV_##row,
    LOG_EVENTS(LOG_EVENT_ENUM)
#undef LOG_EVENT_ENUM
    LOG_EV__COUNT
} log_event;

/* "error", "warn", "info", "debug"; 0 and *out set, or -1. */
int log_level_parse(const char *name, log_level *out);
const char *log_level_name(log_level l);

/* Lines above `level` are dropped. Call once, before any thread logs. */
void log_set_level(log_level level);
int log_enabled(log_level level);

/* One event line (no trailing newline in fmt). Thread-safe; the line goes
 * out in one write(2), so lines of different threads never interleave. */
void log_event_line(log_level level, log_event ev, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void log_event_vline(log_level level, log_event ev, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* The access log: path "-" is stdout, else a file opened for appending.
 * 0, or -1 with errbuf set. NULL path: no access log. */
int access_log_open(const char *path, char *errbuf, size_t errlen);
/* One line: time method path status code duration (seconds, 6 digits).
 * code is the envelope's code, -1 when the reply had none. The method and
 * the path are escaped: a space, '"', '\\', '%', a control or a non-ASCII
 * byte is written %XX, so a field never splits and a request never forges
 * a field or a line. No-op when closed. */
void access_log_line(const char *method, const char *path, unsigned status, int code, int64_t duration_us);
void access_log_close(void);

#endif /* APP_LOG_H */
