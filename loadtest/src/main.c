/* main.c - coupon-loadtest: check the servers and the DB, run the load,
 * audit the coupon again, print the report; exit 0/1/2 as the contract says. */
#include "loadtest.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* The run the signal handler stops. Static storage, not main's frame: a
 * signal during exit() must not reach a dead stack. */
static lt_run g_run_storage;
static lt_run *g_run;
static volatile sig_atomic_t g_interrupted;

static void on_signal(int sig)
{
    (void)sig;
    g_interrupted = 1;
    /* A lock-free atomic store is async-signal-safe; workers finish the request
     * in flight and stop, so Ctrl-C still gets the report and the audit. */
    if (g_run != NULL)
        atomic_store(&g_run->stop, 1);
}

static int install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* SA_RESETHAND: a second Ctrl-C kills at once if the audit itself hangs. */
    sa.sa_flags = SA_RESETHAND;
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return -1;
    sa.sa_handler = SIG_IGN;
    sa.sa_flags = 0;
    /* A server closing a keep-alive connection must not kill us with SIGPIPE. */
    return sigaction(SIGPIPE, &sa, NULL);
}

static uint64_t random_seed(void)
{
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
        seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)lt_now_ns();
    return seed;
}

int main(int argc, char **argv)
{
    int rc = LT_EXIT_USAGE;
    int curl_ready = 0;
    char err[LT_ERR_MAX] = "";
    lt_options opt;
    lt_db *db = NULL;
    lt_worker *workers = NULL;
    lt_progress *progress = NULL;
    lt_stats *total = NULL;
    lt_audit audit;
    lt_run *run = &g_run_storage;
    lt_summary sum;
    lt_coupon_view probe;
    lt_target *targets = NULL;
    int64_t t0, t1;
    unsigned failed = 0;

    memset(&audit, 0, sizeof audit);
    if (lt_options_parse(argc, argv, &opt, err, sizeof err) != 0) {
        fprintf(stderr, "coupon-loadtest: %s\n", err);
        goto out;
    }
    if (opt.help) {
        lt_usage(stdout);
        rc = LT_EXIT_OK;
        goto out;
    }
    /* Before any thread exists: curl_global_init is not thread-safe. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "coupon-loadtest: curl_global_init failed\n");
        goto out;
    }
    curl_ready = 1;
    audit.coupon_id = opt.coupon_id;
    targets = calloc(opt.n_urls, sizeof *targets);
    if (targets == NULL) {
        fprintf(stderr, "coupon-loadtest: out of memory\n");
        goto out;
    }
    for (size_t i = 0; i < opt.n_urls; i++) {
        if (lt_target_parse(opt.urls[i], &targets[i], err, sizeof err) != 0) {
            fprintf(stderr, "coupon-loadtest: %s\n", err);
            goto out;
        }
    }
    run->targets = targets;

    /* Every source is checked before the first claim, so a wrong port or path
     * is an exit 2 with a reason instead of a run of connection errors. */
    if (opt.db_path != NULL) {
        if (lt_db_open(opt.db_path, &db, err, sizeof err) != 0) {
            fprintf(stderr, "coupon-loadtest: %s\n", err);
            goto out;
        }
        if (lt_db_read(db, opt.coupon_id, &audit.db_before) != 0) {
            fprintf(stderr, "coupon-loadtest: %s\n", audit.db_before.err);
            goto out;
        }
        audit.have_db = 1;
    }
    for (size_t i = 0; i < opt.n_urls; i++) {
        if (lt_coupon_http_read(opt.urls[i], opt.coupon_id, opt.timeout_ms, &probe) != 0) {
            fprintf(stderr, "coupon-loadtest: %s\n", probe.err);
            goto out;
        }
        if (i == 0)
            audit.before = probe;
    }

    atomic_init(&run->next_ticket, 0);
    atomic_init(&run->stop, 0);
    run->opt = &opt;
    run->seed = opt.seed != 0 ? opt.seed : random_seed();
    /* Default users are distinct per request AND per run: a second run on the
     * same coupon must not hit the per-user limit with the first run's ids. */
    snprintf(run->user_tag, sizeof run->user_tag, "lt%08" PRIx64 "-", run->seed >> 32);
    g_run = run;
    if (install_signals() != 0) {
        fprintf(stderr, "coupon-loadtest: cannot install signal handlers\n");
        goto out;
    }
    if (!opt.quiet)
        fprintf(stderr,
                "coupon-loadtest: coupon %" PRId64 " (stock %" PRId64 " of %" PRId64 ", issued %" PRId64
                "), %u connections on %u threads, %zu URL(s)\n",
                opt.coupon_id, audit.before.stock, audit.before.total, audit.before.issued,
                opt.connections, opt.threads, opt.n_urls);

    t0 = lt_now_ns();
    if (opt.duration_s > 0)
        run->deadline_ns = t0 + (int64_t)(opt.duration_s * 1e9);
    if (lt_workers_start(run, &workers, err, sizeof err) != 0) {
        fprintf(stderr, "coupon-loadtest: %s\n", err);
        goto out;
    }
    if (!opt.quiet &&
        lt_progress_start(stderr, workers, opt.threads, opt.requests, &progress, err, sizeof err) != 0)
        fprintf(stderr, "coupon-loadtest: %s (running without progress)\n", err);
    lt_workers_join(workers, opt.threads);
    t1 = lt_now_ns();
    lt_progress_stop(progress);
    progress = NULL;

    total = malloc(sizeof *total);
    if (total == NULL) {
        fprintf(stderr, "coupon-loadtest: out of memory\n");
        goto out;
    }
    lt_stats_init(total);
    for (unsigned i = 0; i < opt.threads; i++) {
        if (workers[i].failed) {
            fprintf(stderr, "coupon-loadtest: %s\n", workers[i].err);
            failed++;
        }
        lt_stats_merge(total, &workers[i].stats);
    }
    if (failed == opt.threads) {
        fprintf(stderr, "coupon-loadtest: no worker could run\n");
        goto out;
    }

    /* The audit proper: every server and the DB, after the load has stopped. */
    audit.after = calloc(opt.n_urls, sizeof *audit.after);
    if (audit.after == NULL) {
        fprintf(stderr, "coupon-loadtest: out of memory\n");
        goto out;
    }
    audit.n_after = opt.n_urls;
    for (size_t i = 0; i < opt.n_urls; i++)
        if (lt_coupon_http_read(opt.urls[i], opt.coupon_id, opt.timeout_ms, &audit.after[i]) != 0)
            fprintf(stderr, "coupon-loadtest: audit: %s\n", audit.after[i].err);
    if (db != NULL && lt_db_read(db, opt.coupon_id, &audit.db_after) != 0)
        fprintf(stderr, "coupon-loadtest: audit: %s\n", audit.db_after.err);
    audit.successes_seen = total->successes;
    audit.transport_errors = total->errors;
    lt_audit_evaluate(&audit);

    memset(&sum, 0, sizeof sum);
    sum.opt = &opt;
    sum.stats = total;
    sum.elapsed_s = (double)(t1 - t0) / 1e9;
    sum.requests_done = total->answered + total->errors;
    sum.interrupted = g_interrupted != 0;
    sum.audit = &audit;
    if (audit.oversold_by > 0)
        rc = LT_EXIT_OVERSOLD;
    else if (audit.incomplete)
        rc = LT_EXIT_USAGE;
    else
        rc = LT_EXIT_OK;
    /* An unwritable report (closed stdout) must not turn an oversell into
     * exit 2: the verdict goes to stderr and exit 1 stands. */
    if ((opt.json ? lt_report_json(stdout, &sum) : lt_report_text(stdout, &sum)) != 0) {
        char verdict[64];
        fprintf(stderr, "coupon-loadtest: cannot write the report (verdict: %s)\n",
                lt_verdict(&audit, verdict, sizeof verdict));
        if (rc == LT_EXIT_OK)
            rc = LT_EXIT_USAGE;
    }
out:
    lt_progress_stop(progress);
    lt_workers_free(workers);
    free(targets);
    free(total);
    lt_audit_free(&audit);
    lt_db_close(db);
    if (curl_ready)
        curl_global_cleanup();
    lt_options_free(&opt);
    return rc;
}
