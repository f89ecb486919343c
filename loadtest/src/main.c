/* main.c - coupon-loadtest: check the servers and the DB, run the load,
 * audit the coupon again, print the report; exit 0/1/2 as the contract says.
 * main is those steps in order, one function each, then clean_up. */
#include "loadtest.h"

#include <curl/curl.h>
#include <errno.h>
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
        seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)cm_now_ns();
    return seed;
}

/* Everything one invocation owns; clean_up frees whatever the steps made. */
typedef struct lt_main {
    lt_options opt;
    int curl_ready;         /* curl_global_init done */
    lt_target *targets;     /* one per URL; the run borrows them */
    lt_db *db;              /* NULL without --db */
    lt_audit audit;
    lt_worker *workers;
    lt_progress *progress;
    lt_stats *total;        /* the workers' stats merged, warm-up left out */
    lt_stats *warm;         /* the warm-up's, merged */
    lt_timeline *timeline;  /* the workers' timelines merged (--timeline) */
    FILE *timeline_file;    /* opened before the load: a bad path is a usage error */
    int64_t t0, t1;         /* the load's start and end, CLOCK_MONOTONIC */
    int64_t t_measured;     /* where the measured part starts: t0 + --warmup */
} lt_main;

/* 0 to run, 1 when --help was printed, -1 after a message (exit 2). */
static int parse_command_line(lt_main *m, int argc, char **argv)
{
    char err[LT_ERR_MAX] = "";
    if (lt_options_parse(argc, argv, &m->opt, err, sizeof err) != 0) {
        fprintf(stderr, "coupon-loadtest: %s\n", err);
        return -1;
    }
    if (m->opt.version) {
        /* COUPON_VERSION: the one CMake project version (loadtest/CMakeLists.txt). */
        printf("coupon-loadtest %s\n", COUPON_VERSION);
        return fflush(stdout) == 0 ? 1 : -1;
    }
    if (!m->opt.help)
        return 0;
    if (lt_usage(stdout) != 0) {
        fprintf(stderr, "coupon-loadtest: cannot write the usage text\n");
        return -1;
    }
    return 1;
}

/* curl and the parsed URLs. 0, or -1 after a message. */
static int set_up(lt_main *m)
{
    char err[LT_ERR_MAX] = "";
    /* Before any thread exists: curl_global_init is not thread-safe. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "coupon-loadtest: curl_global_init failed\n");
        return -1;
    }
    m->curl_ready = 1;
    m->audit.coupon_id = m->opt.coupon_id;
    m->targets = calloc(m->opt.n_urls, sizeof *m->targets);
    if (m->targets == NULL) {
        fprintf(stderr, "coupon-loadtest: out of memory\n");
        return -1;
    }
    for (size_t i = 0; i < m->opt.n_urls; i++) {
        if (lt_target_parse(m->opt.urls[i], &m->targets[i], err, sizeof err) != 0) {
            fprintf(stderr, "coupon-loadtest: %s\n", err);
            return -1;
        }
    }
    if (m->opt.timeline_path != NULL && !m->opt.audit_only &&
        (m->timeline_file = fopen(m->opt.timeline_path, "w")) == NULL) {
        fprintf(stderr, "coupon-loadtest: --timeline: cannot write %s: %s\n", m->opt.timeline_path,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* The "before" readings of the audit. 0, or -1 after a message. */
static int check_sources(lt_main *m)
{
    char err[LT_ERR_MAX] = "";
    lt_coupon_view probe;
    /* Every source is checked before the first claim, so a wrong port or path
     * is an exit 2 with a reason instead of a run of connection errors. */
    if (m->opt.db_path != NULL) {
        if (lt_db_open(m->opt.db_path, &m->db, err, sizeof err) != 0) {
            fprintf(stderr, "coupon-loadtest: %s\n", err);
            return -1;
        }
        if (lt_db_read(m->db, m->opt.coupon_id, &m->audit.db_before) != 0) {
            fprintf(stderr, "coupon-loadtest: %s\n", m->audit.db_before.err);
            return -1;
        }
        m->audit.have_db = 1;
    }
    for (size_t i = 0; i < m->opt.n_urls; i++) {
        if (lt_coupon_http_read(m->opt.urls[i], m->opt.coupon_id, m->opt.timeout_ms, &probe) != 0) {
            fprintf(stderr, "coupon-loadtest: %s\n", probe.err);
            return -1;
        }
        if (i == 0)
            m->audit.before = probe;
    }
    return 0;
}

/* The shared run state, the signal handlers and the banner. The handlers
 * go in only now: before this, Ctrl-C simply ends a program that has sent
 * nothing. 0, or -1 after a message. */
static int prepare_run(lt_main *m, lt_run *run)
{
    const lt_options *opt = &m->opt;
    run->targets = m->targets;
    atomic_init(&run->next_ticket, 0);
    atomic_init(&run->stop, 0);
    run->opt = opt;
    run->seed = opt->seed != 0 ? opt->seed : random_seed();
    /* Default users are distinct per request AND per run: a second run on the
     * same coupon must not hit the per-user limit with the first run's ids. */
    snprintf(run->user_tag, sizeof run->user_tag, "lt%08" PRIx64 "-", run->seed >> 32);
    g_run = run;
    if (install_signals() != 0) {
        fprintf(stderr, "coupon-loadtest: cannot install signal handlers\n");
        return -1;
    }
    if (!opt->quiet)
        fprintf(stderr,
                "coupon-loadtest: coupon %" PRId64 " (stock %" PRId64 " of %" PRId64 ", issued %" PRId64
                "), %u connections on %u threads, %zu URL(s), route %s\n",
                opt->coupon_id, m->audit.before.stock, m->audit.before.total,
                m->audit.before.issued, opt->connections, opt->threads, opt->n_urls, lt_route_name(opt->route));
    return 0;
}

/* The load itself: workers (and the progress line) from start to join. A
 * progress line that cannot start is not worth stopping the run for. 0, or
 * -1 after a message when no worker could be started. */
static int run_load(lt_main *m, lt_run *run)
{
    char err[LT_ERR_MAX] = "";
    m->t0 = cm_now_ns();
    run->start_ns = m->t0;
    if (m->opt.duration_s > 0)
        run->deadline_ns = m->t0 + (int64_t)(m->opt.duration_s * 1e9);
    if (m->opt.warmup_s > 0)
        run->warmup_end_ns = m->t0 + (int64_t)(m->opt.warmup_s * 1e9);
    m->t_measured = m->t0 + (int64_t)(m->opt.warmup_s * 1e9);
    if (lt_workers_start(run, &m->workers, err, sizeof err) != 0) {
        fprintf(stderr, "coupon-loadtest: %s\n", err);
        return -1;
    }
    if (!m->opt.quiet && lt_progress_start(stderr, m->workers, m->opt.threads, m->opt.requests,
                                           &m->progress, err, sizeof err) != 0)
        fprintf(stderr, "coupon-loadtest: %s (running without progress)\n", err);
    lt_workers_join(m->workers, m->opt.threads);
    m->t1 = cm_now_ns();
    lt_progress_stop(m->progress);
    m->progress = NULL;
    return 0;
}

/* The workers' stats into m->total, naming each worker that failed. 0, or
 * -1 after a message when none could run (nothing to audit against). */
static int merge_stats(lt_main *m)
{
    unsigned failed = 0;
    m->total = malloc(sizeof *m->total);
    m->warm = malloc(sizeof *m->warm);
    if (m->total == NULL || m->warm == NULL ||
        (m->opt.timeline_path != NULL && (m->timeline = lt_timeline_new()) == NULL)) {
        fprintf(stderr, "coupon-loadtest: out of memory\n");
        return -1;
    }
    lt_stats_init(m->total);
    lt_stats_init(m->warm);
    for (unsigned i = 0; i < m->opt.threads; i++) {
        if (m->workers[i].failed) {
            fprintf(stderr, "coupon-loadtest: %s\n", m->workers[i].err);
            failed++;
        }
        lt_stats_merge(m->total, &m->workers[i].stats);
        lt_stats_merge(m->warm, &m->workers[i].warm);
        if (m->timeline != NULL && lt_timeline_merge(m->timeline, m->workers[i].timeline) != 0) {
            fprintf(stderr, "coupon-loadtest: out of memory\n");
            return -1;
        }
    }
    if (failed == m->opt.threads) {
        fprintf(stderr, "coupon-loadtest: no worker could run\n");
        return -1;
    }
    return 0;
}

/* The "after" readings and the verdict. A source that cannot be read is
 * reported and leaves the audit incomplete (exit 2), not aborted: the other
 * sources may still prove an oversell. 0, or -1 when out of memory. */
static int audit_after(lt_main *m)
{
    lt_audit *audit = &m->audit;
    /* The audit proper: every server and the DB, after the load has stopped. */
    audit->after = calloc(m->opt.n_urls, sizeof *audit->after);
    if (audit->after == NULL) {
        fprintf(stderr, "coupon-loadtest: out of memory\n");
        return -1;
    }
    audit->n_after = m->opt.n_urls;
    for (size_t i = 0; i < m->opt.n_urls; i++)
        if (lt_coupon_http_read(m->opt.urls[i], m->opt.coupon_id, m->opt.timeout_ms,
                                &audit->after[i]) != 0)
            fprintf(stderr, "coupon-loadtest: audit: %s\n", audit->after[i].err);
    if (m->db != NULL && lt_db_read(m->db, m->opt.coupon_id, &audit->db_after) != 0)
        fprintf(stderr, "coupon-loadtest: audit: %s\n", audit->db_after.err);
    /* The audit counts every answer, the warm-up's too: a success is a
     * coupon issued whenever it came. */
    audit->successes_seen = m->total->successes + m->warm->successes;
    audit->transport_errors = m->total->errors + m->warm->errors;
    audit->answered = m->total->answered + m->warm->answered;
    for (size_t i = 0; i < m->total->n_codes; i++)
        if (m->total->codes[i].code == 1005)
            audit->lock_refusals += m->total->codes[i].count;
    for (size_t i = 0; i < m->warm->n_codes; i++)
        if (m->warm->codes[i].code == 1005)
            audit->lock_refusals += m->warm->codes[i].count;
    lt_audit_evaluate(audit);
    return 0;
}

/* --timeline: the merged buckets into the file opened at set-up. A write
 * that fails is reported; the run's verdict stands (the audit is the point). */
static void write_timeline(lt_main *m)
{
    char err[LT_ERR_MAX] = "";
    FILE *f = m->timeline_file;
    m->timeline_file = NULL;
    if (f == NULL || m->timeline == NULL) {
        if (f != NULL)
            fclose(f);
        return;
    }
    if (lt_timeline_write_csv(m->timeline, f, err, sizeof err) != 0)
        fprintf(stderr, "coupon-loadtest: --timeline %s: %s\n", m->opt.timeline_path, err);
    if (fclose(f) != 0)
        fprintf(stderr, "coupon-loadtest: --timeline %s: %s\n", m->opt.timeline_path, strerror(errno));
}

/* The report on stdout; returns the exit status the verdict calls for. */
static int report(const lt_main *m)
{
    lt_summary sum;
    int rc;
    memset(&sum, 0, sizeof sum);
    sum.opt = &m->opt;
    sum.stats = m->total;
    sum.warm = m->warm;
    /* A run shorter than its warm-up measured nothing: 0 s, throughput 0. */
    sum.elapsed_s = m->t1 > m->t_measured ? (double)(m->t1 - m->t_measured) / 1e9 : 0.0;
    sum.requests_done = m->total->answered + m->total->errors;
    sum.interrupted = g_interrupted != 0;
    sum.audit = &m->audit;
    if (m->audit.oversold_by > 0)
        rc = LT_EXIT_OVERSOLD;
    else if (m->audit.incomplete)
        rc = LT_EXIT_USAGE;
    else if (m->audit.stuck)
        rc = LT_EXIT_STUCK;
    else
        rc = LT_EXIT_OK;
    /* An unwritable report (closed stdout) must not turn an oversell into
     * exit 2: the verdict goes to stderr and exit 1 stands. */
    if ((m->opt.json ? lt_report_json(stdout, &sum) : lt_report_text(stdout, &sum)) != 0) {
        char verdict[64];
        fprintf(stderr, "coupon-loadtest: cannot write the report (verdict: %s)\n",
                lt_verdict(&m->audit, verdict, sizeof verdict));
        if (rc == LT_EXIT_OK)
            rc = LT_EXIT_USAGE;
    }
    return rc;
}

/* --audit-only: no load, empty stats, so the audit judges the coupon as it
 * stands (the delta check then compares two readings of the same moment). */
static int skip_load(lt_main *m)
{
    m->total = malloc(sizeof *m->total);
    m->warm = malloc(sizeof *m->warm);
    if (m->total == NULL || m->warm == NULL) {
        fprintf(stderr, "coupon-loadtest: out of memory\n");
        return -1;
    }
    lt_stats_init(m->total);
    lt_stats_init(m->warm);
    m->t0 = m->t1 = m->t_measured = cm_now_ns();
    return 0;
}

/* Frees what the steps made, in reverse; every free function takes NULL. */
static void clean_up(lt_main *m)
{
    lt_progress_stop(m->progress);
    lt_workers_free(m->workers, m->opt.threads);
    free(m->targets);
    free(m->total);
    free(m->warm);
    lt_timeline_free(m->timeline);
    if (m->timeline_file != NULL)
        fclose(m->timeline_file);
    lt_audit_free(&m->audit);
    lt_db_close(m->db);
    if (m->curl_ready)
        curl_global_cleanup();
    lt_options_free(&m->opt);
}

int main(int argc, char **argv)
{
    lt_main m;
    lt_run *run = &g_run_storage;
    int rc = LT_EXIT_USAGE;
    memset(&m, 0, sizeof m);

    int pr = parse_command_line(&m, argc, argv);
    if (pr > 0)
        rc = LT_EXIT_OK;
    else if (pr == 0 && m.opt.n_coupons > 0)
        rc = lt_spread_main(&m.opt); /* --coupons: the many-coupon sale (spread.c) */
    else if (pr == 0 && m.opt.audit_only && set_up(&m) == 0 && check_sources(&m) == 0 && skip_load(&m) == 0 &&
             audit_after(&m) == 0)
        rc = report(&m);
    else if (pr == 0 && !m.opt.audit_only && set_up(&m) == 0 && check_sources(&m) == 0 &&
             prepare_run(&m, run) == 0 && run_load(&m, run) == 0 && merge_stats(&m) == 0 &&
             audit_after(&m) == 0) {
        write_timeline(&m);
        rc = report(&m);
    }
    clean_up(&m);
    return rc;
}
