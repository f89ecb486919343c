/* adoption.c - what a C developer meets when adopting libdlock without the
 * app, each on a real redis-server:
 *   - refused credentials never become another identity;
 *   - a wait never overshoots its deadline by more than one command
 *     timeout;
 *   - a client used across fork() is refused in the child while the
 *     parent's renewal goes on;
 *   - taking a lock this thread already holds answers at once;
 *   - the misleading errors say what is wrong. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lock_common.h"

static redis_proc node;

static void setup(void)
{
    memset(&node, 0, sizeof node);
    cr_assert_eq(redis_start(&node), 0);
}

static void teardown(void)
{
    tc_kill_children();
    redis_stop(&node);
}

TestSuite(lock_adoption, .init = setup, .fini = teardown);

static dlock_err client_at(const char *const *addrs, size_t n, dlock_client **c, char *err,
                           size_t errlen)
{
    dlock_options o;

    dlock_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = n;
    return dlock_client_new(&o, c, err, errlen);
}

static dlock_client *url_client(const char *userinfo)
{
    char url[160], err[DLOCK_ERRSTR_LEN] = "";
    const char *addrs[1] = {url};
    dlock_client *c = NULL;

    snprintf(url, sizeof url, "redis://%s%s", userinfo, node.addr);
    cr_assert_eq(client_at(addrs, 1, &c, err, sizeof err), DLOCK_OK, "%s", err);
    return c;
}

static void cmd_ok(int argc, const char *const *argv)
{
    char out[256];

    tc_cmd(&node, out, sizeof out, argc, argv);
    cr_assert_str_eq(out, "OK", "%s %s: %s", argv[0], argv[1], out);
}

/* ---- 1. credentials ---- */

Test(lock_adoption, wrong_acl_password_is_refused_not_run_as_default, .timeout = 20)
{
    const char *alice[] = {"ACL", "SETUSER", "alice", "on", ">right", "~*", "+@all"};
    dlock_client *c;
    dlock_lock *l = NULL;
    size_t up = 9;

    cmd_ok(7, alice);
    /* The default user has no password here: a client that fell back to
     * it would work, as someone else. */
    c = url_client("alice:bad@");
    cr_assert_eq(dlock_ping(c, &up), DLOCK_ERR_AUTH, "%s", TC_ERR(c));
    cr_assert_eq(up, 0);
    cr_assert(strstr(TC_ERR(c), "WRONGPASS") != NULL, "%s", TC_ERR(c));
    cr_assert_eq(dlock_try_acquire(c, "acl1", 5000, &l), DLOCK_ERR_AUTH, "%s", TC_ERR(c));
    cr_assert_null(l);
    cr_assert_eq(tc_exists(&node, "acl1"), 0);
    /* On every call, not only the first. */
    cr_assert_eq(dlock_try_acquire(c, "acl1", 5000, &l), DLOCK_ERR_AUTH, "%s", TC_ERR(c));
    dlock_client_free(c);
}

Test(lock_adoption, credentials_changed_under_a_client_are_refused_on_reconnect, .timeout = 20)
{
    const char *alice[] = {"ACL", "SETUSER", "alice", "on", ">right", "~*", "+@all"};
    const char *newpw[] = {"ACL", "SETUSER", "alice", "resetpass", ">changed"};
    const char *kill[] = {"CLIENT", "KILL", "USER", "alice"};
    char out[64];
    dlock_client *c;
    dlock_lock *l = NULL;
    dlock_err rc;

    cmd_ok(7, alice);
    c = url_client("alice:right@");
    cr_assert_eq(dlock_try_acquire(c, "acl2", 5000, &l), DLOCK_OK, "%s", TC_ERR(c));
    dlock_release(c, l);
    dlock_lock_free(l);
    l = NULL;
    cmd_ok(5, newpw);
    tc_cmd(&node, out, sizeof out, 4, kill);
    /* The first call may meet the killed connection; the reconnect's AUTH
     * is refused from then on, never replaced by the default user. */
    rc = dlock_try_acquire(c, "acl2", 5000, &l);
    if (rc != DLOCK_ERR_AUTH)
        rc = dlock_try_acquire(c, "acl2", 5000, &l);
    cr_assert_eq(rc, DLOCK_ERR_AUTH, "got %s: %s", dlock_strerror(rc), TC_ERR(c));
    cr_assert_null(l);
    cr_assert_eq(tc_exists(&node, "acl2"), 0);
    dlock_client_free(c);
}

Test(lock_adoption, password_sent_to_a_server_without_one_is_an_error, .timeout = 20)
{
    dlock_client *c = url_client(":some-password@");
    dlock_lock *l = NULL;

    cr_assert_eq(dlock_ping(c, NULL), DLOCK_ERR_AUTH, "%s", TC_ERR(c));
    cr_assert(strstr(TC_ERR(c), "without any password configured") != NULL, "%s", TC_ERR(c));
    cr_assert_eq(dlock_try_acquire(c, "nopw", 5000, &l), DLOCK_ERR_AUTH, "%s", TC_ERR(c));
    dlock_client_free(c);
}

Test(lock_adoption, missing_password_says_noauth, .timeout = 20)
{
    const char *pw[] = {"CONFIG", "SET", "requirepass", "s3cret"};
    dlock_client *c;
    dlock_lock *l = NULL;

    c = url_client("");
    cmd_ok(4, pw);
    strcpy(node.password, "s3cret"); /* for the suite's own commands */
    {
        const char *kill[] = {"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"};
        char out[64];

        tc_cmd(&node, out, sizeof out, 6, kill);
    }
    /* A wait: the queued path, whose script has more than 10 arguments
     * (Redis then answers an unauthenticated client with a protocol error
     * about "multibulk length" instead of NOAUTH). */
    cr_assert_eq(dlock_acquire_for(c, "noauth", 5000, 300, &l) == DLOCK_ERR_AUTH ||
                     dlock_acquire_for(c, "noauth", 5000, 300, &l) == DLOCK_ERR_AUTH,
                 1, "%s", TC_ERR(c));
    cr_assert(strstr(TC_ERR(c), "NOAUTH") != NULL, "%s", TC_ERR(c));
    cr_assert(strstr(TC_ERR(c), "multibulk") == NULL, "%s", TC_ERR(c));
    dlock_client_free(c);
}

/* ---- 2. waits end by their deadline ---- */

static int tarpit(int *port, int fill, int *held)
{
    int fd = tc_tarpit(port, fill, held);

    cr_assert_geq(fd, 0, "no listening socket");
    return fd;
}

static int64_t timed_acquire(const char *const *addrs, size_t n, int64_t wait_ms, dlock_err *rc)
{
    dlock_options o;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    char err[DLOCK_ERRSTR_LEN] = "";
    int64_t t0;

    dlock_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = n;
    o.retry_unavailable = 0;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
    t0 = dlock_now_ms();
    *rc = dlock_acquire_for(c, "wait", 5000, wait_ms, &l);
    t0 = dlock_now_ms() - t0;
    if (l != NULL) {
        dlock_release(c, l);
        dlock_lock_free(l);
    }
    dlock_client_free(c);
    return t0;
}

Test(lock_adoption, waits_end_by_the_deadline_plus_one_command_timeout, .timeout = 60)
{
    int p1, p2, h1[4], h2[4];
    int t1 = tarpit(&p1, 0, h1), t2 = tarpit(&p2, 0, h2);
    char a1[64], a2[64];
    const char *addrs[3] = {node.addr, a1, a2};
    const int64_t waits[2] = {500, 2000};

    snprintf(a1, sizeof a1, "127.0.0.1:%d", p1);
    snprintf(a2, sizeof a2, "127.0.0.1:%d", p2);
    for (size_t i = 0; i < 2; i++) {
        dlock_err rc;
        int64_t took = timed_acquire(addrs, 3, waits[i], &rc);

        cr_assert(dlock_err_is_unavailable(rc), "got %s", dlock_strerror(rc));
        /* retry_unavailable = 0: the first unavailable answer returns, and
         * never later than the deadline plus one command timeout (100),
         * with 90 ms for the work around the rounds on a loaded machine. */
        cr_assert_leq(took, waits[i] + 100 + 90, "a %lld ms wait returned after %lld ms",
                      (long long)waits[i], (long long)took);
    }
    close(t1);
    close(t2);
}

Test(lock_adoption, a_hanging_connect_ends_by_the_deadline, .timeout = 60)
{
    int p, held[8];
    int t = tarpit(&p, 8, held); /* backlog full: a connect hangs */
    char a[64];
    const char *addrs[1] = {a};
    dlock_err rc;
    int64_t took;

    snprintf(a, sizeof a, "127.0.0.1:%d", p);
    took = timed_acquire(addrs, 1, 200, &rc);
    cr_assert(dlock_err_is_unavailable(rc), "got %s", dlock_strerror(rc));
    cr_assert_leq(took, 200 + 100 + 90, "a 200 ms wait returned after %lld ms", (long long)took);
    for (int i = 0; i < 8; i++)
        close(held[i]);
    close(t);
}

/* ---- 3. fork ---- */

Test(lock_adoption, fork_under_renewal_refuses_the_child_and_keeps_the_parent, .timeout = 60)
{
    dlock_client *c = url_client("");
    dlock_lock *l = NULL;
    dlock_renew_options ro = {0};
    pid_t pid;
    int st;

    cr_assert_eq(dlock_acquire_for(c, "forked", 600, 1000, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_auto_renew(c, l, &ro), DLOCK_OK, "%s", TC_ERR(c));
    pid = tc_fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* The child: the inherited client is refused at once, and a client
         * of its own works (300 calls), while the parent renews. */
        char err[DLOCK_ERRSTR_LEN], url[160];
        const char *addrs[1] = {url};
        dlock_lock *k = NULL;
        dlock_client *own = NULL;
        dlock_options o;

        if (dlock_try_acquire(c, "child", 1000, &k) != DLOCK_ERR_ARG)
            _exit(10);
        if (strstr(dlock_client_errstr(c, err, sizeof err), "fork") == NULL)
            _exit(11);
        snprintf(url, sizeof url, "redis://%s", node.addr);
        dlock_options_init(&o);
        o.addrs = addrs;
        o.n_addrs = 1;
        if (dlock_client_new(&o, &own, err, sizeof err) != DLOCK_OK)
            _exit(12);
        for (int i = 0; i < 150; i++) {
            if (dlock_try_acquire(own, "child", 1000, &k) != DLOCK_OK)
                _exit(13);
            if (dlock_release(own, k) != DLOCK_OK)
                _exit(14);
            dlock_lock_free(k);
        }
        dlock_client_free(own);
        _exit(0);
    }
    st = tc_wait_child(pid, 30000);
    cr_assert_eq(st, 0, "the child exited %d", st);
    /* Three TTLs later the parent still holds, renewed by its watchdog. */
    test_sleep_ms(1800);
    cr_assert(dlock_is_held(l));
    cr_assert_geq(dlock_lock_renewals(l), 3, "%u renewals", (unsigned)dlock_lock_renewals(l));
    cr_assert_eq(tc_exists(&node, "forked"), 1);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK, "%s", TC_ERR(c));
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* ---- 4. the same resource twice ---- */

typedef struct other_thread {
    dlock_client *c;
    dlock_err rc;
    int64_t took;
} other_thread;

static void *take_from_another_thread(void *arg)
{
    other_thread *o = arg;
    dlock_lock *l = NULL;
    int64_t t0 = dlock_now_ms();

    o->rc = dlock_acquire_for(o->c, "twice", 5000, 3000, &l);
    o->took = dlock_now_ms() - t0;
    if (l != NULL) {
        dlock_release(o->c, l);
        dlock_lock_free(l);
    }
    return NULL;
}

Test(lock_adoption, same_resource_twice_from_one_thread_answers_at_once, .timeout = 30)
{
    dlock_client *c = url_client("");
    dlock_lock *l = NULL, *again = NULL;
    other_thread o = {c, DLOCK_ERR_ARG, 0};
    pthread_t th;
    int64_t t0;
    dlock_err rc;

    cr_assert_eq(dlock_acquire_for(c, "twice", 5000, 1000, &l), DLOCK_OK, "%s", TC_ERR(c));
    t0 = dlock_now_ms();
    rc = dlock_acquire_for(c, "twice", 5000, 2000, &again);
    cr_assert_eq(rc, DLOCK_ERR_ARG, "got %s: %s", dlock_strerror(rc), TC_ERR(c));
    cr_assert_lt(dlock_now_ms() - t0, 200, "took %lld ms", (long long)(dlock_now_ms() - t0));
    cr_assert(strstr(TC_ERR(c), "already holds") != NULL, "%s", TC_ERR(c));
    cr_assert_null(again);
    /* Another thread sharing the client waits for it as usual. */
    cr_assert_eq(pthread_create(&th, NULL, take_from_another_thread, &o), 0);
    test_sleep_ms(300);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    pthread_join(th, NULL);
    cr_assert_eq(o.rc, DLOCK_OK, "the other thread: %s", dlock_strerror(o.rc));
    cr_assert_geq(o.took, 250);
    dlock_lock_free(l);
    /* Released: the first thread takes it again. */
    cr_assert_eq(dlock_try_acquire(c, "twice", 5000, &l), DLOCK_OK, "%s", TC_ERR(c));
    dlock_release(c, l);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* ---- 5. errors that say what is wrong ---- */

Test(lock_adoption, a_comma_list_in_one_address_says_so, .timeout = 10)
{
    const char *addrs[1] = {"127.0.0.1:7001,127.0.0.1:7002"};
    dlock_client *c = NULL;
    char err[DLOCK_ERRSTR_LEN] = "";

    cr_assert_eq(client_at(addrs, 1, &c, err, sizeof err), DLOCK_ERR_ARG);
    cr_assert(strstr(err, "one address per entry") != NULL, "%s", err);
    cr_assert(strstr(err, "IPv6") == NULL, "%s", err);
}

Test(lock_adoption, the_same_node_under_two_names_is_refused_whole, .timeout = 10)
{
    char a1[64], a2[64];
    const char *addrs[2] = {a1, a2};
    dlock_client *c = NULL;
    char err[DLOCK_ERRSTR_LEN] = "";

    snprintf(a1, sizeof a1, "127.0.0.1:%d", node.port);
    snprintf(a2, sizeof a2, "localhost:%d", node.port);
    cr_assert_eq(client_at(addrs, 2, &c, err, sizeof err), DLOCK_ERR_ARG, "accepted");
    cr_assert(strstr(err, "same server") != NULL, "%s", err);
    cr_assert(strstr(err, a2) != NULL && strstr(err, a1) != NULL, "not whole: %s", err);
}

Test(lock_adoption, errstr_after_a_success_is_empty, .timeout = 10)
{
    dlock_client *c = url_client("");
    dlock_lock *l = NULL;

    cr_assert_eq(dlock_try_acquire(c, "", 5000, &l), DLOCK_ERR_ARG);
    cr_assert_neq(TC_ERR(c)[0], '\0');
    cr_assert_eq(dlock_try_acquire(c, "es", 5000, &l), DLOCK_OK);
    cr_assert_str_eq(TC_ERR(c), "", "a success left \"%s\"", TC_ERR(c));
    dlock_release(c, l);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_adoption, uppercase_scheme_is_accepted, .timeout = 10)
{
    char url[96], err[DLOCK_ERRSTR_LEN] = "";
    const char *addrs[1] = {url};
    dlock_client *c = NULL;
    dlock_lock *l = NULL;

    snprintf(url, sizeof url, "REDIS://%s", node.addr);
    cr_assert_eq(client_at(addrs, 1, &c, err, sizeof err), DLOCK_OK, "%s", err);
    cr_assert_eq(dlock_try_acquire(c, "upper", 5000, &l), DLOCK_OK, "%s", TC_ERR(c));
    dlock_release(c, l);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_adoption, ttl_beyond_a_day_is_refused_with_the_limit, .timeout = 10)
{
    dlock_client *c = url_client("");
    dlock_lock *l = NULL;
    const char *set[2] = {"t1", "t2"};

    cr_assert_eq(dlock_try_acquire(c, "ttl", (uint32_t)-1, &l), DLOCK_ERR_ARG);
    cr_assert(strstr(TC_ERR(c), "86400000") != NULL, "%s", TC_ERR(c));
    cr_assert_eq(dlock_try_acquire(c, "ttl", 86400001u, &l), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_acquire_multi_for(c, set, 2, 86400001u, 0, &l), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_try_acquire(c, "ttl", 86400000u, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_extend(c, l, 86400001u), DLOCK_ERR_ARG);
    cr_assert(strstr(TC_ERR(c), "86400000") != NULL, "%s", TC_ERR(c));
    dlock_release(c, l);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static void note_lost(const dlock_lock *lock, dlock_err why, void *user)
{
    char *out = user;
    char detail[DLOCK_ERRSTR_LEN];

    snprintf(out, DLOCK_ERRSTR_LEN, "%s: %s", dlock_strerror(why),
             dlock_lock_lost_detail(lock, detail, sizeof detail));
}

Test(lock_adoption, on_lost_can_read_which_node_and_what_it_said, .timeout = 20)
{
    dlock_client *c = url_client("");
    dlock_lock *l = NULL;
    static char seen[DLOCK_ERRSTR_LEN];
    dlock_renew_options ro = {0};
    char key[TC_KEY_LEN];
    const char *steal[] = {"SET", tc_lock_key(key, "stolen"), "someone-else", "PX", "60000"};
    int64_t end;

    seen[0] = '\0';
    cr_assert_eq(dlock_acquire_for(c, "stolen", 600, 1000, &l), DLOCK_OK, "%s", TC_ERR(c));
    ro.on_lost = note_lost;
    ro.user = seen;
    cr_assert_eq(dlock_auto_renew(c, l, &ro), DLOCK_OK);
    cmd_ok(5, steal);
    end = dlock_now_ms() + 3000;
    while (dlock_is_held(l) && dlock_now_ms() < end)
        test_sleep_ms(20);
    test_sleep_ms(50);
    cr_assert_not(dlock_is_held(l));
    cr_assert(strstr(seen, node.addr) != NULL, "on_lost saw \"%s\"", seen);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_adoption, a_redis_cluster_node_is_refused_at_client_new, .timeout = 20)
{
    redis_proc cl;
    char url[96], err[DLOCK_ERRSTR_LEN] = "";
    const char *addrs[1] = {url};
    dlock_client *c = NULL;
    dlock_err rc;

    memset(&cl, 0, sizeof cl);
    cl.cluster = 1;
    cr_assert_eq(redis_start(&cl), 0);
    snprintf(url, sizeof url, "redis://%s", cl.addr);
    /* Not CROSSSLOT at the first call: refused when the client is made,
     * saying what to use instead. */
    rc = client_at(addrs, 1, &c, err, sizeof err);
    redis_stop(&cl);
    cr_assert_eq(rc, DLOCK_ERR_ARG, "accepted a cluster node");
    cr_assert(strstr(err, "Redis Cluster") != NULL && strstr(err, "independent masters") != NULL,
              "%s", err);
}
