/* app_store.h - the store an app suite runs against. A suite that matters
 * for safety is built twice from one source: app_<name> on a SQLite file in
 * its temp dir, and with APP_PG=1 app_<name>_pg. There every test gets a
 * fresh database on one PostgreSQL server the binary starts
 * (app_pg_server.c), and the tests read the tables back through libpq. app_db_int / app_db_exec
 * / app_db_state take either (the db string says which), so the assertions
 * are written once. */
#ifndef TESTS_APP_STORE_H
#define TESTS_APP_STORE_H

#include <stddef.h>

#ifndef APP_PG
#define APP_PG 0
#endif

/* The Criterion suite name of the build: name, or name_pg (what ctest and
 * the reports say). Use as Test(APP_SUITE(app_fence), ...). */
#if APP_PG
#define APP_SUITE(name) name##_pg
#else
#define APP_SUITE(name) name
#endif

/* Where the PostgreSQL build's tests find the binary's server: the port,
 * set by the runner before the first test, inherited by every worker;
 * "-1" when it did not start. Unset: no server binaries (tests skip). */
#define APP_PG_PORT_ENV "APP_PG_PORT"

/* Nonzero when db (an app_env's db) is a PostgreSQL URL, not a file. */
int app_store_is_pg(const char *db);

/* A fresh database on the binary's PostgreSQL server for one test: its name
 * (unique in this process) into name[name_len], its URL into url[url_len].
 * 0 on success; 1 when there are no PostgreSQL binaries (*why says so: skip);
 * -1 on failure (*why says why). */
int app_store_pg_create(char *name, size_t name_len, char *url, size_t url_len, char *why, size_t why_len);
/* DROP DATABASE name WITH (FORCE) on the binary's server; best effort. */
void app_store_pg_drop(const char *name);

/* A foreign writer: a connection of its own that holds the store's write
 * lock until released, as another program (a migration, a batch job) might.
 * SQLite: BEGIN IMMEDIATE (no other connection may write the file);
 * PostgreSQL: BEGIN; LOCK TABLE coupon IN EXCLUSIVE MODE (plain reads pass,
 * every UPDATE of a coupon waits). Both assert; release ends the transaction
 * (ROLLBACK) and closes the connection. */
typedef struct app_store_hold app_store_hold;
app_store_hold *app_store_hold_writes(const char *db);
void app_store_hold_release(app_store_hold *h);

#endif /* TESTS_APP_STORE_H */
