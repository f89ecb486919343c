/* app_stress.c - coupon-server under concurrent claims, for the TSan build
 * (the server binary is built with the same sanitizer; a race report makes
 * it exit non-zero at shutdown). Exact outcome: stock claims, no more. */
#include "procs.h"
#include "stress.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int stress_failures;

#define NODES 3
#define THREADS 8
#define PER_THREAD 60
#define STOCK 200

static server_proc servers[2];
static atomic_int ok_replies, soldout_replies, other_replies;

static void *claimer(void *arg)
{
    int t = (int)(intptr_t)arg;

    for (int i = 0; i < PER_THREAD; i++) {
        char url[192];
        http_reply r;

        snprintf(url, sizeof(url), "%s/api/v1/coupon/add?coupon_id=1&user_id=t%du%d",
                 servers[(t + i) % 2].url, t, i);
        if (http_request("POST", url, NULL, NULL, &r) != 0) {
            atomic_fetch_add(&other_replies, 1);
            continue;
        }
        if (r.status == 200)
            atomic_fetch_add(&ok_replies, 1);
        else if (r.status == 409)
            atomic_fetch_add(&soldout_replies, 1);
        else
            atomic_fetch_add(&other_replies, 1);
        http_reply_free(&r);
    }
    return NULL;
}

int main(void)
{
    redis_proc nodes[NODES];
    char dir[256] = "", db[320], redis_csv[256], url[160];
    const char *hdr[] = {"Authorization: Bearer stress-suite-token-9d2b41c7e0f83a65", "Content-Type: application/json", NULL};
    pthread_t th[THREADS];
    http_reply r;
    int status = -1, rc = 2;

    memset(nodes, 0, sizeof(nodes));
    memset(servers, 0, sizeof(servers));
    if (test_mkdtemp(dir, sizeof dir, "app_stress.") != 0 || redis_start_n(nodes, NODES) != 0)
        goto out;
    snprintf(db, sizeof(db), "%s/coupon.db", dir);
    redis_addrs_csv(nodes, NODES, redis_csv, sizeof(redis_csv));
    {
        const char *args[] = {"--db", db, "--redis", redis_csv, "--admin-token", "stress-suite-token-9d2b41c7e0f83a65",
                              "--threads", "4", "--lock-wait", "5000", NULL};
        if (server_start(&servers[0], args) != 0 || server_start(&servers[1], args) != 0)
            goto out;
    }
    snprintf(url, sizeof(url), "%s/api/v1/admin/coupon", servers[0].url);
    if (http_request("POST", url, "{\"name\":\"stress\",\"stock\":200,\"per_user_limit\":1}", hdr,
                     &r) != 0)
        goto out;
    CHECK(r.status == 201, "create coupon: HTTP %ld %s", r.status, r.body ? r.body : "");
    http_reply_free(&r);

    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&th[i], NULL, claimer, (void *)(intptr_t)i) == 0, "pthread_create");
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    CHECK(atomic_load(&ok_replies) == STOCK, "%d claims succeeded, stock was %d",
          atomic_load(&ok_replies), STOCK);
    CHECK(atomic_load(&soldout_replies) == THREADS * PER_THREAD - STOCK, "%d sold-out replies",
          atomic_load(&soldout_replies));
    CHECK(atomic_load(&other_replies) == 0, "%d other replies", atomic_load(&other_replies));

    for (int i = 0; i < 2; i++) {
        CHECK(server_stop(&servers[i], SIGTERM, &status) == 0 && status == 0,
              "server %d exit status %d (a sanitizer report exits non-zero)", i, status);
    }
    rc = stress_failures ? 1 : 0;
    printf("app_stress: %s (%d ok, %d sold out, %d other)\n", rc ? "FAIL" : "ok",
           atomic_load(&ok_replies), atomic_load(&soldout_replies), atomic_load(&other_replies));
out:
    for (int i = 0; i < 2; i++)
        if (servers[i].pid > 0)
            server_stop(&servers[i], SIGKILL, NULL);
    redis_stop_n(nodes, NODES);
    test_rmtree(dir);
    return rc;
}
