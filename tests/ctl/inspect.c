/* inspect.c - dlockctl list and show read what libdlock really wrote: the
 * holder's token, a TTL and the fence, on every node of a Redlock. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_util.h"

#define NODES 3
static redis_proc rs[NODES];
static char csv[256];

CTL_NODES_FIXTURE(rs, NODES, csv)
TestSuite(ctl_inspect, .init = ctl_suite_init, .fini = ctl_suite_fini);

static dlock_client *client_with_prefix(const char *prefix)
{
    dlock_options o;
    tc_addrs hold;
    dlock_client *c = NULL;
    char err[DLOCK_ERRSTR_LEN];
    tc_options(&o, &hold, rs, NODES);
    o.key_prefix = prefix;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
    return c;
}

Test(ctl_inspect, list_shows_the_holder_token_ttl_and_fence_on_every_node)
{
    dlock_client *c = client_with_prefix("");
    dlock_lock *l = NULL, *other = NULL;
    char *out = NULL, fence[24];
    ctl_row row;

    cr_assert_eq(dlock_acquire(c, "orders:42", 30000, dlock_now_ms() + 2000, &l), DLOCK_OK);
    /* A second resource, released: its fence key stays, its lock does not. */
    cr_assert_eq(dlock_acquire(c, "orders:7", 30000, dlock_now_ms() + 2000, &other), DLOCK_OK);
    cr_assert_eq(dlock_release(c, other), DLOCK_OK);
    snprintf(fence, sizeof fence, "%llu", (unsigned long long)dlock_lock_fence(l));

    cr_assert_eq(ctl_run(&out, "--redis", csv, "list", NULL), 0, "%s", out);
    for (size_t i = 0; i < NODES; i++) {
        cr_assert_eq(ctl_find_row(out, "orders:42", rs[i].addr, &row), 0, "no row for %s in:\n%s",
                     rs[i].addr, out);
        cr_expect_str_eq(row.token, dlock_lock_token(l));
        cr_expect_str_eq(row.fence, fence);
        long long pttl = strtoll(row.pttl, NULL, 10);
        cr_expect(pttl > 20000 && pttl <= 30000, "pttl %s", row.pttl);
    }
    /* Exactly one row per node: neither the fence keys nor the released
     * resource are locks. */
    cr_expect_eq(ctl_count_rows(out, "orders:42"), NODES, "%s", out);
    cr_expect_eq(ctl_count_rows(out, "fence:orders:42"), 0, "%s", out);
    cr_expect_eq(ctl_count_rows(out, "orders:7"), 0, "%s", out);
    cr_expect(strstr(out, "3 lock key(s) on 3/3 nodes") != NULL, "%s", out);
    free(out);

    cr_expect_eq(dlock_release(c, l), DLOCK_OK);
    out = NULL;
    cr_assert_eq(ctl_run(&out, "--redis", csv, "list", NULL), 0);
    cr_expect_eq(ctl_count_rows(out, "orders:42"), 0, "released, still listed:\n%s", out);
    free(out);
    dlock_lock_free(l);
    dlock_lock_free(other);
    dlock_client_free(c);
}

Test(ctl_inspect, list_keeps_to_its_prefix_and_strips_it)
{
    dlock_client *a = client_with_prefix("app1:");
    dlock_client *b = client_with_prefix("app2:");
    dlock_lock *la = NULL, *lb = NULL;
    char *out = NULL;
    ctl_row row;

    cr_assert_eq(dlock_acquire(a, "job", 30000, dlock_now_ms() + 2000, &la), DLOCK_OK);
    cr_assert_eq(dlock_acquire(b, "job", 30000, dlock_now_ms() + 2000, &lb), DLOCK_OK);
    cr_assert_eq(ctl_run(&out, "list", "--prefix", "app1:", "--redis", csv, NULL), 0);
    cr_assert_eq(ctl_find_row(out, "job", rs[0].addr, &row), 0, "%s", out);
    cr_expect_str_eq(row.token, dlock_lock_token(la));
    cr_expect_eq(ctl_count_rows(out, "job"), NODES, "%s", out);
    cr_expect(strstr(out, dlock_lock_token(lb)) == NULL, "app2's lock listed under app1:\n%s", out);
    free(out);
    dlock_release(a, la);
    dlock_release(b, lb);
    dlock_lock_free(la);
    dlock_lock_free(lb);
    dlock_client_free(a);
    dlock_client_free(b);
}

Test(ctl_inspect, list_json_has_the_same_facts)
{
    dlock_client *c = client_with_prefix("");
    dlock_lock *l = NULL;
    char *out = NULL;
    json_error_t jerr;

    cr_assert_eq(dlock_acquire(c, "inv:1", 30000, dlock_now_ms() + 2000, &l), DLOCK_OK);
    cr_assert_eq(ctl_run(&out, "--json", "--redis", csv, "list", NULL), 0, "%s", out);
    json_t *doc = json_loads(out, 0, &jerr);
    cr_assert(doc != NULL, "not JSON (%s): %s", jerr.text, out);
    json_t *locks = json_object_get(doc, "locks");
    cr_assert_eq(json_array_size(locks), NODES, "%s", out);
    for (size_t i = 0; i < NODES; i++) {
        json_t *e = json_array_get(locks, i);
        cr_expect_str_eq(json_string_value(json_object_get(e, "resource")), "inv:1");
        cr_expect_str_eq(json_string_value(json_object_get(e, "token")), dlock_lock_token(l));
        cr_expect_eq((uint64_t)json_integer_value(json_object_get(e, "fence")), dlock_lock_fence(l));
        cr_expect_gt(json_integer_value(json_object_get(e, "pttl_ms")), 0);
    }
    cr_expect_eq(json_array_size(json_object_get(doc, "nodes")), NODES);
    json_decref(doc);
    free(out);
    dlock_release(c, l);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(ctl_inspect, show_names_the_quorum_holder_and_a_free_resource)
{
    dlock_client *c = client_with_prefix("svc:");
    dlock_lock *l = NULL;
    char *out = NULL, want[128];
    ctl_row row;

    cr_assert_eq(dlock_acquire(c, "pay", 30000, dlock_now_ms() + 2000, &l), DLOCK_OK);
    cr_assert_eq(ctl_run(&out, "--redis", csv, "--prefix", "svc:", "show", "pay", NULL), 0, "%s",
                 out);
    snprintf(want, sizeof want, "held by %s on 3/3 nodes (quorum 2)", dlock_lock_token(l));
    cr_expect(strstr(out, want) != NULL, "%s", out);
    cr_expect(strstr(out, "lock key \"svc:lock:pay\", fence key \"svc:fence:pay\"") != NULL, "%s", out);
    cr_assert_eq(ctl_find_row(out, "pay", rs[2].addr, &row), 0, "%s", out);
    cr_expect_eq(strtoull(row.fence, NULL, 10), dlock_lock_fence(l));
    free(out);

    /* Taken off one node by hand: still held on a quorum (2 of 3). */
    char reply[64];
    const char *del[] = {"DEL", "svc:lock:pay"};
    tc_cmd(&rs[0], reply, sizeof reply, 2, del);
    out = NULL;
    cr_assert_eq(ctl_run(&out, "--redis", csv, "--prefix", "svc:", "show", "pay", NULL), 0);
    snprintf(want, sizeof want, "held by %s on 2/3 nodes", dlock_lock_token(l));
    cr_expect(strstr(out, want) != NULL, "%s", out);
    free(out);

    /* And off a second: one node of three is no lock. */
    tc_cmd(&rs[1], reply, sizeof reply, 2, del);
    out = NULL;
    cr_assert_eq(ctl_run(&out, "--redis", csv, "--prefix", "svc:", "show", "pay", NULL), 0);
    cr_expect(strstr(out, "not held: no token on a quorum") != NULL, "%s", out);
    cr_expect(strstr(out, "held by") == NULL, "%s", out);
    free(out);

    /* Its holder finds out on release: no quorum can still hold it. */
    cr_expect_eq(dlock_release(c, l), DLOCK_ERR_LOST);
    out = NULL;
    cr_assert_eq(ctl_run(&out, "--redis", csv, "--prefix", "svc:", "show", "pay", "--json", NULL),
                 0);
    json_t *doc = json_loads(out, 0, NULL);
    cr_assert(doc != NULL, "%s", out);
    cr_expect(json_is_null(json_object_get(doc, "holder")), "%s", out);
    cr_expect_eq(json_integer_value(json_object_get(doc, "held_on")), 0);
    /* The fence outlives the lock: it must keep increasing. */
    json_t *n0 = json_array_get(json_object_get(doc, "nodes"), 0);
    cr_expect_eq((uint64_t)json_integer_value(json_object_get(n0, "fence")), dlock_lock_fence(l));
    json_decref(doc);
    free(out);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* Long resource names keep the table in line: each row's token starts
 * under the header's TOKEN, whatever the name's length. */
Test(ctl_inspect, list_stays_aligned_with_long_names)
{
    const char *res = "a-resource-name-far-longer-than-the-twenty-four-column-default";
    dlock_client *c = client_with_prefix("");
    dlock_lock *l = NULL;
    char *out = NULL;
    const char *head, *row, *tok;
    long col;

    cr_assert_eq(dlock_acquire(c, res, 30000, dlock_now_ms() + 2000, &l), DLOCK_OK);
    cr_assert_eq(ctl_run(&out, "--redis", csv, "list", NULL), 0, "%s", out);
    head = strstr(out, "RESOURCE");
    cr_assert_not_null(head, "%s", out);
    col = strstr(head, "TOKEN") - head;
    row = strstr(out, res);
    cr_assert_not_null(row, "%s", out);
    tok = strstr(row, dlock_lock_token(l));
    cr_assert_not_null(tok, "%s", out);
    cr_assert_eq(tok - row, col, "the token sits at column %ld, TOKEN at %ld:\n%s", (long)(tok - row),
                 col, out);
    free(out);
    cr_expect_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}
