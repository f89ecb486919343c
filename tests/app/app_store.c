/* app_store.c - the PostgreSQL side of the app suites' store (app_store.h):
 * one database per test on the server the binary's runner started. */
#include "app_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
            snprintf(why, why_len, "PostgreSQL binaries found in %s, but no server was started "
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
