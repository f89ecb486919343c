/* procs_base.h - test support that needs nothing but threads (the
 * testsupport_base library, which libdlock's suites link when libdlock is
 * built alone):
 *   - free loopback ports, the clock, temp dirs;
 *   - real redis-server and Redis Sentinel processes started, paused
 *     (SIGSTOP), resumed, killed, restarted and stopped by PID;
 *   - running a command.
 * procs.h adds coupon-server, postgres and an HTTP client.
 *
 * Every function returns 0 on success and -1 on failure after printing one
 * line saying why to stderr. Every process started here is stopped by its
 * PID (SIGTERM, bounded waitpid, then SIGKILL); nothing is left running. */
#ifndef TESTS_PROCS_BASE_H
#define TESTS_PROCS_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A free TCP port on 127.0.0.1 (bind to port 0, read it back, close), or -1. */
int free_loopback_port(void);

/* Milliseconds on CLOCK_MONOTONIC. */
int64_t test_now_ms(void);
/* Sleep ms milliseconds (restarts on EINTR). */
void test_sleep_ms(int64_t ms);

/* Temp dirs: $TMPDIR, or /tmp when it is unset or empty. */
const char *test_tmp_base(void);
/* mkdtemp of "<test_tmp_base()>/<prefix>XXXXXX" (prefix printf-formatted,
 * ending in its separator) into dir[len]: 0, or -1 with dir "". */
int test_mkdtemp(char *dir, size_t len, const char *prefix_fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Removes dir and everything below it, depth first, links not followed;
 * best effort (what cannot go is named on stderr, the rest still goes).
 * -1 only when dir could not be walked; NULL, "" and a missing dir are 0. */
int test_rmtree(const char *dir);

typedef struct redis_proc {
    pid_t pid;          /* 0 when not running */
    int port;           /* fixed at first start; restart reuses it */
    int persistent;     /* nonzero: appendonly yes + appendfsync always (survives kill -9) */
    int paused;         /* nonzero between redis_pause and redis_resume */
    char dir[256];      /* own temp dir (mkdtemp), removed by redis_stop */
    char password[64];  /* requirepass when not empty */
    int replicaof_port; /* nonzero: start as a replica of 127.0.0.1:<port> (--replicaof) */
    int clock_shift;    /* nonzero: preload the wall-clock step shim (redis_clock_step) */
    int cluster;        /* nonzero: --cluster-enabled yes (a Redis Cluster node, no slots) */
    char addr[64];      /* "127.0.0.1:<port>" */
} redis_proc;

/* Start redis-server (from $DLOCK_REDIS_SERVER, else PATH) on a free loopback
 * port, in its own temp dir, no persistence unless r->persistent, password if
 * r->password[0]; waits until it answers PING (bounded, 5 s). Initialise the
 * struct to zero first and set persistent/password before the call. */
int redis_start(redis_proc *r);
/* SIGTERM, bounded wait, SIGKILL; removes the temp dir. Safe when not running. */
int redis_stop(redis_proc *r);
/* SIGKILL, reaped; keeps the dir and the port for redis_restart. */
int redis_kill(redis_proc *r);
/* Start again on the same port and dir (with its persisted data, if any). */
int redis_restart(redis_proc *r);
/* SIGSTOP and wait until the process is stopped (waitpid WUNTRACED). */
int redis_pause(redis_proc *r);
/* SIGCONT and wait until it runs again (waitpid WCONTINUED). */
int redis_resume(redis_proc *r);
/* Run one command on the node (hiredis-free: redis-cli is not assumed; a tiny
 * RESP client): sends argv, writes the reply as text into out (integer as
 * decimal, bulk/status as is, nil as "(nil)", error as "ERR ..."). */
int redis_cmd(const redis_proc *r, char *out, size_t outlen, int argc, const char *const *argv);

/* Steps the wall clock of a node started with clock_shift set: from now on
 * its TIME, key expiry and every other wall-clock reading run offset_ms
 * ahead of the real clock (negative: behind); the offset is absolute, not
 * added to the last one. The shim (tests/support/shim/clockshift.c,
 * $DLOCK_CLOCKSHIFT_LIB, else <build>/tests/lib/libclockshift.so) rereads
 * the offset at most once per ms: returns after 20 ms, when it shows. */
int redis_clock_step(redis_proc *r, long long offset_ms);

/* Start n nodes / stop them all. */
int redis_start_n(redis_proc *rs, size_t n);
void redis_stop_n(redis_proc *rs, size_t n);
/* "127.0.0.1:p1,127.0.0.1:p2,..." for --redis. */
void redis_addrs_csv(const redis_proc *rs, size_t n, char *out, size_t outlen);

/* Redis Sentinel: `redis-server <dir>/sentinel.conf --sentinel` on a free
 * loopback port, in its own temp dir (Sentinel rewrites its config file),
 * monitoring master_name at 127.0.0.1:master_port with quorum 1, the given
 * down-after-milliseconds and failover-timeout. Waits (bounded, 5 s) until
 * it answers PING. */
typedef struct sentinel_proc {
    pid_t pid;          /* 0 when not running */
    int port;
    char dir[256];      /* own temp dir, removed by sentinel_stop */
    char addr[64];      /* "127.0.0.1:<port>" */
} sentinel_proc;
int sentinel_start(sentinel_proc *s, const char *master_name, int master_port, int down_after_ms,
                   int failover_timeout_ms);
/* SIGTERM, bounded wait, SIGKILL; removes the temp dir. Safe when not running. */
int sentinel_stop(sentinel_proc *s);
/* SIGSTOP / SIGCONT and wait for the state change. */
int sentinel_pause(sentinel_proc *s);
int sentinel_resume(sentinel_proc *s);
/* One command on the sentinel, reply as text like redis_cmd. */
int sentinel_cmd(const sentinel_proc *s, char *out, size_t outlen, int argc,
                 const char *const *argv);

/* Run a command (argv[0] is a path), capture stdout+stderr into a malloc'd
 * string (*output, may be NULL), wait at most timeout_ms (then SIGKILL).
 * Returns the exit status (or 128+signal), -1 on failure to run. */
int run_command(const char *const *argv, int timeout_ms, char **output);

/* The repository's scripts/<name> and the build's bin/ directory, from
 * DLOCK_SOURCE_DIR and DLOCK_BINARY_DIR (set by ctest). 0, or -1 when a
 * variable is missing or a path does not fit. */
int test_script_paths(const char *name, char *script, size_t slen, char *bin_dir, size_t blen);

/* The first line of text that starts with prefix and contains needle (NULL:
 * any), copied into line without its newline. 0, or -1 when none does. */
int text_line(const char *text, const char *prefix, const char *needle, char *line, size_t len);

/* For scripts that announce what they start ("... pid N ...", "temp dir D"):
 * 0 when text names at least one pid and a temp dir, and every one of them
 * is gone; else -1 with why. */
int text_left_nothing(const char *text, char *why, size_t len);

#endif /* TESTS_PROCS_BASE_H */
