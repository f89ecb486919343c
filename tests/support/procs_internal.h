/* procs_internal.h - helpers shared by the test-support sources (not for suites). */
#ifndef TESTS_PROCS_INTERNAL_H
#define TESTS_PROCS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* In a freshly forked child: close every fd >= 3 so that pipes the test
 * holds (history pipes, other servers' stdout) never leak into the exec'd
 * program and keep a reader from ever seeing EOF. */
void procs_close_extra_fds(void);

/* In a freshly forked child: ask the kernel to SIGKILL us when the forking
 * thread dies, so a test killed by Criterion's timeout leaves no servers. */
void procs_die_with_parent(pid_t parent);

/* Forks and execs argv (argv[0] looked up in PATH) with stdin, stdout and
 * stderr on /dev/null, no inherited fds, in its own process group (a
 * Ctrl-C aimed at the suite reaches the suite, which stops its servers in
 * order), killed with the forking thread; tracked. what names the caller
 * in the fork error. The child's pid, or -1. */
pid_t procs_spawn_quiet(const char *const *argv, const char *what);

/* waitpid(pid) for at most timeout_ms; returns 1 and *status when reaped,
 * 0 on timeout, -1 on error. Restarts on EINTR. */
int procs_wait_bounded(pid_t pid, int64_t timeout_ms, int *status);

/* Stop a child by PID: sig, bounded wait, then SIGKILL and a final reap.
 * *status gets the raw wait status (may be NULL). Returns 0 once reaped. */
int procs_stop_pid(pid_t pid, int sig, int64_t timeout_ms, int *status);

/* Registry of live children: an atexit handler kills whatever a suite
 * forgot (only in the process that started them, never in forked workers). */
void procs_track(pid_t pid);
void procs_untrack(pid_t pid);

/* Exit code, or 128+signal, from a raw wait status. */
int procs_exit_code(int status);
/* Wait (bounded) until the child pid reports the state change flag asks for
 * (WUNTRACED: stopped, WCONTINUED: running again). 0 done; -2 it exited
 * instead (reaped and untracked; the caller forgets the pid); -1 otherwise.
 * what and name are for the message on stderr. */
int procs_wait_state(pid_t pid, int flag, const char *what, const char *name);

/* Sends sig (SIGSTOP / SIGCONT) to *pid and waits for the state change
 * flag asks for (procs_wait_state); when the child exited instead, *pid
 * becomes 0. 0 done, -1 otherwise (also when *pid is not running). */
int procs_signal_wait(pid_t *pid, int sig, int flag, const char *what, const char *name);

/* One command on 127.0.0.1:port (AUTH first when password is not NULL or
 * ""), bounded by timeout_ms; the reply as text in out (see redis_cmd).
 * 0, or -1 without a word on stderr: for readiness polls. */
int procs_redis_cmd_port(int port, const char *password, int64_t timeout_ms, char *out,
                         size_t outlen, int argc, const char *const *argv);

#endif /* TESTS_PROCS_INTERNAL_H */
