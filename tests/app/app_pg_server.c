/* app_pg_server.c - linked into the PostgreSQL builds of the app suites
 * (app_*_pg) only: one PostgreSQL server for the whole binary, started by
 * the runner before the first test and stopped after the last (so a suite
 * pays initdb and start-up once, not per test). Criterion runs each test in
 * a worker process that inherits the environment: the port travels in
 * APP_PG_PORT_ENV, and each test makes its own database (app_store.c). */
#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>
#include <criterion/hooks.h>

#include "app_store.h"
#include "procs.h"

static pg_proc app_pg;

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    char bindir[256], port[16];

    (void)set;
    if (pg_bindir(bindir, sizeof bindir) != 0)
        return; /* APP_PG_PORT_ENV unset: each test skips, saying why */
    if (pg_start(&app_pg) != 0) {
        fprintf(stderr, "app_pg_server: PostgreSQL did not start (see above); every test will fail\n");
        (void)setenv(APP_PG_PORT_ENV, "-1", 1);
        return;
    }
    snprintf(port, sizeof port, "%d", app_pg.port);
    if (setenv(APP_PG_PORT_ENV, port, 1) != 0)
        fprintf(stderr, "app_pg_server: setenv failed; every test will fail\n");
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    (void)stats;
    (void)pg_stop(&app_pg);
}
