/* pg/open.c - opening a db_store on PostgreSQL: the URL checked by libpq,
 * the session settings that bound every statement, the schema, the
 * statement table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"

/* The URL's own value of keyword (parsed by libpq, as it will connect), or
 * NULL; copied into buf. -1 when the URL does not parse (detail in err). */
static int url_keyword(const char *url, const char *keyword, char *buf, size_t len, const char **found,
                       char *err, size_t errlen)
{
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(url, &perr);

    *found = NULL;
    if (opts == NULL) {
        size_t n = strcspn(perr != NULL ? perr : "out of memory", "\n");
        (void)snprintf(err, errlen, "invalid URL: %.*s", (int)n, perr != NULL ? perr : "out of memory");
        PQfreemem(perr);
        return -1;
    }
    for (PQconninfoOption *o = opts; o->keyword != NULL; o++) {
        if (strcmp(o->keyword, keyword) == 0 && o->val != NULL && o->val[0] != '\0') {
            (void)snprintf(buf, len, "%s", o->val);
            *found = buf;
        }
    }
    PQconninfoFree(opts);
    return 0;
}

/* The session settings. Every statement and every lock wait is bounded by
 * the store's timeout on the server too: the error arrives before our
 * client deadline, and the connection survives it. A session that sits in
 * an open transaction (a coupon-server stopped with SIGSTOP between its
 * UPDATE and its COMMIT) is ended by the server instead of holding the
 * coupon's row lock forever. client_min_messages: libpq prints notices on stderr
 * ("relation ... already exists, skipping" from the schema's IF NOT
 * EXISTS at every start). The URL's own options come last, so they win. */
static char *session_options(int timeout_ms, int readonly, const char *url_options)
{
    int idle_ms = timeout_ms > 500 ? timeout_ms * 2 : 1000;
    size_t len = 256 + (url_options != NULL ? strlen(url_options) : 0);
    char *s = malloc(len);

    if (s == NULL)
        return NULL;
    (void)snprintf(s, len,
                   "-c statement_timeout=%d -c lock_timeout=%d -c idle_in_transaction_session_timeout=%d "
                   "-c client_min_messages=warning%s%s%s",
                   timeout_ms, timeout_ms, idle_ms, readonly ? " -c default_transaction_read_only=on" : "",
                   url_options != NULL ? " " : "", url_options != NULL ? url_options : "");
    return s;
}

static void pg_close(db_store *db);

db_status dbpg_open(const char *url, int timeout_ms, int readonly, db_store **out, char *errbuf, size_t errbuf_len)
{
    db_status res = DB_ERROR;
    db_store *db = NULL;
    char reason[256] = "out of memory";
    char buf[512];
    const char *url_options = NULL, *url_timeout = NULL;
    char *options = NULL;

    if (out != NULL)
        *out = NULL;
    if (errbuf != NULL && errbuf_len > 0)
        errbuf[0] = '\0';
    if (out == NULL || timeout_ms < 0) {
        (void)snprintf(reason, sizeof reason, "invalid argument (timeout must be >= 0)");
        res = DB_INVALID;
        goto out;
    }
    /* statement_timeout = 0 would mean "no limit" to PostgreSQL; 0 here
     * means "do not wait", as SQLite's busy timeout 0 does. */
    if (timeout_ms == 0)
        timeout_ms = 1;
    if (url_keyword(url, "options", buf, sizeof buf, &url_options, reason, sizeof reason) != 0) {
        res = DB_INVALID;
        goto out;
    }
    options = session_options(timeout_ms, readonly, url_options);
    if (options == NULL)
        goto out;
    db = calloc(1, sizeof *db);
    if (db == NULL)
        goto out;
    db->ops = &dbi_pg_ops;
    db->readonly = readonly;
    db->pg = calloc(1, sizeof *db->pg);
    if (db->pg == NULL)
        goto out;
    db->pg->options = options;
    options = NULL;
    db->pg->timeout_ms = timeout_ms;
    db->pg->readonly = readonly;
    db->pg->conninfo = strdup(url);
    if (db->pg->conninfo == NULL)
        goto out;
    if (url_keyword(url, "connect_timeout", buf, sizeof buf, &url_timeout, reason, sizeof reason) != 0) {
        res = DB_INVALID;
        goto out;
    }
    /* libpq counts whole seconds and treats 1 as 2; the URL's own wins. */
    if (url_timeout == NULL)
        (void)snprintf(db->pg->connect_timeout, sizeof db->pg->connect_timeout, "%d",
                       timeout_ms < 2000 ? 2 : (timeout_ms + 999) / 1000);
    res = dbpg_connect_raw(db);
    if (res == DB_OK)
        res = readonly ? dbpg_check_schema(db) : dbpg_migrate(db);
    if (res == DB_OK)
        res = dbpg_prepare_all(db);
    if (res != DB_OK) {
        (void)snprintf(reason, sizeof reason, "%s", db->errmsg);
        goto out;
    }
    *out = db;
    db = NULL;
    res = DB_OK;
out:
    /* The URL may carry a password: the error names only what precedes it. */
    if (res != DB_OK) {
        char shown[128];
        const char *at = url != NULL ? strchr(url, '@') : NULL;
        const char *scheme = url != NULL ? strstr(url, "://") : NULL;
        if (at != NULL && scheme != NULL && scheme < at)
            (void)snprintf(shown, sizeof shown, "%.*s...@%s", (int)(scheme - url + 3), url, at + 1);
        else
            (void)snprintf(shown, sizeof shown, "%s", url != NULL ? url : "(null)");
        dbi_copy_one_line(errbuf, errbuf_len, shown, reason);
    }
    free(options);
    if (db != NULL) {
        if (db->pg != NULL)
            pg_close(db);
        free(db);
    }
    return res;
}

static void pg_close(db_store *db)
{
    if (db->pg == NULL)
        return;
    if (db->pg->conn != NULL)
        dbpg_drop(db);
    free(db->pg->conninfo);
    free(db->pg->options);
    free(db->pg);
    db->pg = NULL;
}

/* For the ops table (pg/ops.c). */
void dbpg_close(db_store *db)
{
    pg_close(db);
}
