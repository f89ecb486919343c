/* shutdown.c - graceful shutdown under load: SIGTERM while threads hammer
 * claims loses no accepted claim (every 200 has its record, every record
 * had its 200) and the server exits 0. Built twice: on SQLite (app_shutdown)
 * and on PostgreSQL (app_shutdown_pg), where the server's open transactions
 * and connections must end cleanly too. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <curl/curl.h>

#include "app_util.h"

#define SD_THREADS 8
#define SD_MAX_REQS 4000 /* per thread: bounds the loop if SIGTERM never lands */
#define SD_STOCK 1000000

const app_suite_plan app_plan = {
    .db_name = "shutdown.db", .pg = APP_PG, .flags = APP_ENV_CURL, .nredis = 1, .nservers = 1};
/* app_shutdown, or app_shutdown_pg on PostgreSQL (app_store.h). */
#define SHUTDOWN_SUITE APP_SUITE(app_shutdown)
TestSuite(SHUTDOWN_SUITE, .init = app_suite_init, .fini = app_suite_fini, .timeout = 60);

static atomic_int g_ok_total;
static atomic_int g_term_sent;

typedef struct sd_worker {
    int idx;
    long long coupon_id;
    int n_ok;
    int n_busy;        /* 503 1005/1006: refused, nothing written */
    int n_transport;   /* connection refused / reset: only after SIGTERM */
    int n_transport_before;
    int n_other;
    char first_other[512];
} sd_worker;

static void *sd_worker_main(void *arg)
{
    sd_worker *w = arg;
    CURL *h = curl_easy_init();
    if (!h) {
        w->n_other++;
        return NULL;
    }
    app_body b;
    for (int i = 0; i < SD_MAX_REQS; i++) {
        char url[256];
        /* Distinct users, unlimited coupon: every claim that runs succeeds. */
        snprintf(url, sizeof url, "%s/api/v1/coupon/add?coupon_id=%lld&user_id=t%d-%d",
                 g_app.srv[0].url, w->coupon_id, w->idx, i);
        long status = 0;
        int term_before = atomic_load(&g_term_sent);
        CURLcode rc = app_curl_post(h, url, &b, 2000L, &status);
        if (rc != CURLE_OK) {
            if (!term_before && !atomic_load(&g_term_sent))
                w->n_transport_before++;
            w->n_transport++;
            /* The server is gone once connecting is refused. */
            if (atomic_load(&g_term_sent) && rc == CURLE_COULDNT_CONNECT)
                break;
            continue;
        }
        json_t *root = NULL;
        long long c = app_body_code(&b, &root);
        if (status == 200 && c == 0) {
            w->n_ok++;
            atomic_fetch_add(&g_ok_total, 1);
        } else if (status == 503 && (c == 1005 || c == 1006)) {
            w->n_busy++;
        } else {
            if (w->n_other++ == 0)
                snprintf(w->first_other, sizeof w->first_other, "HTTP %ld: %.400s", status,
                         b.data);
        }
        json_decref(root);
    }
    curl_easy_cleanup(h);
    return NULL;
}

Test(SHUTDOWN_SUITE, sigterm_under_load_loses_no_claim, .timeout = 60)
{
    APP_SETUP_OK();
    long long id = app_create_coupon(&g_app.srv[0], "shutdown", SD_STOCK, 0);
    static sd_worker w[SD_THREADS];
    pthread_t th[SD_THREADS];
    memset(w, 0, sizeof w);
    atomic_store(&g_ok_total, 0);
    atomic_store(&g_term_sent, 0);
    for (int i = 0; i < SD_THREADS; i++) {
        w[i].idx = i;
        w[i].coupon_id = id;
        cr_assert_eq(pthread_create(&th[i], NULL, sd_worker_main, &w[i]), 0);
    }
    /* Let the load build up: SIGTERM must land with requests in flight. */
    for (int i = 0; i < 1000 && atomic_load(&g_ok_total) < 200; i++)
        test_sleep_ms(10);
    int ok_at_term = atomic_load(&g_ok_total);
    atomic_store(&g_term_sent, 1);
    int code = -1;
    int stop_rc = server_stop(&g_app.srv[0], SIGTERM, &code);
    for (int i = 0; i < SD_THREADS; i++)
        pthread_join(th[i], NULL);
    cr_assert_eq(stop_rc, 0);
    cr_assert_eq(code, 0, "exit status %d after SIGTERM under load", code);
    cr_assert_geq(ok_at_term, 200, "load never built up (%d claims)", ok_at_term);

    int ok = 0, busy = 0, transport = 0, before = 0, other = 0;
    const char *first_other = "";
    for (int i = 0; i < SD_THREADS; i++) {
        ok += w[i].n_ok;
        busy += w[i].n_busy;
        transport += w[i].n_transport;
        before += w[i].n_transport_before;
        if (w[i].n_other && !other)
            first_other = w[i].first_other;
        other += w[i].n_other;
    }
    cr_log_info("shutdown: %d ok (%d before SIGTERM), %d busy, %d transport errors after", ok,
                ok_at_term, busy, transport);
    cr_assert_eq(before, 0, "%d transport errors before SIGTERM", before);
    cr_assert_eq(other, 0, "%d unexpected replies, first: %s", other, first_other);

    /* No accepted claim lost, no claim written without its 200. */
    app_coupon_state st;
    app_db_state(g_app.db, id, &st);
    cr_assert_eq(st.records, ok, "%lld records but %d replies 200", st.records, ok);
    cr_assert_eq(st.stock + st.records, st.total);
    cr_assert_eq(st.total, SD_STOCK);
}
