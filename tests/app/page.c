/* page.c - the flash-sale page at / as headless Chromium renders it after its
 * script ran: per coupon stock and issued, the claims/s and 503s/s chart and
 * numbers computed from /metrics, the lock nodes up from /healthz, the fence
 * refusals; names from admins shown as text; "unavailable" (not a blank
 * page) when the endpoints cannot be reached; and a screenshot. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "app_util.h"

#define CHROMIUM "/usr/bin/chromium"

const app_suite_plan app_plan = {.db_name = "page.db", .flags = APP_ENV_CURL};
TestSuite(app_page, .init = app_suite_init, .fini = app_suite_fini, .timeout = 120);

static void need_chromium(void)
{
    if (access(CHROMIUM, X_OK) != 0)
        cr_skip_test(CHROMIUM " is not installed (apt-get install chromium; scripts/test "
                              "installs it): the page test cannot run");
}

/* Runs headless Chromium on url with the output option (DOM or screenshot)
 * and the virtual-time budget (--virtual-time-budget=MS: the page's script
 * polls once a virtual second until it is spent, then the DOM is dumped or
 * the screenshot taken); returns what it printed, malloc'd. */
static char *run_chromium_budget(const char *url, const char *output_opt, const char *budget_opt)
{
    char profile_arg[340];
    snprintf(profile_arg, sizeof profile_arg, "--user-data-dir=%s/chromium-profile", g_app.dir);
    const char *argv[] = {CHROMIUM,
                          "--headless",
                          "--no-sandbox",
                          "--disable-gpu",
                          "--disable-quic",
                          "--no-first-run",
                          "--disable-background-networking",
                          "--disable-component-update",
                          "--disable-sync",
                          "--hide-scrollbars",
                          "--window-size=1000,700",
                          profile_arg,
                          budget_opt,
                          output_opt,
                          url,
                          NULL};
    char *out = NULL;
    int rc = run_command(argv, 60000, &out);
    cr_assert_eq(rc, 0, "chromium exit %d: %.2000s", rc, out ? out : "");
    cr_assert_not_null(out);
    return out;
}

/* About five polls. */
static char *run_chromium(const char *url, const char *output_opt)
{
    return run_chromium_budget(url, output_opt, "--virtual-time-budget=5000");
}

static char *dump_dom(const char *url)
{
    return run_chromium(url, "--dump-dom");
}

/* The text of the element with id="id" in the dumped DOM (up to its first
 * child tag), into out; asserts the element is there. */
static const char *text_of(const char *dom, const char *id, char *out, size_t len)
{
    char needle[96];
    snprintf(needle, sizeof needle, "id=\"%s\"", id);
    const char *at = strstr(dom, needle);
    cr_assert_not_null(at, "no element %s in the DOM: %.4000s", needle, dom);
    const char *start = strchr(at, '>');
    cr_assert_not_null(start);
    start++;
    size_t n = strcspn(start, "<");
    cr_assert_lt(n, len, "element %s text too long", id);
    memcpy(out, start, n);
    out[n] = '\0';
    return out;
}

static void expect_text(const char *dom, const char *id, const char *want)
{
    char got[256];
    cr_assert_str_eq(text_of(dom, id, got, sizeof got), want, "#%s shows \"%s\", want \"%s\"", id, got, want);
}

/* The row of coupon id as the script builds it: name, stock, issued, total. */
static void expect_row(const char *dom, long long id, const char *name_html, long long stock, long long issued,
                       long long total)
{
    char row[512];
    snprintf(row, sizeof row,
             "<td class=\"id\">%lld</td><td class=\"name\">%s</td><td class=\"stock\">%lld</td>"
             "<td class=\"issued\">%lld</td><td class=\"total\">%lld</td>",
             id, name_html, stock, issued, total);
    cr_assert_not_null(strstr(dom, row), "row missing: %s\nDOM: %.4000s", row, dom);
}

/* Makes every claim of coupon id refused by the store's fence (503 / 1010):
 * the row has seen a fence above 2^53, more than the lock service will ever
 * hand out; the server's self-healing (dlock_fence_raise) refuses to raise
 * the counters that far, so the refusals stand. */
static void fence_off_coupon(long long id)
{
    app_db_exec(g_app.db, "UPDATE coupon SET last_fence=9007199254740993 WHERE id=%lld", id);
}

/* The chart line id: one point per rate, at least two (the virtual-time
 * budget holds about five polls, and virtual time waits for the fetches),
 * each inside the plot (x 44..592) and on its zero line (y 142). */
static void expect_flat_line(const char *dom, const char *id)
{
    char needle[64];
    snprintf(needle, sizeof needle, "<polyline id=\"%s\" points=\"", id);
    const char *p = strstr(dom, needle);
    cr_assert_not_null(p, "no %s in the chart: %.4000s", id, dom);
    p += strlen(needle);
    int points = 0;
    for (double x, y; sscanf(p, "%lf,%lf", &x, &y) == 2; points++) {
        cr_assert(x >= 44.0 && x <= 592.0 && y == 142.0, "%s point %g,%g off the zero line", id, x, y);
        p += strcspn(p, " \"");
        if (*p == ' ')
            p++;
    }
    cr_assert_geq(points, 2, "%s has %d points: %.200s", id, points, p);
}

Test(app_page, page_shows_coupons_rates_nodes_and_fence_refusals, .timeout = 120)
{
    APP_SETUP_OK();
    need_chromium();
    app_env_up(&g_app, 3, 0, 1, NULL);
    long long a = app_create_coupon(&g_app.srv[0], "Autumn Gala 8317", 4321, 0);
    long long b = app_create_coupon(&g_app.srv[0], "Tag <i>x</i> & \"more\"", 77, 1);
    long long f = app_create_coupon(&g_app.srv[0], "fenced", 10, 0);
    for (int i = 0; i < 3; i++)
        app_claim_expect(&g_app.srv[0], "POST", a, "viewer", 200, 0, 0);
    app_claim_expect(&g_app.srv[0], "POST", b, "viewer", 200, 0, 0);
    fence_off_coupon(f);
    app_claim_expect(&g_app.srv[0], "POST", f, "viewer", 503, 1010, APP_RETRY_AFTER);
    app_claim_expect(&g_app.srv[0], "POST", f, "viewer", 503, 1010, APP_RETRY_AFTER);
    /* One of three lock nodes down: Redlock still has its quorum. */
    cr_assert_eq(redis_stop(&g_app.redis[2]), 0);

    char url[128];
    app_url(url, sizeof url, &g_app.srv[0], "/");
    char *dom = dump_dom(url);
    /* The table was rebuilt by the script from /api/v1/coupon. */
    cr_assert_not_null(strstr(dom, "<tbody data-source=\"live\">"), "the script did not refresh the table: %.4000s",
                       dom);
    expect_row(dom, a, "Autumn Gala 8317", 4318, 3, 4321);
    expect_row(dom, b, "Tag &lt;i&gt;x&lt;/i&gt; &amp; \"more\"", 76, 1, 77);
    expect_row(dom, f, "fenced", 10, 0, 10);
    cr_assert_null(strstr(dom, "<i>x</i>"), "the coupon name was rendered as markup");

    /* The counters, exactly; the claims all came before the page loaded, so
     * every rate over its minute is exactly zero. */
    expect_text(dom, "total-ok", "4");
    expect_text(dom, "total-503", "2");
    expect_text(dom, "fence-total", "2");
    expect_text(dom, "rate-ok", "0.0");
    expect_text(dom, "rate-503", "0.0");
    expect_text(dom, "peak-ok", "0.0");
    expect_text(dom, "peak-503", "0.0");
    cr_assert_not_null(strstr(dom, "<svg id=\"chart\""), "no chart: %.4000s", dom);
    expect_flat_line(dom, "line-ok");
    expect_flat_line(dom, "line-503");
    char summary[256];
    text_of(dom, "chart-summary", summary, sizeof summary);
    cr_assert_not_null(strstr(summary, "claims peaked at 0.0/s"), "chart summary: %s", summary);

    expect_text(dom, "nodes-up", "2 of 3 up");
    /* 2 of 3: still a quorum, but none to spare: /healthz says degraded. */
    expect_text(dom, "lock-state", "degraded");
    expect_text(dom, "db-state", "ok");
    expect_text(dom, "strategy", "redlock");
    cr_assert_not_null(strstr(dom, "<span class=\"dot up\"></span><span class=\"dot up\"></span>"
                                   "<span class=\"dot\"></span></p>"),
                       "node dots: %.4000s", dom);
    free(dom);
}

/* A background claimer: claims url over and over, each answer expected to be
 * want (200 accepted, or 503 for a fenced-off coupon), until told to stop,
 * so the counters grow while the page polls. */
typedef struct claimer {
    char url[256];
    long want;
    atomic_int stop;
    long long done, failed;
} claimer;

static void *claim_loop(void *arg)
{
    claimer *c = arg;
    CURL *h = curl_easy_init();
    if (h == NULL) {
        c->failed++;
        return NULL;
    }
    /* Bounded: 90 s at most even if nobody says stop (Chromium's own
     * timeout is 60 s). */
    int64_t deadline = test_now_ms() + 90000;
    while (!atomic_load(&c->stop) && test_now_ms() < deadline) {
        app_body b;
        long status = 0;
        if (app_curl_post(h, c->url, &b, 2000L, &status) != CURLE_OK || status != c->want)
            c->failed++;
        else
            c->done++;
    }
    curl_easy_cleanup(h);
    return NULL;
}

/* Runs Chromium on url, about ten polls' worth of virtual time. */
static char *dump_dom_long(const char *url)
{
    return run_chromium_budget(url, "--dump-dom", "--virtual-time-budget=10000");
}

Test(app_page, rates_follow_claims_while_the_page_polls, .timeout = 120)
{
    APP_SETUP_OK();
    need_chromium();
    app_env_up(&g_app, 1, 0, 1, NULL);
    long long a = app_create_coupon(&g_app.srv[0], "busy", 1000000, 0);
    long long f = app_create_coupon(&g_app.srv[0], "fenced", 10, 0);
    fence_off_coupon(f);

    /* One thread each, so neither kind waits for the other. */
    claimer c[2];
    memset(c, 0, sizeof c);
    app_url(c[0].url, sizeof c[0].url, &g_app.srv[0], "/api/v1/coupon/add?coupon_id=%lld&user_id=busy", a);
    c[0].want = 200;
    app_url(c[1].url, sizeof c[1].url, &g_app.srv[0], "/api/v1/coupon/add?coupon_id=%lld&user_id=busy", f);
    c[1].want = 503;
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, claim_loop, &c[i]), 0);
    char url[128];
    app_url(url, sizeof url, &g_app.srv[0], "/");
    char *dom = dump_dom_long(url);
    for (int i = 0; i < 2; i++) {
        atomic_store(&c[i].stop, 1);
        pthread_join(th[i], NULL);
        cr_assert_eq(c[i].failed, 0, "%lld claims did not get HTTP %ld", c[i].failed, c[i].want);
        cr_assert_gt(c[i].done, 0);
    }

    /* The page's clock is Chromium's virtual one (it runs ahead while the
     * page waits on a timer), so the exact rate depends on scheduling; what
     * must hold is that claims made between two polls show as a positive
     * rate of each kind, and the totals never run ahead of the claims made. */
    char text[64];
    double peak_ok = strtod(text_of(dom, "peak-ok", text, sizeof text), NULL);
    cr_assert_gt(peak_ok, 0.0, "peak claims/s %s with claims running: %.4000s", text, dom);
    double peak_503 = strtod(text_of(dom, "peak-503", text, sizeof text), NULL);
    cr_assert_gt(peak_503, 0.0, "peak 503s/s %s with refusals running: %.4000s", text, dom);
    long long total_ok = strtoll(text_of(dom, "total-ok", text, sizeof text), NULL, 10);
    cr_assert(total_ok > 0 && total_ok <= c[0].done, "total-ok %lld, claims made %lld", total_ok, c[0].done);
    long long fences = strtoll(text_of(dom, "fence-total", text, sizeof text), NULL, 10);
    cr_assert(fences > 0 && fences <= c[1].done, "fence-total %lld, refusals made %lld", fences, c[1].done);
    free(dom);
}

Test(app_page, coupon_name_with_script_is_text, .timeout = 120)
{
    APP_SETUP_OK();
    need_chromium();
    app_env_up(&g_app, 1, 0, 1, NULL);
    long long id = app_create_coupon(&g_app.srv[0],
                                     "<script>document.title='pwned'</script><img src=x id=injected>", 5, 1);
    app_claim_expect(&g_app.srv[0], "POST", id, "viewer", 200, 0, 0);

    /* The server's own rendering escapes it... */
    http_reply r;
    app_request(&g_app.srv[0], "GET", "/", NULL, NULL, &r);
    cr_assert_eq(r.status, 200);
    cr_assert_not_null(strstr(r.body, "&lt;script&gt;document.title="), "server-side name not escaped");
    cr_assert_null(strstr(r.body, "<script>document.title"), "server-side name rendered as markup");
    http_reply_free(&r);

    /* ...and so does the script's refresh of the table. */
    char url[128];
    app_url(url, sizeof url, &g_app.srv[0], "/");
    char *dom = dump_dom(url);
    cr_assert_not_null(strstr(dom, "<tbody data-source=\"live\">"), "the script did not refresh: %.4000s", dom);
    expect_row(dom, id, "&lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;img src=x id=injected&gt;", 4, 1,
               5);
    cr_assert_null(strstr(dom, "id=\"injected\""), "the name made an element");
    cr_assert_not_null(strstr(dom, "<title>Flash sale - coupon-server</title>"), "the name's script ran");
    free(dom);
}

Test(app_page, page_says_unavailable_when_endpoints_fail, .timeout = 120)
{
    APP_SETUP_OK();
    need_chromium();
    app_env_up(&g_app, 1, 0, 1, NULL);
    app_create_coupon(&g_app.srv[0], "Still Listed 5521", 9, 1);

    /* The page as served, opened from a file: every fetch of its endpoints
     * fails, as when the server went away after the page loaded. */
    http_reply r;
    app_request(&g_app.srv[0], "GET", "/", NULL, NULL, &r);
    cr_assert_eq(r.status, 200);
    char path[400], url[420];
    snprintf(path, sizeof path, "%s/page.html", g_app.dir);
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    cr_assert_eq(fwrite(r.body, 1, r.body_len, fp), r.body_len);
    cr_assert_eq(fclose(fp), 0);
    http_reply_free(&r);
    snprintf(url, sizeof url, "file://%s", path);

    char *dom = dump_dom(url);
    /* Not blank: the last known table stays, every live part says so. */
    cr_assert_not_null(strstr(dom, "Still Listed 5521"), "the table went away: %.4000s", dom);
    char status[256];
    text_of(dom, "status", status, sizeof status);
    cr_assert_not_null(strstr(status, "Unavailable: coupons, metrics, health"), "status: %s", status);
    for (const char *const *id = (const char *const[]){"rate-ok", "rate-503", "peak-ok", "total-ok", "fence-total",
                                                         "nodes-up", "lock-state", "db-state", NULL};
         *id != NULL; id++)
        expect_text(dom, *id, "unavailable");
    cr_assert_not_null(strstr(dom, "<dd id=\"nodes-up\" data-state=\"unavailable\">"), "%.4000s", dom);
    free(dom);
}

/* A PNG: the 8-byte signature, then the IHDR chunk with width and height
 * (big-endian) at bytes 16 and 20. */
static const unsigned char PNG_SIGNATURE[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
#define SCREENSHOT_MIN_BYTES 10000

static unsigned long be32(const unsigned char *p)
{
    return (unsigned long)p[0] << 24 | (unsigned long)p[1] << 16 | (unsigned long)p[2] << 8 | p[3];
}

Test(app_page, screenshot_is_a_png_of_the_window, .timeout = 120)
{
    APP_SETUP_OK();
    need_chromium();
    app_env_up(&g_app, 1, 0, 1, NULL);
    long long id = app_create_coupon(&g_app.srv[0], "Screenshot Sale", 500, 0);
    for (int i = 0; i < 5; i++)
        app_claim_expect(&g_app.srv[0], "POST", id, "viewer", 200, 0, 0);

    char file[400], opt[420], url[128];
    snprintf(file, sizeof file, "%s/page.png", g_app.dir);
    snprintf(opt, sizeof opt, "--screenshot=%s", file);
    app_url(url, sizeof url, &g_app.srv[0], "/");
    free(run_chromium(url, opt));

    FILE *fp = fopen(file, "rb");
    cr_assert_not_null(fp, "chromium wrote no screenshot at %s", file);
    static unsigned char png[4 << 20];
    size_t n = fread(png, 1, sizeof png, fp);
    cr_assert_eq(fclose(fp), 0);
    cr_assert_geq(n, 24, "screenshot of %zu bytes", n);
    cr_assert_eq(memcmp(png, PNG_SIGNATURE, sizeof PNG_SIGNATURE), 0, "not a PNG");
    cr_assert_eq(memcmp(png + 12, "IHDR", 4), 0, "PNG without IHDR first");
    cr_assert_eq(be32(png + 16), 1000, "width %lu", be32(png + 16));
    cr_assert_eq(be32(png + 20), 700, "height %lu", be32(png + 20));
    /* A blank 1000x700 page compresses to a few KB; text, table and chart
     * take more. */
    cr_assert_geq(n, SCREENSHOT_MIN_BYTES, "screenshot of only %zu bytes: a blank page?", n);
}
