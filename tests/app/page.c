/* page.c - the flash-sale page at / as headless Chromium renders it after its
 * script ran:
 *   - per coupon stock and issued, the claims/s and 503s/s chart and
 *     numbers computed from /metrics, the lock nodes up from /healthz, the
 *     fence refusals;
 *   - names from admins shown as text;
 *   - "unavailable" (not a blank page) when the endpoints cannot be
 *     reached;
 *   - and a screenshot. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "app_util.h"
#include "page_pacer.h"

#define CHROMIUM "/usr/bin/chromium"

const app_suite_plan app_plan = {.db_name = "page.db", .flags = APP_ENV_CURL};
TestSuite(app_page, .init = app_suite_init, .fini = app_suite_fini, .timeout = 120);

static void need_chromium(void)
{
    if (access(CHROMIUM, X_OK) != 0)
        cr_skip_test(CHROMIUM " is not installed (DLOCK_TEST_BROWSER=1 ./scripts/test installs it, "
                              "as CI does): the page test cannot run");
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

/* Makes every claim of coupon id refused by the store's fence (503 / 1010).
 * The row has seen a fence above 2^53, more than the lock service will ever
 * hand out. The server's self-healing (dlock_fence_raise) refuses to raise
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
    /* One of three lock nodes down: Redlock still has its quorum. The page
     * shows the health prober's last round (every 500 ms), so wait until the
     * server has seen the node go (at most 5 s) before loading it. */
    cr_assert_eq(redis_stop(&g_app.redis[2]), 0);
    long long up = -1;
    for (int64_t until = test_now_ms() + 5000; test_now_ms() < until; test_sleep_ms(50))
        if ((up = app_metric(&g_app.srv[0], "coupon_lock_nodes_up")) == 2)
            break;
    cr_assert_eq(up, 2, "the server still counts %lld lock nodes up 5 s after one stopped", up);

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

/* The claims the relay makes before each /metrics it forwards (see
 * page_pacer.h): one accepted claim of the open coupon and one fence
 * refusal of the fenced-off one, so that between any two of the page's
 * samples both counters rose. Runs on the relay's threads: no asserts,
 * what went wrong is kept for the test to assert on. */
typedef struct paced_claims {
    char ok_url[256];      /* claims answered 200 / 0 */
    char fenced_url[256];  /* claims answered 503 / 1010 (the fence) */
    int metrics_polls;     /* /metrics requests the relay forwarded */
    int ok, fenced;        /* claims that got their wanted answer */
    int retried;           /* 503 / 1005 or 1006 answers, retried */
    char unexpected[256];  /* the first answer that was neither; "" when none */
} paced_claims;

/* POSTs url until it answers want_status / want_code. A loaded machine
 * may leave a Redis round past the server's --redis-timeout-ms or the
 * lock past --lock-wait: the contract's 503 / 1006 and 503 / 1005, right
 * answers that this suite (about the page, not the lock) retries, bounded.
 * 1 when the wanted answer came. */
static int claim_until(paced_claims *pc, const char *url, long want_status, long long want_code)
{
    int64_t deadline = test_now_ms() + 20000;
    while (test_now_ms() < deadline) {
        http_reply r;
        if (http_request("POST", url, "", NULL, &r) != 0) {
            snprintf(pc->unexpected, sizeof pc->unexpected, "POST %s: no answer", url);
            return 0;
        }
        json_t *root = r.body != NULL ? json_loads(r.body, 0, NULL) : NULL;
        json_t *jc = root != NULL ? json_object_get(root, "code") : NULL;
        long long code = json_is_integer(jc) ? json_integer_value(jc) : -1;
        long status = r.status;
        json_decref(root);
        http_reply_free(&r);
        if (status == want_status && code == want_code)
            return 1;
        if (status == 503 && (code == 1005 || code == 1006)) {
            pc->retried++;
            test_sleep_ms(20);
            continue;
        }
        snprintf(pc->unexpected, sizeof pc->unexpected, "POST %s: HTTP %ld code %lld, want %ld / %lld", url,
                 status, code, want_status, want_code);
        return 0;
    }
    snprintf(pc->unexpected, sizeof pc->unexpected, "POST %s: no %ld / %lld within 20 s", url, want_status,
             want_code);
    return 0;
}

static void claims_before_metrics(void *user)
{
    paced_claims *pc = user;
    pc->metrics_polls++;
    if (pc->unexpected[0] != '\0')
        return;
    pc->ok += claim_until(pc, pc->ok_url, 200, 0);
    if (pc->unexpected[0] == '\0')
        pc->fenced += claim_until(pc, pc->fenced_url, 503, 1010);
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

    /* The page through the relay: every poll's /metrics comes after one
     * accepted claim and one fence refusal. */
    paced_claims pc;
    memset(&pc, 0, sizeof pc);
    app_url(pc.ok_url, sizeof pc.ok_url, &g_app.srv[0], "/api/v1/coupon/add?coupon_id=%lld&user_id=busy", a);
    app_url(pc.fenced_url, sizeof pc.fenced_url, &g_app.srv[0], "/api/v1/coupon/add?coupon_id=%lld&user_id=busy",
            f);
    page_pacer *relay = NULL;
    char url[128];
    cr_assert_eq(page_pacer_start(g_app.srv[0].url, claims_before_metrics, &pc, &relay, url, sizeof url), 0);
    char *dom = dump_dom_long(url);
    page_pacer_stop(relay);
    cr_log_info("%d polls of /metrics, %d claims accepted, %d refused by the fence, %d retried (503 1005/1006)",
                pc.metrics_polls, pc.ok, pc.fenced, pc.retried);
    cr_assert_str_empty(pc.unexpected, "%s", pc.unexpected);
    cr_assert_geq(pc.metrics_polls, 2, "only %d polls of /metrics: %.4000s", pc.metrics_polls, dom);
    cr_assert_eq(pc.ok, pc.metrics_polls);
    cr_assert_eq(pc.fenced, pc.metrics_polls);

    /* Every interval between two samples held one claim of each kind, so
     * the peak of each rate is above zero whatever the machine's speed;
     * the page's clock is Chromium's virtual one, so the value itself is
     * not asserted. The totals are the last sample's: never more than the
     * claims made, and at least the first poll's one. */
    char text[64];
    double peak_ok = strtod(text_of(dom, "peak-ok", text, sizeof text), NULL);
    cr_assert_gt(peak_ok, 0.0, "peak claims/s %s after %d paced claims: %.4000s", text, pc.ok, dom);
    double peak_503 = strtod(text_of(dom, "peak-503", text, sizeof text), NULL);
    cr_assert_gt(peak_503, 0.0, "peak 503s/s %s after %d paced refusals: %.4000s", text, pc.fenced, dom);
    long long total_ok = strtoll(text_of(dom, "total-ok", text, sizeof text), NULL, 10);
    cr_assert(total_ok > 0 && total_ok <= pc.ok, "total-ok %lld, claims made %d", total_ok, pc.ok);
    long long fences = strtoll(text_of(dom, "fence-total", text, sizeof text), NULL, 10);
    cr_assert(fences > 0 && fences <= pc.fenced, "fence-total %lld, refusals made %d", fences, pc.fenced);
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
