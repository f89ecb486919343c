/* tls.c - dlockctl over TLS, against redis-servers that listen on TLS ports
 * only: --tls-ca / --tls-cert / --tls-key and rediss:// reach them, verified
 * (a lock taken over TLS through libdlock is listed and released); a wrong
 * CA or no client certificate is a node down, saying why. Skipped, saying
 * so, in a build without TLS. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_util.h"
#include "tls_procs.h"

static char dir[256];
static tls_redis srv;
static char ca[300], crt[300], key[300], other[300];

static void setup(void)
{
    char err[DLOCK_ERRSTR_LEN];

    if (dlock_addr_check("rediss://127.0.0.1:1", err, sizeof err) != DLOCK_OK)
        cr_skip_test("this build has no TLS (its hiredis has none: -DDLOCK_HIREDIS=bundled)");
    cr_assert_eq(test_mkdtemp(dir, sizeof dir, "dlockctl-tls-"), 0);
    cr_assert_eq(tls_make_certs(dir), 0);
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    snprintf(crt, sizeof crt, "%s/client.crt", dir);
    snprintf(key, sizeof key, "%s/client.key", dir);
    snprintf(other, sizeof other, "%s/other.crt", dir);
    cr_assert_eq(tls_redis_start(&srv, dir, "yes"), 0);
}

static void teardown(void)
{
    tls_redis_stop(&srv);
    if (dir[0] != '\0')
        test_rmtree(dir);
}

TestSuite(ctl_tls, .init = setup, .fini = teardown, .timeout = 60);

Test(ctl_tls, pings_lists_and_releases_over_tls)
{
    char *out = NULL, url[96];
    const char *addrs[1] = {srv.addr};
    dlock_options o;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    char err[DLOCK_ERRSTR_LEN];

    cr_assert_eq(ctl_run(&out, "--redis", srv.addr, "--tls-ca", ca, "--tls-cert", crt,
                         "--tls-key", key, "ping", NULL), 0, "%s", out);
    cr_assert(strstr(out, "1/1 nodes up, quorum 1: ok") != NULL, "%s", out);
    free(out);

    /* A lock taken over TLS through libdlock, seen and released by dlockctl. */
    dlock_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = 1;
    o.tls = 1;
    o.tls_ca_file = ca;
    o.tls_cert_file = crt;
    o.tls_key_file = key;
    o.command_timeout_ms = 1000;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
    cr_assert_eq(dlock_try_acquire(c, "ctl-tls", 60000, &l), DLOCK_OK, "%s",
                 dlock_client_errstr(c, err, sizeof err));
    snprintf(url, sizeof url, "rediss://localhost:%d", srv.port);
    out = NULL;
    cr_assert_eq(ctl_run(&out, "--redis", url, "--tls-ca", ca, "--tls-cert", crt, "--tls-key",
                         key, "list", NULL), 0, "%s", out);
    cr_assert_eq(ctl_count_rows(out, "ctl-tls"), 1, "%s", out);
    free(out);
    out = NULL;
    cr_assert_eq(ctl_run(&out, "--redis", url, "--tls-ca", ca, "--tls-cert", crt, "--tls-key",
                         key, "release", "--force", "ctl-tls", NULL), 0, "%s", out);
    free(out);
    cr_assert_eq(dlock_release(c, l), DLOCK_ERR_LOST, "released by dlockctl, so lost here");
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(ctl_tls, a_wrong_ca_or_no_client_certificate_is_a_node_down_saying_why)
{
    char *out = NULL;

    cr_assert_eq(ctl_run(&out, "--redis", srv.addr, "--tls-ca", other, "--tls-cert", crt,
                         "--tls-key", key, "ping", NULL), 1, "%s", out);
    cr_assert(strstr(out, "certificate verify failed") != NULL, "%s", out);
    free(out);
    out = NULL;
    cr_assert_eq(ctl_run(&out, "--redis", srv.addr, "--tls-ca", ca, "ping", NULL), 1, "%s", out);
    cr_assert(strstr(out, "DOWN") != NULL, "%s", out);
    free(out);
    /* Plaintext to the TLS port: down too, never a hang. */
    out = NULL;
    cr_assert_eq(ctl_run(&out, "--redis", srv.addr, "ping", NULL), 1, "%s", out);
    cr_assert(strstr(out, "DOWN") != NULL, "%s", out);
    free(out);
}
