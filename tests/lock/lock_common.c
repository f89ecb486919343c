/* lock_common.c - helpers shared by the libdlock suites (see lock_common.h). */
#include "lock_common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int tc_nodes_up(redis_proc *rs, size_t n, int persistent)
{
    memset(rs, 0, n * sizeof *rs);
    for (size_t i = 0; i < n; i++)
        rs[i].persistent = persistent;
    return redis_start_n(rs, n);
}

void tc_nodes_down(redis_proc *rs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (rs[i].paused)
            redis_resume(&rs[i]);
    redis_stop_n(rs, n);
}

int tc_node_clients_up(redis_proc *node, dlock_client **const *cs, size_t n)
{
    if (tc_nodes_up(node, 1, 0) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if ((*cs[i] = tc_client(node, 1, 0)) == NULL)
            return -1;
    return 0;
}

void tc_node_clients_down(redis_proc *node, dlock_client **const *cs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dlock_client_free(*cs[i]);
        *cs[i] = NULL;
    }
    tc_nodes_down(node, 1);
}

void tc_tmpdir_on_tmpfs(void)
{
    if (access("/dev/shm", W_OK) == 0)
        setenv("TMPDIR", "/dev/shm", 1);
}

void tc_options(dlock_options *opts, tc_addrs *hold, const redis_proc *rs, size_t n)
{
    dlock_options_init(opts);
    for (size_t i = 0; i < n && i < DLOCK_MAX_NODES; i++)
        hold->p[i] = rs[i].addr;
    opts->addrs = hold->p;
    opts->n_addrs = n;
}

void tc_options_via(dlock_options *opts, tc_addrs *hold, const redis_proc *rs, size_t n,
                    size_t via, int port)
{
    tc_options(opts, hold, rs, n);
    snprintf(hold->via, sizeof hold->via, "127.0.0.1:%d", port);
    hold->p[via] = hold->via;
}

static dlock_client *new_client(const redis_proc *rs, size_t n, int command_timeout_ms,
                                int retry_unavailable)
{
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    char err[256] = "";
    tc_options(&o, &a, rs, n);
    if (command_timeout_ms > 0)
        o.command_timeout_ms = command_timeout_ms;
    o.retry_unavailable = retry_unavailable;
    if (dlock_client_new(&o, &c, err, sizeof err) != DLOCK_OK) {
        fprintf(stderr, "tc_client: %s\n", err);
        return NULL;
    }
    return c;
}

dlock_client *tc_client(const redis_proc *rs, size_t n, int command_timeout_ms)
{
    return new_client(rs, n, command_timeout_ms, 0);
}

dlock_client *tc_patient_client(const redis_proc *rs, size_t n, int command_timeout_ms)
{
    return new_client(rs, n, command_timeout_ms, 1);
}

void tc_cmd(const redis_proc *r, char *out, size_t outlen, int argc, const char *const *argv)
{
    if (redis_cmd(r, out, outlen, argc, argv) != 0 && outlen > 0)
        out[0] = '\0';
}

const char *tc_lock_key(char *out, const char *res)
{
    snprintf(out, TC_KEY_LEN, "%s%s", DLOCK_LOCK_NS, res);
    return out;
}

const char *tc_fence_key(char *out, const char *res)
{
    snprintf(out, TC_KEY_LEN, "%s%s", DLOCK_FENCE_NS, res);
    return out;
}

int tc_exists(const redis_proc *r, const char *res)
{
    char out[64], key[TC_KEY_LEN];
    const char *argv[] = {"EXISTS", tc_lock_key(key, res)};
    if (redis_cmd(r, out, sizeof out, 2, argv) != 0)
        return -1;
    return (int)strtol(out, NULL, 10);
}

long long tc_pttl(const redis_proc *r, const char *res)
{
    char out[64], key[TC_KEY_LEN];
    const char *argv[] = {"PTTL", tc_lock_key(key, res)};
    if (redis_cmd(r, out, sizeof out, 2, argv) != 0)
        return -3;
    return strtoll(out, NULL, 10);
}

void tc_get(const redis_proc *r, const char *key, char *out, size_t outlen)
{
    const char *argv[] = {"GET", key};
    tc_cmd(r, out, outlen, 2, argv);
}

long long tc_get_ll(const redis_proc *r, const char *key)
{
    char out[64];
    tc_get(r, key, out, sizeof out);
    return atoll(out);
}

long long tc_waiter_lists(const redis_proc *r)
{
    char out[64];
    const char *argv[] = {"EVAL", "return #redis.call('KEYS', ARGV[1])", "0", "*" DLOCK_WAITER_NS "*"};

    if (redis_cmd(r, out, sizeof out, 4, argv) != 0)
        return -1;
    return strtoll(out, NULL, 10);
}

int tc_count_holding(const redis_proc *rs, size_t n, const char *res)
{
    int k = 0;
    for (size_t i = 0; i < n; i++)
        if (rs[i].pid > 0 && !rs[i].paused && tc_exists(&rs[i], res) == 1)
            k++;
    return k;
}

int tc_wait_holding(const redis_proc *rs, size_t n, const char *res, int expect,
                    int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    int k;
    while ((k = tc_count_holding(rs, n, res)) != expect && test_now_ms() < deadline)
        test_sleep_ms(2);
    return k;
}

int tc_wait_exists(const redis_proc *r, const char *res, int expect, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    int k;
    while ((k = tc_exists(r, res)) != expect && test_now_ms() < deadline)
        test_sleep_ms(2);
    return k;
}

void tc_lost_init(tc_lost *l)
{
    pthread_condattr_t ca;
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_init(&ca);
    /* Monotonic waits: a wall-clock step must not stretch or cut a timeout. */
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    l->calls = 0;
    l->why = DLOCK_OK;
}

void tc_lost_destroy(tc_lost *l)
{
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
}

void tc_on_lost(const dlock_lock *lock, dlock_err why, void *user)
{
    tc_lost *l = user;
    (void)lock;
    pthread_mutex_lock(&l->mu);
    l->calls++;
    l->why = why;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

int tc_lost_wait(tc_lost *l, int64_t timeout_ms, dlock_err *why)
{
    struct timespec ts;
    int calls;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(timeout_ms / 1000);
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&l->mu);
    while (l->calls == 0) {
        if (pthread_cond_timedwait(&l->cv, &l->mu, &ts) == ETIMEDOUT)
            break;
    }
    calls = l->calls;
    if (why)
        *why = l->why;
    pthread_mutex_unlock(&l->mu);
    return calls;
}

#define TC_MAX_CHILDREN 64
static pid_t g_children[TC_MAX_CHILDREN];

pid_t tc_fork(void)
{
    pid_t pid;
    fflush(NULL); /* no buffered text may be written twice by the child */
    pid = fork();
    if (pid > 0) {
        for (size_t i = 0; i < TC_MAX_CHILDREN; i++) {
            if (g_children[i] == 0) {
                g_children[i] = pid;
                break;
            }
        }
    }
    return pid;
}

static void forget_child(pid_t pid)
{
    for (size_t i = 0; i < TC_MAX_CHILDREN; i++)
        if (g_children[i] == pid)
            g_children[i] = 0;
}

/* SIGKILL and reap. */
static void kill_and_reap(pid_t pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

int tc_wait_child(pid_t pid, int64_t timeout_ms)
{
    int64_t deadline = test_now_ms() + timeout_ms;
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            forget_child(pid);
            if (WIFEXITED(st))
                return WEXITSTATUS(st);
            return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        }
        if (w < 0 && errno != EINTR)
            return -1;
        if (test_now_ms() >= deadline) {
            kill_and_reap(pid);
            forget_child(pid);
            return -1;
        }
        test_sleep_ms(2);
    }
}

void tc_kill_children(void)
{
    for (size_t i = 0; i < TC_MAX_CHILDREN; i++) {
        if (g_children[i] > 0) {
            kill_and_reap(g_children[i]);
            g_children[i] = 0;
        }
    }
}

int tc_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int tc_read_all(int fd, void *buf, size_t n, int64_t timeout_ms)
{
    char *p = buf;
    int64_t deadline = test_now_ms() + timeout_ms;
    while (n > 0) {
        int64_t left = deadline - test_now_ms();
        if (left <= 0)
            return -1;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int k = poll(&pf, 1, (int)left);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

long long tc_listed_on(const redis_proc *r, const char *res)
{
    char key[TC_KEY_LEN + 16], out[64];
    const char *argv[] = {"ZCARD", key};

    snprintf(key, sizeof key, "%s%s", DLOCK_WAITERS_NS, res);
    tc_cmd(r, out, sizeof out, 2, argv);
    return out[0] != '\0' ? strtoll(out, NULL, 10) : -1;
}

int tc_wait_listed(const redis_proc *rs, size_t n, const char *res, long long want,
                   int64_t timeout_ms, long long *seen)
{
    int64_t end = test_now_ms() + timeout_ms;

    for (size_t i = 0; i < n; i++) {
        long long got = -1;

        while (test_now_ms() < end && (got = tc_listed_on(&rs[i], res)) != want)
            test_sleep_ms(5);
        *seen = got;
        if (got != want)
            return (int)i;
    }
    return -1;
}

int tc_tarpit(int *port, int fill, int *held)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 2) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    for (int i = 0; i < fill; i++) {
        held[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (held[i] >= 0)
            (void)connect(held[i], (struct sockaddr *)&a, sizeof a);
    }
    return fd;
}

int64_t tc_now_ns(void)
{
    struct timespec ts;

#ifdef CLOCK_BOOTTIME
    if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
        _exit(4);
#else
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        _exit(4);
#endif
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int tc_sections_init(tc_sections *s, size_t cap)
{
    memset(s, 0, sizeof *s);
    if ((s->recs = calloc(cap, sizeof *s->recs)) == NULL)
        return -1;
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s->recs);
        s->recs = NULL;
        return -1;
    }
    s->cap = cap;
    return 0;
}

void tc_sections_add(tc_sections *s, const tc_section *x, size_t k)
{
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < k && s->n < s->cap; i++)
        s->recs[s->n++] = x[i];
    pthread_mutex_unlock(&s->mu);
}

void tc_sections_free(tc_sections *s)
{
    if (s->recs == NULL)
        return;
    pthread_mutex_destroy(&s->mu);
    free(s->recs);
    s->recs = NULL;
}

static int by_res_start(const void *p, const void *q)
{
    const tc_section *a = p, *b = q;

    if (a->res != b->res)
        return a->res - b->res;
    if (a->start_ns != b->start_ns)
        return (a->start_ns > b->start_ns) - (a->start_ns < b->start_ns);
    return (a->fence > b->fence) - (a->fence < b->fence);
}

int tc_sections_check(tc_sections *s, const char *prefix, int nres, size_t min_each, char *why,
                      size_t whylen)
{
    size_t each[64] = {0};

    if (nres < 0 || nres > 64) {
        snprintf(why, whylen, "tc_sections_check: %d resources (at most 64)", nres);
        return -1;
    }
    qsort(s->recs, s->n, sizeof *s->recs, by_res_start);
    for (size_t i = 0; i < s->n; i++) {
        const tc_section *x = &s->recs[i], *prev = i > 0 ? &s->recs[i - 1] : NULL;

        if (x->res >= 0 && x->res < nres)
            each[x->res]++;
        if (x->end_ns >= x->valid_until_ns) {
            snprintf(why, whylen, "%s%d: section outlived its validity", prefix, x->res);
            return -1;
        }
        if (prev == NULL || prev->res != x->res)
            continue;
        if (x->start_ns <= prev->end_ns) {
            snprintf(why, whylen,
                     "%s%d: thread %d's section starts %lld ns before thread %d's ended "
                     "(fences %llu, %llu): two holders",
                     prefix, x->res, x->thread, (long long)(prev->end_ns - x->start_ns),
                     prev->thread, (unsigned long long)x->fence, (unsigned long long)prev->fence);
            return -1;
        }
        if (x->fence <= prev->fence) {
            snprintf(why, whylen, "%s%d: fence %llu after %llu", prefix, x->res,
                     (unsigned long long)x->fence, (unsigned long long)prev->fence);
            return -1;
        }
    }
    for (int i = 0; i < nres; i++)
        if (each[i] <= min_each) {
            snprintf(why, whylen, "%s%d: only %zu sections", prefix, i, each[i]);
            return -1;
        }
    return 0;
}

void tc_pick_subset(unsigned *seed, int nres, size_t k, int *idx)
{
    int all[TC_MAX_RES];

    if (nres > TC_MAX_RES)
        nres = TC_MAX_RES;
    if (k > (size_t)nres)
        k = (size_t)nres;
    for (int i = 0; i < nres; i++)
        all[i] = i;
    for (size_t i = 0; i < k; i++) {
        size_t j = i + (size_t)rand_r(seed) % ((size_t)nres - i);
        int t = all[i];

        all[i] = all[j];
        all[j] = t;
        idx[i] = all[i];
    }
}

void tc_tally_result(tc_tally *t, dlock_err rc)
{
    if (dlock_err_is_unavailable(rc)) {
        t->slow++;
    } else if (rc != DLOCK_OK && rc != DLOCK_ERR_TAKEN) {
        t->failed++;
        t->last_err = rc;
    }
}

int tc_tally_check(const tc_tally *t, int n, int *slow, char *why, size_t whylen)
{
    int bad = -1;

    *slow = 0;
    for (int i = 0; i < n; i++) {
        *slow += t[i].slow;
        if (bad < 0 && (t[i].failed != 0 || t[i].acquired == 0))
            bad = i;
    }
    if (bad < 0)
        return 0;
    if (t[bad].failed != 0)
        snprintf(why, whylen, "thread %d: %d results failed, last %s", bad, t[bad].failed,
                 dlock_strerror(t[bad].last_err));
    else
        snprintf(why, whylen, "thread %d never acquired", bad);
    return -1;
}

int tc_run_workers(int n, void *(*fn)(void *), void *run)
{
    tc_worker ws[TC_MAX_WORKERS];
    pthread_t th[TC_MAX_WORKERS];
    int started = 0;

    if (n > TC_MAX_WORKERS)
        return -1;
    for (; started < n; started++) {
        ws[started] = (tc_worker){run, started};
        if (pthread_create(&th[started], NULL, fn, &ws[started]) != 0)
            break;
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    return started == n ? 0 : -1;
}

long long tc_wait_blocked(const redis_proc *r, long long expect, int64_t timeout_ms)
{
    int64_t end = test_now_ms() + timeout_ms;
    long long got = -1;

    for (;;) {
        char out[4096];
        const char *argv[] = {"INFO", "clients"}, *at;

        got = -1;
        if (redis_cmd(r, out, sizeof out, 2, argv) == 0 && (at = strstr(out, "blocked_clients:")) != NULL)
            got = strtoll(at + strlen("blocked_clients:"), NULL, 10);
        if (got == expect || test_now_ms() >= end)
            return got;
        test_sleep_ms(5);
    }
}
