/* lock_common.h - helpers shared by the libdlock suites: clients on test
 * nodes, key inspection through redis_cmd, the on_lost recorder, and
 * bookkeeping for forked worker processes. */
#ifndef TESTS_LOCK_COMMON_H
#define TESTS_LOCK_COMMON_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "dlock.h"
#include "procs.h"

/* .init / .fini of the suites on nodes: zero rs[0..n), set persistent
 * (appendonly + fsync always) and start them (0, or -1 when one did not
 * start); resume any paused node, then stop all. */
int tc_nodes_up(redis_proc *rs, size_t n, int persistent);
void tc_nodes_down(redis_proc *rs, size_t n);
/* One plain node and a client on it for each of cs[0..n) (*cs[i] =
 * tc_client(node, 1, 0)): 0, or -1 when the node or a client did not
 * start. _down frees the clients (setting them NULL) and stops the node. */
int tc_node_clients_up(redis_proc *node, dlock_client **const *cs, size_t n);
void tc_node_clients_down(redis_proc *node, dlock_client **const *cs, size_t n);

/* For Criterion suites: defines their .init and .fini, tc_suite_init and
 * tc_suite_fini, for TestSuite(name, .init = tc_suite_init, .fini =
 * tc_suite_fini). TC_NODES_FIXTURE: n plain nodes rs[0..n) (tc_nodes_up /
 * tc_nodes_down). TC_NODE_CLIENTS_FIXTURE: one plain node and a client
 * for each dlock_client ** that follows (tc_node_clients_up / _down). */
#define TC_NODES_FIXTURE(rs, n)                                                                    \
    static void tc_suite_init(void)                                                                \
    {                                                                                              \
        cr_assert_eq(tc_nodes_up(rs, n, 0), 0, "redis nodes did not start");                       \
    }                                                                                              \
    static void tc_suite_fini(void)                                                                \
    {                                                                                              \
        tc_nodes_down(rs, n);                                                                      \
    }
#define TC_NODE_CLIENTS_FIXTURE(node, ...)                                                         \
    static void tc_suite_init(void)                                                                \
    {                                                                                              \
        dlock_client **const cs[] = {__VA_ARGS__};                                                 \
        cr_assert_eq(tc_node_clients_up(&(node), cs, sizeof cs / sizeof cs[0]), 0,                 \
                     "redis node or client did not start");                                        \
    }                                                                                              \
    static void tc_suite_fini(void)                                                                \
    {                                                                                              \
        dlock_client **const cs[] = {__VA_ARGS__};                                                 \
        tc_node_clients_down(&(node), cs, sizeof cs / sizeof cs[0]);                               \
    }

/* Suites whose nodes write an AOF with fsync always: point TMPDIR (where
 * tests/support makes the nodes' dirs) at tmpfs when there is one. The data
 * still survives kill -9 of the server (what the tests need), and 10 000
 * fsyncs stay fast. */
void tc_tmpdir_on_tmpfs(void);

/* Fills opts for nodes rs[0..n) with the library defaults otherwise; the
 * address strings live in *hold, which must outlive dlock_client_new. */
typedef struct tc_addrs {
    const char *p[DLOCK_MAX_NODES];
    char via[32]; /* tc_options_via's relay address */
} tc_addrs;
void tc_options(dlock_options *opts, tc_addrs *hold, const redis_proc *rs, size_t n);
/* The same, with node `via` reached at 127.0.0.1:port instead (a relay in
 * front of it, e.g. a delay_proxy). */
void tc_options_via(dlock_options *opts, tc_addrs *hold, const redis_proc *rs, size_t n,
                    size_t via, int port);

/* New client on rs[0..n) with the given command timeout (0 = default);
 * NULL on failure (usable in forked children: no Criterion asserts). */
dlock_client *tc_client(const redis_proc *rs, size_t n, int command_timeout_ms);
/* Same with retry_unavailable on: for code about exclusion, not
 * availability, where a slow round on a loaded machine is retried until
 * the deadline instead of failing. */
dlock_client *tc_patient_client(const redis_proc *rs, size_t n, int command_timeout_ms);

/* The client's last error detail for an assertion message: copied by
 * dlock_client_errstr into a buffer that lives to the end of the enclosing
 * block. */
#define TC_ERR(c) dlock_client_errstr((c), (char[DLOCK_ERRSTR_LEN]){0}, DLOCK_ERRSTR_LEN)

/* Reply of one command as text (see redis_cmd); "" after a transport error. */
void tc_cmd(const redis_proc *r, char *out, size_t outlen, int argc, const char *const *argv);
/* The keys of resource res for a client without a key prefix (dlock.h,
 * "Keys"): "lock:<res>" and "fence:<res>", into out[TC_KEY_LEN]. */
#define TC_KEY_LEN (DLOCK_MAX_KEY_LEN + 16)
const char *tc_lock_key(char *out, const char *res);
const char *tc_fence_key(char *out, const char *res);

/* The helpers below that take `res` look at the LOCK key of that resource
 * (tc_lock_key); tc_get and tc_cmd take raw keys. */
/* EXISTS on the lock key of res: 1, 0, or -1 when the node did not answer. */
int tc_exists(const redis_proc *r, const char *res);
/* PTTL of the lock key of res (-2 missing, -1 no TTL), or -3 when the node
 * did not answer. */
long long tc_pttl(const redis_proc *r, const char *res);
/* GET key into out ("(nil)" when missing). */
void tc_get(const redis_proc *r, const char *key, char *out, size_t outlen);
/* GET key as a number (0 when missing or not answered). */
long long tc_get_ll(const redis_proc *r, const char *key);
/* Waiters' own lists (<prefix>waiter:*) on r; -1 when r did not answer. */
long long tc_waiter_lists(const redis_proc *r);
/* How many of rs[0..n) hold the lock of res (nodes that do not answer
 * count as 0). */
int tc_count_holding(const redis_proc *rs, size_t n, const char *res);

/* The library ends a round as soon as the outcome is decided, so the last
 * nodes may apply a command a moment after the call returns: these poll
 * (bounded) until the expected value shows, and return the last value seen. */
int tc_wait_holding(const redis_proc *rs, size_t n, const char *res, int expect,
                    int64_t timeout_ms);
int tc_wait_exists(const redis_proc *r, const char *res, int expect, int64_t timeout_ms);
/* The node's blocked clients (INFO clients: a waiter in its BLPOP) until
 * expect show; the last count seen, -1 when the node did not answer. A
 * waiter listed on a node is not yet blocked there: the answer to its
 * listing may still be on its way, and a pause then would stall that. */
long long tc_wait_blocked(const redis_proc *r, long long expect, int64_t timeout_ms);
#define TC_SETTLE_MS 300

/* The wake queue: how many waiters are listed on res on node r (ZCARD of
 * its waiters set; -1 when the node did not answer). And a bounded wait
 * (timeout_ms) until each of rs[0..n) lists `want`: the index of the first
 * node that did not, or -1 when all did; *seen gets that node's count. */
long long tc_listed_on(const redis_proc *r, const char *res);
int tc_wait_listed(const redis_proc *rs, size_t n, const char *res, long long want,
                   int64_t timeout_ms, long long *seen);

/* A loopback socket that listens and never accepts: handshakes complete
 * into its backlog and nothing ever answers (a paused or
 * tarpitted node; a backlog of 2); fill: connect that many sockets first (kept in held[],
 * closed by the caller), after which a connect hangs. The listening fd, or
 * -1; *port gets its port. */
int tc_tarpit(int *port, int fill, int *held);

/* Records on_lost calls; thread-safe (the watchdog calls it). */
typedef struct tc_lost {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    dlock_err why;
} tc_lost;
void tc_lost_init(tc_lost *l);
void tc_lost_destroy(tc_lost *l);
void tc_on_lost(const dlock_lock *lock, dlock_err why, void *user);
/* Waits until on_lost was called at least once or timeout; returns calls. */
int tc_lost_wait(tc_lost *l, int64_t timeout_ms, dlock_err *why);

/* Forked workers: remembered so that a failing test's .fini kills them. */
pid_t tc_fork(void);
/* Waits (bounded) for a forked worker; its exit code, or -1 (then killed). */
int tc_wait_child(pid_t pid, int64_t timeout_ms);
/* Kills and reaps every worker still running (call from .fini). */
void tc_kill_children(void);

/* Writes / reads exactly n bytes (EINTR-safe); 0 on success. */
int tc_write_all(int fd, const void *buf, size_t n);
int tc_read_all(int fd, void *buf, size_t n, int64_t timeout_ms);

/* Nanoseconds on the clock dlock_now_ms() reads (BOOTTIME, else
 * MONOTONIC): one clock for every thread and process of a history, so
 * sections compare directly, and fine enough that two sections never share
 * a stamp (whole ms would make a checker see false overlaps). */
int64_t tc_now_ns(void);

/* A history of critical sections over several resources, recorded by many
 * threads and checked at the end (each.c, multi_history.c). */
typedef struct tc_section {
    int64_t start_ns, end_ns, valid_until_ns;
    uint64_t fence;
    int res, thread;
} tc_section;

typedef struct tc_sections {
    pthread_mutex_t mu;
    tc_section *recs;
    size_t n, cap;
} tc_sections;

/* 0, or -1 when there is no memory for cap sections. */
int tc_sections_init(tc_sections *s, size_t cap);
/* Appends x[0..k) under the mutex; past cap, the rest is dropped. */
void tc_sections_add(tc_sections *s, const tc_section *x, size_t k);
void tc_sections_free(tc_sections *s);
/* Per resource, sections ordered by start (then fence) never overlap,
 * fences rise in that order, each ends within its validity, and each of
 * resources 0..nres) has more than min_each sections. 0 when all hold,
 * else -1 with the first failure in why, naming resource r as
 * "<prefix><r>". Sorts s. */
int tc_sections_check(tc_sections *s, const char *prefix, int nres, size_t min_each, char *why,
                      size_t whylen);

/* k distinct indices of 0..nres) in a random order into idx (a partial
 * Fisher-Yates shuffle; k <= nres <= TC_MAX_RES). */
#define TC_MAX_RES 16
void tc_pick_subset(unsigned *seed, int nres, size_t k, int *idx);

/* What one history thread's calls ended in. TAKEN is contention; an
 * unavailable code a round the loaded machine could not finish in time
 * (counted: these suites are about exclusion); anything else (ARG,
 * EXPIRED, NOMEM) is a bug. */
typedef struct tc_tally {
    int acquired, failed, slow;
    dlock_err last_err;
} tc_tally;
void tc_tally_result(tc_tally *t, dlock_err rc);
/* 0 when none of t[0..n) failed and each acquired, else -1 with the first
 * thread that did not in why; *slow gets the sum of slow. */
int tc_tally_check(const tc_tally *t, int n, int *slow, char *why, size_t whylen);

/* A history thread's argument: the run it shares, its index. */
typedef struct tc_worker {
    void *run;
    int id;
} tc_worker;
/* Runs fn in n (<= TC_MAX_WORKERS) threads, each with its tc_worker, and
 * joins them all: 0, or -1 when a thread could not start (those that did
 * are joined). */
#define TC_MAX_WORKERS 16
int tc_run_workers(int n, void *(*fn)(void *), void *run);

#endif /* TESTS_LOCK_COMMON_H */
