/* page.c - the web page at / rendered by headless Chromium: the DOM shows
 * each coupon's name (HTML-escaped) and its current stock. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "app_util.h"

#define CHROMIUM "/usr/bin/chromium"

const app_suite_plan app_plan = {.db_name = "page.db"};
TestSuite(app_page, .init = app_suite_init, .fini = app_suite_fini, .timeout = 120);

/* The rendered DOM of url, malloc'd. */
static char *dump_dom(const char *url)
{
    char profile[320], profile_arg[340];
    snprintf(profile, sizeof profile, "%s/chromium-profile", g_app.dir);
    snprintf(profile_arg, sizeof profile_arg, "--user-data-dir=%s", profile);
    const char *argv[] = {CHROMIUM,
                          "--headless",
                          "--no-sandbox",
                          "--disable-gpu",
                          "--disable-quic",
                          "--no-first-run",
                          "--disable-background-networking",
                          "--disable-component-update",
                          "--disable-sync",
                          profile_arg,
                          /* Lets a page that fetches its data by script finish
                           * before the DOM is dumped. */
                          "--virtual-time-budget=5000",
                          "--dump-dom",
                          url,
                          NULL};
    char *out = NULL;
    int rc = run_command(argv, 60000, &out);
    cr_assert_eq(rc, 0, "chromium exit %d: %.2000s", rc, out ? out : "");
    cr_assert_not_null(out);
    return out;
}

Test(app_page, page_shows_coupons_and_stock, .timeout = 120)
{
    APP_SETUP_OK();
    if (access(CHROMIUM, X_OK) != 0)
        cr_skip_test(CHROMIUM " is not installed (apt-get install chromium; scripts/test "
                              "installs it): the page test cannot run");
    app_env_up(&g_app, 1, 0, 1, NULL);
    long long a = app_create_coupon(&g_app.srv[0], "Autumn Gala 8317", 4321, 0);
    long long b = app_create_coupon(&g_app.srv[0], "Tag <i>x</i> & \"more\"", 77, 1);
    for (int i = 0; i < 3; i++)
        app_claim_expect(&g_app.srv[0], "POST", a, "viewer", 200, 0, 0);
    app_claim_expect(&g_app.srv[0], "POST", b, "viewer", 200, 0, 0);

    char url[128];
    app_url(url, sizeof url, &g_app.srv[0], "/");
    char *dom = dump_dom(url);
    cr_assert_not_null(strstr(dom, "Autumn Gala 8317"), "name missing from the DOM: %.3000s", dom);
    cr_assert_not_null(strstr(dom, "4318"), "stock 4318 missing from the DOM: %.3000s", dom);
    cr_assert_not_null(strstr(dom, "76"), "stock 76 missing from the DOM: %.3000s", dom);
    /* The name is text, not markup: the serializer shows it escaped, and no
     * <i> element came from it. */
    cr_assert_not_null(strstr(dom, "Tag &lt;i&gt;x&lt;/i&gt; &amp; \"more\""),
                       "escaped name missing from the DOM: %.3000s", dom);
    cr_assert_null(strstr(dom, "<i>x</i>"), "the coupon name was rendered as markup");
    free(dom);
}
