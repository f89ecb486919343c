/* lt_test_util.c - helpers of the coupon-loadtest suites (see lt_test_util.h). */
#include "lt_test_util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int lt_run_loadtest(const char *const *args, char **output)
{
    const char *argv[48];
    size_t n = 0;
    const char *bin = getenv("COUPON_LOADTEST_BIN");
    cr_assert_not_null(bin, "COUPON_LOADTEST_BIN is not set");
    argv[n++] = bin;
    for (; args != NULL && *args != NULL; args++) {
        cr_assert_lt(n, sizeof argv / sizeof argv[0] - 1, "too many arguments");
        argv[n++] = *args;
    }
    argv[n] = NULL;
    return run_command(argv, 60000, output);
}

void lt_tmpdir(char *dir, size_t len)
{
    const char *base = getenv("TMPDIR");
    snprintf(dir, len, "%s/loadtest-suite-XXXXXX", base && *base ? base : "/tmp");
    cr_assert_not_null(mkdtemp(dir), "mkdtemp %s failed", dir);
}

void lt_rmdir_flat(const char *dir)
{
    DIR *d;
    struct dirent *e;
    char path[512];
    if (dir == NULL || dir[0] == '\0')
        return;
    d = opendir(dir);
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

void lt_rig_up(lt_rig *rig, size_t n_servers, const char *const *extra)
{
    const char *args[24];
    size_t n = 0;
    memset(rig, 0, sizeof *rig);
    cr_assert_leq(n_servers, 2);
    lt_tmpdir(rig->dir, sizeof rig->dir);
    snprintf(rig->db_path, sizeof rig->db_path, "%s/coupons.db", rig->dir);
    cr_assert_eq(redis_start(&rig->redis), 0, "redis-server did not start");
    args[n++] = "--db";
    args[n++] = rig->db_path;
    args[n++] = "--redis";
    args[n++] = rig->redis.addr;
    args[n++] = "--admin-token";
    args[n++] = LT_TEST_TOKEN;
    /* A long lock wait: exact-count assertions must not meet a 1005 (lock busy). */
    args[n++] = "--lock-wait";
    args[n++] = "10000";
    for (; extra != NULL && *extra != NULL && n < 22; extra++)
        args[n++] = *extra;
    args[n] = NULL;
    for (size_t i = 0; i < n_servers; i++) {
        /* One at a time: the first creates the schema, the next opens it. */
        cr_assert_eq(server_start(&rig->srv[i], args), 0, "coupon-server %zu did not start", i);
        rig->n_srv++;
        snprintf(rig->urls + strlen(rig->urls), sizeof rig->urls - strlen(rig->urls), "%s%s",
                 i ? "," : "", rig->srv[i].url);
    }
}

void lt_rig_down(lt_rig *rig)
{
    for (size_t i = 0; i < rig->n_srv; i++)
        if (rig->srv[i].pid > 0)
            server_stop(&rig->srv[i], SIGTERM, NULL);
    redis_stop(&rig->redis);
    lt_rmdir_flat(rig->dir);
}

long long lt_jint(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    cr_assert(json_is_integer(v), "\"%s\" is not an integer", key);
    return (long long)json_integer_value(v);
}

long long lt_create_coupon(const lt_rig *rig, long long stock, long long per_user_limit)
{
    char url[160], body[160];
    const char *headers[] = {"Authorization: Bearer " LT_TEST_TOKEN, "Content-Type: application/json", NULL};
    http_reply r;
    json_t *root;
    json_error_t jerr;
    long long id;
    snprintf(url, sizeof url, "%s/api/v1/admin/coupon", rig->srv[0].url);
    snprintf(body, sizeof body, "{\"name\":\"loadtest\",\"stock\":%lld,\"per_user_limit\":%lld}", stock,
             per_user_limit);
    cr_assert_eq(http_request("POST", url, body, headers, &r), 0);
    cr_assert_eq(r.status, 201, "create coupon: HTTP %ld %s", r.status, r.body);
    root = json_loads(r.body, 0, &jerr);
    cr_assert_not_null(root, "create coupon: not JSON: %s", r.body);
    cr_assert_eq(lt_jint(root, "code"), 0);
    id = lt_jint(json_object_get(root, "data"), "coupon_id");
    json_decref(root);
    http_reply_free(&r);
    return id;
}

long long lt_claim(const lt_rig *rig, long long coupon_id, const char *user)
{
    char url[256];
    http_reply r;
    json_t *root;
    json_error_t jerr;
    long long code;
    snprintf(url, sizeof url, "%s/api/v1/coupon/add?coupon_id=%lld&user_id=%s", rig->srv[0].url,
             coupon_id, user);
    cr_assert_eq(http_request("POST", url, NULL, NULL, &r), 0);
    root = json_loads(r.body, 0, &jerr);
    cr_assert_not_null(root, "claim: not JSON: %s", r.body);
    code = lt_jint(root, "code");
    json_decref(root);
    http_reply_free(&r);
    return code;
}

void lt_db_exec(const lt_rig *rig, const char *sql)
{
    sqlite3 *db = NULL;
    char *msg = NULL;
    int rc = sqlite3_open_v2(rig->db_path, &db, SQLITE_OPEN_READWRITE, NULL);
    cr_assert_eq(rc, SQLITE_OK, "open %s: %s", rig->db_path, db ? sqlite3_errmsg(db) : "oom");
    cr_assert_eq(sqlite3_busy_timeout(db, 10000), SQLITE_OK);
    rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    cr_assert_eq(rc, SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(db);
}

static void *bg_main(void *arg)
{
    lt_bg_run *b = arg;
    b->status = lt_run_loadtest(b->args, &b->output);
    return NULL;
}

void lt_bg_start(lt_bg_run *b, const char *const *args)
{
    b->args = args;
    b->status = -1;
    b->output = NULL;
    cr_assert_eq(pthread_create(&b->thread, NULL, bg_main, b), 0, "cannot start the load thread");
}

void lt_bg_join(lt_bg_run *b)
{
    cr_assert_eq(pthread_join(b->thread, NULL), 0);
}
