/* recipes.c - the seeds' lock recipes on trial (scripts/trial, which starts
 * real redis-server and coupon-server processes and injects real faults):
 * each recipe shows its flaw under its trigger, and redlock, run under the
 * same trigger in the same trial, shows none. One test per recipe. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "procs.h"

static char *out;
static char trial[512], bin_dir[512];

static void init(void)
{
    cr_assert_eq(test_script_paths("trial", trial, sizeof trial, bin_dir, sizeof bin_dir), 0,
                 "DLOCK_SOURCE_DIR and DLOCK_BINARY_DIR must name the tree and the build");
}

static void fini(void)
{
    free(out);
    out = NULL;
}

TestSuite(app_recipes, .init = init, .fini = fini);

/* The table row of out for strategy ("<strategy> ...") that names trigger. */
static int find_row(const char *strategy, const char *trigger, char *line, size_t len)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s ", strategy);
    return text_line(out, prefix, trigger, line, len);
}

/* issued/stock of a row. */
static void issued_of(const char *line, long *issued, long *stock)
{
    const char *slash = strchr(line, '/');
    /* The seed column ("002/004") comes first for redlock: take the last slash. */
    for (const char *s = slash; s != NULL; s = strchr(s + 1, '/'))
        slash = s;
    cr_assert_not_null(slash, "%s", line);
    const char *start = slash;
    while (start > line && start[-1] != ' ')
        start--;
    cr_assert_eq(sscanf(start, "%ld/%ld", issued, stock), 2, "%s", line);
}

/* Runs the trial for one recipe (and redlock under the same trigger). */
static void run_trial(const char *recipe)
{
    const char *argv[] = {trial, "--no-setup", "--bin-dir", bin_dir, "--strategies", recipe, NULL};
    int st = run_command(argv, 120000, &out);
    cr_assert_eq(st, 0, "trial exit %d:\n%s", st, out);
    /* Every redis-server and coupon-server it started is gone, with its temp dir. */
    char why[512];
    cr_assert_eq(text_left_nothing(out, why, sizeof why), 0, "%s:\n%s", why, out);
}

static void expect_oversold(const char *recipe, const char *trigger)
{
    char line[512];
    long issued = 0, stock = 0, by = 0;
    cr_assert_eq(find_row(recipe, trigger, line, sizeof line), 0, "no row for %s:\n%s", recipe, out);
    const char *v = strstr(line, "OVERSOLD by ");
    cr_assert_not_null(v, "%s did not oversell: %s", recipe, line);
    cr_assert_eq(sscanf(v, "OVERSOLD by %ld", &by), 1, "%s", line);
    cr_assert_gt(by, 0, "%s", line);
    issued_of(line, &issued, &stock);
    cr_assert_gt(issued, stock, "%s", line);
}

static void expect_stuck(const char *recipe, const char *trigger)
{
    char line[512];
    long issued = -1, stock = 0;
    cr_assert_eq(find_row(recipe, trigger, line, sizeof line), 0, "no row for %s:\n%s", recipe, out);
    cr_assert_not_null(strstr(line, " STUCK "), "%s was not stuck: %s", recipe, line);
    issued_of(line, &issued, &stock);
    cr_assert_eq(issued, 0, "%s", line);
}

/* redlock under the same trigger: nothing oversold (and, after a crash, the
 * sale went on once the dead holder's key expired). */
static void expect_redlock_safe(const char *trigger, int must_sell)
{
    char line[512];
    long issued = -1, stock = 0;
    cr_assert_eq(find_row("redlock", trigger, line, sizeof line), 0, "no redlock row for %s:\n%s", trigger, out);
    cr_assert_not_null(strstr(line, " NO OVERSELL "), "%s", line);
    issued_of(line, &issued, &stock);
    cr_assert_leq(issued, stock, "%s", line);
    if (must_sell)
        cr_assert_gt(issued, 0, "%s", line);
}

Test(app_recipes, get_set_oversells_under_plain_concurrency, .timeout = 150)
{
    run_trial("get-set");
    expect_oversold("get-set", "none (concurrency)");
    expect_redlock_safe("none (concurrency)", 1);
}

Test(app_recipes, setnx_is_stuck_after_the_holder_dies, .timeout = 150)
{
    run_trial("setnx");
    expect_stuck("setnx", "holder killed");
    expect_redlock_safe("holder killed", 1);
}

Test(app_recipes, multi_setnx_pexpire_is_stuck_while_claims_come, .timeout = 150)
{
    run_trial("multi-setnx-pexpire");
    expect_stuck("multi-setnx-pexpire", "holder killed");
    expect_redlock_safe("holder killed", 1);
}

Test(app_recipes, setnx_expire_is_stuck_after_dying_between_the_commands, .timeout = 150)
{
    run_trial("setnx-expire");
    expect_stuck("setnx-expire", "holder killed");
    expect_redlock_safe("holder killed", 1);
}

Test(app_recipes, lua_setnx_pexpire_oversells_past_the_ttl, .timeout = 150)
{
    run_trial("lua-setnx-pexpire");
    expect_oversold("lua-setnx-pexpire", "pause past TTL");
    expect_redlock_safe("pause past TTL", 0);
}

Test(app_recipes, del_no_token_oversells_past_the_ttl, .timeout = 150)
{
    run_trial("del-no-token");
    expect_oversold("del-no-token", "pause past TTL");
    expect_redlock_safe("pause past TTL", 0);
}

Test(app_recipes, setnx_getset_oversells_with_a_clock_ahead, .timeout = 150)
{
    run_trial("setnx-getset");
    expect_oversold("setnx-getset", "clock +5 s");
    expect_redlock_safe("clock +5 s", 1);
}

Test(app_recipes, failover_oversells_after_promotion, .timeout = 150)
{
    run_trial("failover");
    expect_oversold("failover", "master killed");
    expect_redlock_safe("master killed", 1);
}

Test(app_recipes, redlock_survives_every_trigger, .timeout = 200)
{
    run_trial("redlock");
    const char *triggers[] = {"none (concurrency)", "holder killed", "pause past TTL", "clock +5 s", "master killed"};
    for (size_t i = 0; i < sizeof triggers / sizeof triggers[0]; i++)
        expect_redlock_safe(triggers[i], 0);
}
