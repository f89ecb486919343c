/* tls.c - libdlock over TLS, against real redis-server processes that
 * listen on TLS ports only (--port 0 --tls-port P), with a CA and
 * certificates made by openssl in the test's temp dir: a lock, Redlock over
 * three TLS masters, renewal and hand-off; each refusal with its message
 * (unknown CA, wrong name, no client certificate, plaintext to a TLS port,
 * TLS to a plaintext port); a master that stalls in the handshake costs one
 * command timeout. Skipped, saying so, in a build without TLS. Also the
 * note dlock_client_new gives for an even node count. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lock_common.h"
#include "tls_procs.h"

#define MAX_TLS 3

static char dir[256];          /* the temp dir: certificates and server dirs */
static tls_redis srv[MAX_TLS];
static int stall_fd = -1;       /* a listener that never answers */

static int built_with_tls(void)
{
    char err[DLOCK_ERRSTR_LEN];

    return dlock_addr_check("rediss://127.0.0.1:1", err, sizeof err) == DLOCK_OK;
}

static void path(char *out, size_t len, const char *name)
{
    cr_assert_lt((size_t)snprintf(out, len, "%s/%s", dir, name), len);
}

static void tls_start(tls_redis *p, const char *auth_clients)
{
    cr_assert_eq(tls_redis_start(p, dir, auth_clients), 0);
}

static void setup(void)
{
    memset(srv, 0, sizeof srv);
    cr_assert_eq(test_mkdtemp(dir, sizeof dir, "dlock-tls-"), 0);
}

static void teardown(void)
{
    for (size_t i = 0; i < MAX_TLS; i++)
        tls_redis_stop(&srv[i]);
    if (stall_fd >= 0)
        close(stall_fd);
    stall_fd = -1;
    test_rmtree(dir);
}

TestSuite(lock_tls, .init = setup, .fini = teardown, .timeout = 120);

static void need_tls(void)
{
    if (!built_with_tls())
        cr_skip_test("this libdlock was built without TLS (its hiredis has none: "
                     "-DDLOCK_HIREDIS=bundled builds it with TLS)");
    cr_assert_eq(tls_make_certs(dir), 0);
}

/* Options for TLS nodes: the test CA, a client certificate when cert. */
static void tls_opts(dlock_options *o, const char **addrs, size_t n, int cert)
{
    static char ca[300], crt[300], key[300];

    path(ca, sizeof ca, "ca.crt");
    path(crt, sizeof crt, "client.crt");
    path(key, sizeof key, "client.key");
    dlock_options_init(o);
    o->addrs = addrs;
    o->n_addrs = n;
    o->tls_ca_file = ca;
    if (cert) {
        o->tls_cert_file = crt;
        o->tls_key_file = key;
    }
    o->connect_timeout_ms = 1000;
    o->command_timeout_ms = 1000;
}

/* One TLS-only server (auth_clients: "yes" wants a client certificate)
 * and options for a client of it by name, without a certificate. */
static void one_tls_server(dlock_options *o, char *url, size_t urllen, const char **addrs,
                           const char *auth_clients)
{
    need_tls();
    tls_start(&srv[0], auth_clients);
    snprintf(url, urllen, "rediss://localhost:%d", srv[0].port);
    tls_opts(o, addrs, 1, 0);
}

Test(lock_tls, lock_over_rediss_url)
{
    dlock_options o;
    dlock_client *c = NULL;
    dlock_lock *l = NULL, *l2 = NULL;
    char url[96], err[DLOCK_ERRSTR_LEN];
    const char *addrs[1] = {url};

    need_tls();
    tls_start(&srv[0], "yes");
    /* By name: the certificate's DNS name is checked and sent as SNI. */
    snprintf(url, sizeof url, "rediss://localhost:%d", srv[0].port);
    tls_opts(&o, addrs, 1, 1);
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
    cr_assert_eq(dlock_try_acquire(c, "tls:a", 5000, &l), DLOCK_OK, "%s",
                 dlock_client_errstr(c, err, sizeof err));
    cr_assert_eq(dlock_try_acquire(c, "tls:b", 5000, &l2), DLOCK_OK);
    cr_assert_gt(dlock_lock_fence(l), 0);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK, "%s", dlock_client_errstr(c, err, sizeof err));
    cr_assert_eq(dlock_release(c, l2), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(l2);
    dlock_client_free(c);
}

typedef struct waiter {
    dlock_client *c;
    dlock_lock *l;
    dlock_err rc;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;

    w->rc = dlock_acquire_for(w->c, "tls:r", 5000, 10000, &w->l);
    return NULL;
}

Test(lock_tls, redlock_over_three_tls_masters_with_renewal_and_handoff)
{
    dlock_options o;
    dlock_client *c = NULL, *c2 = NULL;
    dlock_lock *l = NULL, *l2 = NULL;
    const char *addrs[MAX_TLS];
    char err[DLOCK_ERRSTR_LEN];
    size_t up = 0;
    int64_t t0, waited;
    dlock_renew_options ro;
    pthread_t th;
    waiter w;

    need_tls();
    for (size_t i = 0; i < MAX_TLS; i++) {
        tls_start(&srv[i], "yes");
        addrs[i] = srv[i].addr; /* host:port, TLS from o.tls: the IP is checked */
    }
    tls_opts(&o, addrs, MAX_TLS, 1);
    o.tls = 1;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
    cr_assert_str_empty(err, "3 nodes need no note: %s", err);
    cr_assert_eq(dlock_client_new(&o, &c2, err, sizeof err), DLOCK_OK, "%s", err);
    cr_assert_eq(dlock_ping(c, &up), DLOCK_OK);
    cr_assert_eq(up, 3);

    /* Renewal: a 600 ms lease renewed over TLS outlives its TTL. */
    cr_assert_eq(dlock_acquire_for(c, "tls:r", 600, 0, &l), DLOCK_OK, "%s",
                 dlock_client_errstr(c, err, sizeof err));
    memset(&ro, 0, sizeof ro);
    cr_assert_eq(dlock_auto_renew(c, l, &ro), DLOCK_OK);
    test_sleep_ms(1500);
    cr_assert(dlock_is_held(l));
    cr_assert_geq(dlock_lock_renewals(l), 2, "renewals: %u", dlock_lock_renewals(l));
    cr_assert_eq(dlock_try_acquire(c2, "tls:r", 600, &l2), DLOCK_ERR_TAKEN);

    /* Hand-off: c2 waits (BLPOP on its own TLS connections, wake.c) and
     * gets the lock at the release, not at its next poll. The wait outlasts
     * c2's command timeout (100 ms) thrice: a TLS 1.3 server's session
     * tickets make the waiting socket readable long before the release,
     * and a read that then waited for the reply would time out and drop
     * the BLPOP. Polling every 250 ms could not answer within 100 ms. */
    dlock_client_free(c2);
    c2 = NULL;
    o.command_timeout_ms = 100;
    o.retry_fixed_ms = 250;
    cr_assert_eq(dlock_client_new(&o, &c2, err, sizeof err), DLOCK_OK, "%s", err);
    w.c = c2;
    w.l = NULL;
    w.rc = DLOCK_ERR_ARG;
    cr_assert_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
    test_sleep_ms(400);
    t0 = test_now_ms();
    cr_assert_eq(dlock_release(c, l), DLOCK_OK, "%s", dlock_client_errstr(c, err, sizeof err));
    cr_assert_eq(pthread_join(th, NULL), 0);
    waited = test_now_ms() - t0;
    cr_assert_eq(w.rc, DLOCK_OK, "the waiter: %s", dlock_strerror(w.rc));
    cr_assert_lt(waited, 100, "the hand-off took %lld ms after the release", (long long)waited);
    cr_assert_eq(dlock_release(c2, w.l), DLOCK_OK);
    dlock_lock_free(w.l);
    dlock_lock_free(l);
    dlock_client_free(c);
    dlock_client_free(c2);
}

/* Sentinel over TLS: with tls set, the sentinels are asked over TLS, and
 * the master they name is locked on over TLS. */
Test(lock_tls, sentinel_over_tls)
{
    dlock_options o;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    tls_redis sen;
    char url[128], err[DLOCK_ERRSTR_LEN];
    const char *addrs[1] = {url};

    need_tls();
    tls_start(&srv[0], "no");
    cr_assert_eq(tls_sentinel_start(&sen, dir, "tlsmaster", srv[0].port), 0);
    snprintf(url, sizeof url, "sentinel://%s/tlsmaster", sen.addr);
    tls_opts(&o, addrs, 1, 0);
    o.tls = 1;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
    cr_assert_eq(dlock_acquire_for(c, "tls:sen", 5000, 3000, &l), DLOCK_OK, "%s",
                 dlock_client_errstr(c, err, sizeof err));
    cr_assert_eq(dlock_release(c, l), DLOCK_OK, "%s", dlock_client_errstr(c, err, sizeof err));
    dlock_lock_free(l);
    dlock_client_free(c);
    /* The same without TLS to the sentinel: refused, not in clear. */
    o.tls = 0;
    snprintf(url, sizeof url, "sentinel://%s/tlsmaster", sen.addr);
    o.tls_ca_file = NULL;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
    cr_assert_neq(dlock_try_acquire(c, "tls:sen", 5000, &l), DLOCK_OK);
    dlock_client_free(c);
    tls_redis_stop(&sen);
}

/* A one-node client that must fail: dlock_client_new takes it (a node
 * that cannot be reached is no error there), dlock_ping says why. */
static void refused(const dlock_options *o, const char *needle)
{
    dlock_client *c = NULL;
    char err[DLOCK_ERRSTR_LEN];
    dlock_err rc = dlock_client_new(o, &c, err, sizeof err);

    cr_assert_eq(rc, DLOCK_OK, "%s", err);
    rc = dlock_ping(c, NULL);
    dlock_client_errstr(c, err, sizeof err);
    cr_assert_neq(rc, DLOCK_OK, "a ping went through: %s", err);
    cr_assert(strstr(err, needle) != NULL, "\"%s\" lacks \"%s\"", err, needle);
    dlock_client_free(c);
}

Test(lock_tls, unknown_ca_is_refused_saying_so)
{
    dlock_options o;
    char url[96], other[300];
    const char *addrs[1] = {url};

    one_tls_server(&o, url, sizeof url, addrs, "no");
    path(other, sizeof other, "other.crt");
    o.tls_ca_file = other;
    refused(&o, "unknown CA");
}

Test(lock_tls, wrong_name_is_refused_saying_so)
{
    dlock_options o;
    char url[96];
    const char *addrs[1] = {url};

    one_tls_server(&o, url, sizeof url, addrs, "no");
    o.tls_server_name = "db.example.org";
    refused(&o, "name mismatch");
    /* The same for an address by IP that the certificate does not name. */
    o.tls_server_name = "127.0.0.2";
    refused(&o, "name mismatch");
}

Test(lock_tls, insecure_skip_verify_takes_any_certificate)
{
    dlock_options o;
    dlock_client *c = NULL;
    char url[96], err[DLOCK_ERRSTR_LEN], other[300];
    const char *addrs[1] = {url};

    one_tls_server(&o, url, sizeof url, addrs, "no");
    path(other, sizeof other, "other.crt");
    o.tls_ca_file = other;
    o.tls_server_name = "db.example.org";
    o.tls_insecure_skip_verify = 1;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
    cr_assert_eq(dlock_ping(c, NULL), DLOCK_OK, "%s", dlock_client_errstr(c, err, sizeof err));
    dlock_client_free(c);
}

Test(lock_tls, missing_client_certificate_is_refused_saying_so)
{
    dlock_options o;
    char url[96];
    const char *addrs[1] = {url};

    one_tls_server(&o, url, sizeof url, addrs, "yes");
    /* The server's alert ("certificate required") when it arrives before
     * the reset, else the reason the client infers: both name it. */
    refused(&o, "client certificate");
}

Test(lock_tls, plaintext_to_a_tls_port_is_refused_saying_so)
{
    dlock_options o;
    const char *addrs[1];

    need_tls();
    tls_start(&srv[0], "no");
    addrs[0] = srv[0].addr;
    dlock_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = 1;
    o.command_timeout_ms = 1000;
    refused(&o, "TLS port");
}

Test(lock_tls, tls_to_a_plaintext_port_is_refused_saying_so)
{
    dlock_options o;
    redis_proc plain;
    char url[96];
    const char *addrs[1] = {url};

    need_tls();
    memset(&plain, 0, sizeof plain);
    cr_assert_eq(redis_start(&plain), 0);
    snprintf(url, sizeof url, "rediss://localhost:%d", plain.port);
    tls_opts(&o, addrs, 1, 0);
    refused(&o, "TLS handshake timeout");
    refused(&o, "or a plaintext port");
    redis_stop(&plain);
}

Test(lock_tls, bad_files_are_refused_at_client_new)
{
    dlock_options o;
    dlock_client *c = NULL;
    char url[96], err[DLOCK_ERRSTR_LEN];
    const char *addrs[1] = {url};

    need_tls();
    snprintf(url, sizeof url, "rediss://localhost:1");
    tls_opts(&o, addrs, 1, 0);
    o.tls_ca_file = "/nonexistent/ca.crt";
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_ERR_ARG);
    cr_assert(strstr(err, "/nonexistent/ca.crt") != NULL, "%s", err);
    tls_opts(&o, addrs, 1, 1);
    o.tls_key_file = NULL;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_ERR_ARG);
    cr_assert(strstr(err, "go together") != NULL, "%s", err);
    /* TLS files with no TLS node would mean plaintext by mistake. */
    tls_opts(&o, addrs, 1, 0);
    snprintf(url, sizeof url, "redis://localhost:1");
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_ERR_ARG);
    cr_assert(strstr(err, "no node uses TLS") != NULL, "%s", err);
}

/* A listener that completes TCP connects (the kernel does, from the
 * backlog) and never says a word: a server stuck before its handshake. */
static int stall_listener(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    cr_assert_geq(fd, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(fd, 16), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    stall_fd = fd;
    return ntohs(a.sin_port);
}

Test(lock_tls, a_stalled_handshake_costs_one_command_timeout)
{
    dlock_options o;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    char stall[64], err[DLOCK_ERRSTR_LEN];
    const char *addrs[MAX_TLS];
    int64_t t0, took;

    need_tls();
    snprintf(stall, sizeof stall, "127.0.0.1:%d", stall_listener());
    tls_start(&srv[0], "no");
    tls_start(&srv[1], "no");
    /* One node that stalls: a try fails as unreachable after one command
     * timeout (300 ms), even with 10 s to wait. */
    addrs[0] = stall;
    tls_opts(&o, addrs, 1, 0);
    o.tls = 1;
    o.command_timeout_ms = 300;
    o.connect_timeout_ms = 300;
    t0 = test_now_ms();
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
    took = test_now_ms() - t0;
    cr_assert_lt(took, 1000, "dlock_client_new took %lld ms", (long long)took);
    t0 = test_now_ms();
    cr_assert_eq(dlock_acquire_for(c, "tls:s", 5000, 10000, &l), DLOCK_ERR_UNREACHABLE);
    took = test_now_ms() - t0;
    dlock_client_errstr(c, err, sizeof err);
    cr_assert(strstr(err, "TLS handshake timeout after 300 ms") != NULL, "%s", err);
    cr_assert_geq(took, 250, "gave up after %lld ms, before its timeout", (long long)took);
    cr_assert_lt(took, 1000, "a stalled handshake cost %lld ms", (long long)took);
    dlock_client_free(c);

    /* Beside two answering masters, the stalled one costs the quorum
     * nothing: the lock is had within the timeout. */
    addrs[0] = srv[0].addr;
    addrs[1] = srv[1].addr;
    addrs[2] = stall;
    tls_opts(&o, addrs, 3, 0);
    o.tls = 1;
    o.command_timeout_ms = 300;
    o.connect_timeout_ms = 300;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
    t0 = test_now_ms();
    cr_assert_eq(dlock_acquire_for(c, "tls:s", 5000, 10000, &l), DLOCK_OK, "%s",
                 dlock_client_errstr(c, err, sizeof err));
    took = test_now_ms() - t0;
    cr_assert_lt(took, 1000, "the acquire took %lld ms", (long long)took);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Not TLS: dlock_client_new's note on an even node count. */
Test(lock_tls, even_node_count_is_noted_at_client_new)
{
    redis_proc n[4];
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    char err[DLOCK_ERRSTR_LEN];

    cr_assert_eq(tc_nodes_up(n, 4, 0), 0);
    for (size_t k = 1; k <= 4; k++) {
        tc_options(&o, &a, n, k);
        strcpy(err, "junk");
        cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
        if (k == 2)
            cr_assert(strstr(err, "2 nodes (quorum 2) tolerate 0 failed nodes, as 1 node "
                              "would") != NULL, "%s", err);
        else if (k == 4)
            cr_assert(strstr(err, "4 nodes (quorum 3) tolerate 1 failed node, as 3 nodes "
                              "would") != NULL, "%s", err);
        else
            cr_assert_str_empty(err, "%zu nodes: %s", k, err);
        dlock_client_free(c);
    }
    tc_nodes_down(n, 4);
}

/* A build without TLS refuses TLS at dlock_client_new, saying how to build
 * with it, rather than connect in plaintext. */
Test(lock_tls, a_build_without_tls_refuses_it_saying_how_to_build)
{
    dlock_options o;
    dlock_client *c = NULL;
    char err[DLOCK_ERRSTR_LEN];
    const char *addrs[1] = {"rediss://:s3cret@localhost:6390"};

    if (built_with_tls())
        cr_skip_test("this libdlock has TLS (the refusal is for builds without it)");
    dlock_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = 1;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_ERR_ARG);
    cr_assert(strstr(err, "TLS is not in this build") != NULL, "%s", err);
    cr_assert(strstr(err, "-DDLOCK_HIREDIS=bundled") != NULL, "%s", err);
    cr_assert(strstr(err, "s3cret") == NULL, "the password is shown: %s", err);
    addrs[0] = "127.0.0.1:6390";
    o.tls = 1;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_ERR_ARG);
    cr_assert(strstr(err, "-DDLOCK_HIREDIS=bundled") != NULL, "%s", err);
}
