/* app_store.c - the app suites' store (app_store.h): one PostgreSQL
 * database per test on the server the binary's runner started, and a
 * foreign writer holding either store's write lock. */
#include "app_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include "procs.h"

int app_store_is_pg(const char *db)
{
    return strncmp(db, "postgresql://", 13) == 0 || strncmp(db, "postgres://", 11) == 0;
}

/* The binary's server as a worker sees it: only the port travels (the
 * runner owns the process). 0, 1 (no binaries: skip) or -1. */
static int server_of_worker(pg_proc *p, char *why, size_t why_len)
{
    const char *port = getenv(APP_PG_PORT_ENV);
    char bindir[256];

    memset(p, 0, sizeof *p);
    if (port == NULL) {
        if (pg_bindir(bindir, sizeof bindir) == 0) {
            /* The path cut at 160 bytes: the whole message then fits the
             * callers' 256-byte buffers (gcc -O2 -Wformat-truncation). */
            snprintf(why, why_len, "PostgreSQL binaries found in %.160s, but no server was started "
                                   "(is app_pg_server.c linked in?)", bindir);
            return -1;
        }
        snprintf(why, why_len, "PostgreSQL server binaries not installed (apt-get install postgresql): skipped");
        return 1;
    }
    p->port = atoi(port);
    if (p->port <= 0) {
        snprintf(why, why_len, "the suite's PostgreSQL server did not start (see stderr)");
        return -1;
    }
    snprintf(p->url, sizeof p->url, "postgresql://postgres@127.0.0.1:%d/postgres", p->port);
    return 0;
}

int app_store_pg_create(char *name, size_t name_len, char *url, size_t url_len, char *why, size_t why_len)
{
    static int n; /* tests this worker has run: one at a time, so unique with the pid */
    pg_proc p;
    int rc = server_of_worker(&p, why, why_len);

    name[0] = '\0';
    if (rc != 0)
        return rc;
    snprintf(name, name_len, "app_%d_%d", (int)getpid(), n++);
    if (pg_create_db(&p, name, url, url_len) != 0) {
        snprintf(why, why_len, "CREATE DATABASE %s failed (see stderr)", name);
        name[0] = '\0';
        return -1;
    }
    return 0;
}

void app_store_pg_drop(const char *name)
{
    pg_proc p;
    char why[256];

    /* FORCE in pg_drop_db: a failed test may leave a server's session open. */
    if (name[0] != '\0' && server_of_worker(&p, why, sizeof why) == 0)
        (void)pg_drop_db(&p, name);
}

struct app_store_hold {
    sqlite3 *lite;
    PGconn *pg;
};

static void hold_pg(app_store_hold *h, const char *url)
{
    char conninfo[512];
    PGresult *r;

    /* Bounded connect; no statement timeout: the lock is taken at once
     * (nobody else holds anything stronger than a row lock for long). */
    snprintf(conninfo, sizeof conninfo, "%s%sconnect_timeout=5", url, strchr(url, '?') != NULL ? "&" : "?");
    h->pg = PQconnectdb(conninfo);
    cr_assert(h->pg != NULL && PQstatus(h->pg) == CONNECTION_OK, "foreign writer: connect %s: %s", url,
              h->pg != NULL ? PQerrorMessage(h->pg) : "out of memory");
    /* EXCLUSIVE conflicts with the ROW EXCLUSIVE lock every UPDATE takes,
     * and not with the ACCESS SHARE of a plain SELECT. */
    r = PQexec(h->pg, "BEGIN; LOCK TABLE coupon IN EXCLUSIVE MODE");
    cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "foreign writer: LOCK TABLE: %s", PQresultErrorMessage(r));
    PQclear(r);
}

static void hold_sqlite(app_store_hold *h, const char *path)
{
    int rc = sqlite3_open_v2(path, &h->lite, SQLITE_OPEN_READWRITE, NULL);

    cr_assert_eq(rc, SQLITE_OK, "foreign writer: open %s: %s", path, sqlite3_errstr(rc));
    /* Waits for a server's write in progress, then holds the write lock. */
    sqlite3_busy_timeout(h->lite, 10000);
    rc = sqlite3_exec(h->lite, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    cr_assert_eq(rc, SQLITE_OK, "foreign writer: BEGIN IMMEDIATE: %s", sqlite3_errmsg(h->lite));
}

app_store_hold *app_store_hold_writes(const char *db)
{
    app_store_hold *h = calloc(1, sizeof *h);

    cr_assert_not_null(h, "out of memory");
    if (app_store_is_pg(db))
        hold_pg(h, db);
    else
        hold_sqlite(h, db);
    return h;
}

void app_store_hold_release(app_store_hold *h)
{
    int ok = 1;

    if (h == NULL)
        return;
    if (h->pg != NULL) {
        PGresult *r = PQexec(h->pg, "ROLLBACK");
        ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        PQfinish(h->pg);
    }
    if (h->lite != NULL) {
        ok = sqlite3_exec(h->lite, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK;
        ok = sqlite3_close(h->lite) == SQLITE_OK && ok;
    }
    free(h);
    cr_assert(ok, "foreign writer: ROLLBACK or close failed");
}
