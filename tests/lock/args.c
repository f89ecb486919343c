/* args.c - bad input gives DLOCK_ERR_ARG with NULL outputs, never a
 * crash; error texts and the unavailable classification of every code. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "lock_common.h"

static redis_proc node;
static dlock_client *cli;

TC_NODE_CLIENTS_FIXTURE(node, &cli)
TestSuite(lock_args, .init = tc_suite_init, .fini = tc_suite_fini);

/* A pointer that is never a real handle: the library must overwrite it. */
#define SENTINEL ((void *)0x1)

static dlock_err new_with(const char *const *addrs, size_t n, dlock_client **out)
{
    dlock_options o;
    char err[DLOCK_ERRSTR_LEN] = "";
    dlock_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = n;
    *out = SENTINEL;
    dlock_err e = dlock_client_new(&o, out, err, sizeof err);
    if (e == DLOCK_ERR_ARG)
        cr_expect_neq(err[0], '\0', "ARG without detail text");
    return e;
}

Test(lock_args, options_defaults, .timeout = 10)
{
    dlock_options o;
    memset(&o, 0x5a, sizeof o);
    dlock_options_init(&o);
    cr_assert_null(o.addrs);
    cr_assert_eq(o.n_addrs, 0);
    cr_assert_null(o.username);
    cr_assert_null(o.password);
    cr_assert_str_eq(o.key_prefix ? o.key_prefix : "", "");
    cr_assert_eq(o.connect_timeout_ms, 200);
    cr_assert_eq(o.command_timeout_ms, 100);
    cr_assert_float_eq(o.drift_factor, 0.01, 1e-12);
    cr_assert_eq(o.drift_min_ms, 2);
    cr_assert_eq(o.retry_base_ms, 2);
    cr_assert_eq(o.retry_max_ms, 50);
    cr_assert_eq(o.retry_fixed_ms, 0);
    cr_assert_eq(o.retry_jitter_ms, 0);
    cr_assert_eq(o.retry_unavailable, 0);
}

Test(lock_args, client_new_rejects_bad_options, .timeout = 10)
{
    dlock_client *c = SENTINEL;
    dlock_options o;
    dlock_options_init(&o);

    cr_assert_eq(dlock_client_new(NULL, &c, NULL, 0), DLOCK_ERR_ARG);
    cr_assert_null(c);
    o.addrs = (const char *const[]){node.addr};
    o.n_addrs = 1;
    cr_assert_eq(dlock_client_new(&o, NULL, NULL, 0), DLOCK_ERR_ARG);

    cr_assert_eq(new_with(NULL, 1, &c), DLOCK_ERR_ARG);
    cr_assert_null(c);
    cr_assert_eq(new_with((const char *const[]){node.addr}, 0, &c), DLOCK_ERR_ARG);
    cr_assert_null(c);

    /* ("nohost" is not here: it is a host on port 6379, an address as
     * people write it; tests/lock/addr.c has the accepted forms.) */
    const char *bad[] = {"",          "no host",         "127.0.0.1:",      "127.0.0.1:abc",
                         "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:-1",    ":6379",
                         "unix:",     "127.0.0.1:6379x", "[::1:6379"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *one[] = {bad[i]};
        cr_assert_eq(new_with(one, 1, &c), DLOCK_ERR_ARG, "address \"%s\" accepted", bad[i]);
        cr_assert_null(c);
        /* One bad address among good ones is still a configuration error. */
        const char *three[] = {node.addr, bad[i], node.addr};
        cr_assert_eq(new_with(three, 3, &c), DLOCK_ERR_ARG, "address \"%s\" accepted", bad[i]);
        cr_assert_null(c);
    }
    const char *nulls[] = {node.addr, NULL};
    cr_assert_eq(new_with(nulls, 2, &c), DLOCK_ERR_ARG);
    cr_assert_null(c);

    const char *many[DLOCK_MAX_NODES + 1];
    for (size_t i = 0; i < DLOCK_MAX_NODES + 1; i++)
        many[i] = node.addr;
    cr_assert_eq(new_with(many, DLOCK_MAX_NODES + 1, &c), DLOCK_ERR_ARG);
    cr_assert_null(c);

    /* An error buffer of size 1 still gets a terminated (empty) string. */
    char tiny[1] = {'x'};
    o.addrs = (const char *const[]){"no host"};
    o.n_addrs = 1;
    c = SENTINEL;
    cr_assert_eq(dlock_client_new(&o, &c, tiny, sizeof tiny), DLOCK_ERR_ARG);
    cr_assert_eq(tiny[0], '\0');
    cr_assert_null(c);
}

Test(lock_args, acquire_rejects_bad_arguments, .timeout = 10)
{
    dlock_lock *l = SENTINEL;
    char big[DLOCK_MAX_KEY_LEN + 2];

    cr_assert_eq(dlock_acquire(NULL, "r", 1000, 0, &l), DLOCK_ERR_ARG);
    cr_assert_null(l);
    l = SENTINEL;
    cr_assert_eq(dlock_acquire(cli, NULL, 1000, 0, &l), DLOCK_ERR_ARG);
    cr_assert_null(l);
    l = SENTINEL;
    cr_assert_eq(dlock_acquire(cli, "", 1000, 0, &l), DLOCK_ERR_ARG);
    cr_assert_null(l);
    l = SENTINEL;
    cr_assert_eq(dlock_acquire(cli, "r", 0, 0, &l), DLOCK_ERR_ARG);
    cr_assert_null(l);
    cr_assert_eq(dlock_acquire(cli, "r", 1000, 0, NULL), DLOCK_ERR_ARG);
    l = SENTINEL;
    cr_assert_eq(dlock_try_acquire(cli, "", 1000, &l), DLOCK_ERR_ARG);
    cr_assert_null(l);
    l = SENTINEL;
    cr_assert_eq(dlock_try_acquire(NULL, "r", 1000, &l), DLOCK_ERR_ARG);
    cr_assert_null(l);

    memset(big, 'k', sizeof big);
    big[DLOCK_MAX_KEY_LEN + 1] = '\0';
    l = SENTINEL;
    cr_assert_eq(dlock_try_acquire(cli, big, 1000, &l), DLOCK_ERR_ARG);
    cr_assert_null(l);
    /* Exactly the limit is allowed, and the key on the node is lock:<name>. */
    big[DLOCK_MAX_KEY_LEN] = '\0';
    cr_assert_eq(dlock_try_acquire(cli, big, 1000, &l), DLOCK_OK);
    cr_assert_not_null(l);
    cr_assert_eq(tc_exists(&node, big), 1);
    cr_assert_eq(dlock_release(cli, l), DLOCK_OK);
    cr_assert_eq(tc_exists(&node, big), 0);
    dlock_lock_free(l);

    /* Nothing was sent for the rejected calls: the only key left is the
     * (never expiring) fence counter of the one real acquisition. */
    char keys[4096], want[DLOCK_MAX_KEY_LEN + 16];
    const char *argv[] = {"KEYS", "*"};
    tc_cmd(&node, keys, sizeof keys, 2, argv);
    snprintf(want, sizeof want, "fence:%s", big);
    cr_assert_str_eq(keys, want);
}

Test(lock_args, key_limit_counts_the_prefix, .timeout = 10)
{
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    dlock_lock *l = SENTINEL;
    char name[DLOCK_MAX_KEY_LEN + 1];
    char key[DLOCK_MAX_KEY_LEN + 16], out[64];

    tc_options(&o, &a, &node, 1);
    o.key_prefix = "pfx:";
    cr_assert_eq(dlock_client_new(&o, &c, NULL, 0), DLOCK_OK);
    memset(name, 'n', sizeof name);
    name[DLOCK_MAX_KEY_LEN - 4 + 1] = '\0'; /* prefix + name = limit + 1 */
    cr_assert_eq(dlock_try_acquire(c, name, 1000, &l), DLOCK_ERR_ARG);
    cr_assert_null(l);
    name[DLOCK_MAX_KEY_LEN - 4] = '\0'; /* prefix + name = limit */
    cr_assert_eq(dlock_try_acquire(c, name, 1000, &l), DLOCK_OK);
    /* The prefix comes before the namespace word (dlock.h, "Keys"). */
    snprintf(key, sizeof key, "pfx:lock:%s", name);
    const char *exists[] = {"EXISTS", key};
    tc_cmd(&node, out, sizeof out, 2, exists);
    cr_assert_str_eq(out, "1");
    cr_assert_str_eq(dlock_lock_resource(l), name);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_args, release_extend_renew_reject_null, .timeout = 10)
{
    dlock_lock *l = NULL;
    dlock_renew_options ro = {0};
    cr_assert_eq(dlock_release(cli, NULL), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_extend(cli, NULL, 1000), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_auto_renew(cli, NULL, &ro), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_try_acquire(cli, "args-null", 5000, &l), DLOCK_OK);
    cr_assert_eq(dlock_release(NULL, l), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_extend(NULL, l, 1000), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_extend(cli, l, 0), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_auto_renew(NULL, l, &ro), DLOCK_ERR_ARG);
    /* The rejected calls left the lock alone. */
    cr_assert_eq(dlock_is_held(l), 1);
    cr_assert_eq(tc_exists(&node, "args-null"), 1);
    cr_assert_eq(dlock_release(cli, l), DLOCK_OK);
    cr_assert_eq(tc_exists(&node, "args-null"), 0);
    dlock_lock_free(l);
    dlock_lock_free(NULL);
    dlock_client_free(NULL);
    cr_assert_eq(dlock_ping(NULL, NULL), DLOCK_ERR_ARG);
}

Test(lock_args, strerror_never_null, .timeout = 10)
{
    for (int e = DLOCK_OK; e <= DLOCK_ERR_FENCE_SYNC; e++) {
        const char *s = dlock_strerror((dlock_err)e);
        cr_assert_not_null(s);
        cr_assert_neq(s[0], '\0');
        for (int f = DLOCK_OK; f < e; f++)
            cr_assert_str_neq(s, dlock_strerror((dlock_err)f), "codes %d and %d share a text", e, f);
    }
    cr_assert_not_null(dlock_strerror((dlock_err)999));
    cr_assert_not_null(dlock_strerror((dlock_err)-1));
    cr_assert_not_null(dlock_strerror((dlock_err)(DLOCK_ERR_FENCE_SYNC + 1)));
}

Test(lock_args, unavailable_classification, .timeout = 10)
{
    const int expect[] = {
        [DLOCK_OK] = 0,          [DLOCK_ERR_ARG] = 0,      [DLOCK_ERR_TAKEN] = 0,
        [DLOCK_ERR_TIMEOUT] = 1, [DLOCK_ERR_UNREACHABLE] = 1, [DLOCK_ERR_NO_QUORUM] = 1,
        [DLOCK_ERR_LOST] = 0,    [DLOCK_ERR_EXPIRED] = 0,  [DLOCK_ERR_NOMEM] = 0,
        [DLOCK_ERR_PROTOCOL] = 1, [DLOCK_ERR_AUTH] = 1,   [DLOCK_ERR_FENCE_SYNC] = 1,
    };
    for (int e = DLOCK_OK; e <= DLOCK_ERR_FENCE_SYNC; e++)
        cr_assert_eq(dlock_err_is_unavailable((dlock_err)e) != 0, expect[e], "code %d", e);
    cr_assert_eq(dlock_err_is_unavailable((dlock_err)999), 0);
}

Test(lock_args, client_shape, .timeout = 10)
{
    cr_assert_eq(dlock_client_nodes(cli), 1);
    cr_assert_eq(dlock_client_quorum(cli), 1);
    char buf[DLOCK_ERRSTR_LEN] = "x";
    /* A copy into the caller's buffer, returned for use in printf lists. */
    cr_assert_eq(dlock_client_errstr(cli, buf, sizeof buf), buf);
    cr_assert_str_eq(dlock_client_errstr(NULL, buf, sizeof buf), "client is NULL");
    /* Truncated to fit, still terminated; a zero-length buffer is left alone. */
    cr_assert_str_eq(dlock_client_errstr(NULL, buf, 5), "clie");
    cr_assert_str_eq(dlock_client_errstr(cli, buf, 0), "");
    cr_assert_str_eq(dlock_client_errstr(cli, NULL, 10), "");
    size_t up = 99;
    cr_assert_eq(dlock_ping(cli, &up), DLOCK_OK);
    cr_assert_eq(up, 1);
}

/* sentinel://host:port[,host:port...]/name: one node, its master found
 * through the sentinels (the suite lock_sentinel runs them for real). */
Test(lock_args, sentinel_address_form, .timeout = 10)
{
    char host[300], err[DLOCK_ERRSTR_LEN];
    int port = 0;
    dlock_client *c = SENTINEL;

    const char *good[] = {"sentinel://127.0.0.1:26379/mymaster",
                          "sentinel://a:1,b.example:2,[::1]:3/m-1.x",
                          "sentinel://h1:1,h2:2,h3:3,h4:4,h5:5,h6:6,h7:7,h8:8/m"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        cr_assert_eq(dlock_addr_check(good[i], err, sizeof err), DLOCK_OK, "\"%s\": %s", good[i],
                     err);
    /* No fixed host: the master name stands in, port -1. */
    cr_assert_eq(dlock_addr_parse(good[0], host, sizeof host, &port, err, sizeof err), DLOCK_OK);
    cr_assert_str_eq(host, "mymaster");
    cr_assert_eq(port, -1);

    const struct {
        const char *addr, *why;
    } bad[] = {
        {"sentinel://127.0.0.1:26379", "expected sentinel://"},  /* no name */
        {"sentinel://127.0.0.1:26379/", "expected sentinel://"}, /* empty name */
        {"sentinel:///m", "no sentinel before"},                 /* empty host list */
        {"sentinel://", "expected sentinel://"},
        {"sentinel://a:1,,b:2/m", "empty sentinel"},
        {"sentinel://a:1,/m", "empty sentinel"},
        {"sentinel://,a:1/m", "empty sentinel"},
        {"sentinel://h1:1,h2:2,h3:3,h4:4,h5:5,h6:6,h7:7,h8:8,h9:9/m", "more than 8 sentinels"},
        {"sentinel://a:0/m", "port out of range"},
        {"sentinel://a:65536/m", "port out of range"},
        {"sentinel://a:x/m", "bad port"},
        {"sentinel://:1/m", "bad host"},
        {"sentinel://a:1/my master", "space or control byte"},
        {"sentinel://a:1/x/y", "bad port"},
        {"sentinel://unix:/tmp/s/m", "bad port"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *one[] = {bad[i].addr};
        err[0] = '\0';
        cr_assert_eq(dlock_addr_check(bad[i].addr, err, sizeof err), DLOCK_ERR_ARG,
                     "\"%s\" accepted", bad[i].addr);
        cr_assert(strstr(err, bad[i].why) != NULL, "\"%s\": %s", bad[i].addr, err);
        cr_assert_eq(new_with(one, 1, &c), DLOCK_ERR_ARG, "\"%s\" accepted", bad[i].addr);
        cr_assert_null(c);
    }

    /* The same master name at a common sentinel is the same node: it would
     * count twice toward the quorum. Another name is another node. */
    const char *twice[] = {"sentinel://127.0.0.1:1,127.0.0.1:2/m", "sentinel://127.0.0.1:2/m"};
    cr_assert_eq(new_with(twice, 2, &c), DLOCK_ERR_ARG);
    cr_assert_null(c);
    const char *two[] = {"sentinel://127.0.0.1:1/m1", "sentinel://127.0.0.1:1/m2", node.addr};
    cr_assert_eq(new_with(two, 3, &c), DLOCK_OK);
    cr_assert_eq(dlock_client_nodes(c), 3);
    dlock_client_free(c);
}

/* How a --redis list splits: a sentinel address keeps its own commas. */
Test(lock_args, address_list_span, .timeout = 10)
{
    const char *list = "h:1,sentinel://s1:2,s2:3/m,unix:/x,sentinel://s:4/n";
    const char *want[] = {"h:1", "sentinel://s1:2,s2:3/m", "unix:/x", "sentinel://s:4/n"};
    const char *p = list;

    for (size_t i = 0; i < 4; i++) {
        size_t len = dlock_addr_span(p);
        cr_assert_eq(len, strlen(want[i]), "item %zu: %zu", i, len);
        cr_assert_eq(strncmp(p, want[i], len), 0);
        p += len;
        if (*p == ',')
            p++;
    }
    cr_assert_eq(*p, '\0');
    cr_assert_eq(dlock_addr_span(NULL), 0);
    cr_assert_eq(dlock_addr_span(""), 0);
    cr_assert_eq(dlock_addr_span(",a:1"), 0);
    /* No name yet: the list runs to the end (the parse then says why). */
    cr_assert_eq(dlock_addr_span("sentinel://a:1,b:2"), strlen("sentinel://a:1,b:2"));
}
