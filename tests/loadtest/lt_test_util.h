/* lt_test_util.h - helpers of the coupon-loadtest suites: run the binary,
 * temp dirs, a Redis + coupon-server rig, coupons, claims, DB tampering. */
#ifndef LT_TEST_UTIL_H
#define LT_TEST_UTIL_H

#include <pthread.h>
#include <stddef.h>

#include <jansson.h>

#include "procs.h"

#define LT_TEST_TOKEN "loadtest-suite-token-5c1e8a7d3f06"

/* Runs $COUPON_LOADTEST_BIN with the NULL-terminated args (60 s limit);
 * returns its exit status, *output (malloc'd) gets stdout+stderr. */
int lt_run_loadtest(const char *const *args, char **output);

/* lt_run_loadtest on a thread of its own, for tests that act on the servers
 * while the load runs: lt_bg_start, act, lt_bg_join (status and output
 * then set; output is the caller's to free). */
typedef struct lt_bg_run {
    const char *const *args;
    int status;
    char *output;
    pthread_t thread;
} lt_bg_run;
void lt_bg_start(lt_bg_run *b, const char *const *args);
void lt_bg_join(lt_bg_run *b);

/* mkdtemp under $TMPDIR or /tmp / remove a flat temp dir with its files. */
void lt_tmpdir(char *dir, size_t len);
void lt_rmdir_flat(const char *dir);

/* One Redis node and n coupon-servers sharing dir/coupons.db. */
typedef struct lt_rig {
    char dir[256];
    char db_path[300];
    redis_proc redis;
    server_proc srv[2];
    size_t n_srv;
    char urls[256]; /* "url1,url2" for --url */
} lt_rig;

/* Starts everything (asserts); extra server args are NULL-terminated, may be NULL. */
void lt_rig_up(lt_rig *rig, size_t n_servers, const char *const *extra_server_args);
void lt_rig_down(lt_rig *rig);

/* POST /api/v1/admin/coupon; asserts 201 and returns the id. */
long long lt_create_coupon(const lt_rig *rig, long long stock, long long per_user_limit);
/* POST /api/v1/coupon/add for user; returns the JSON code (asserts a JSON reply). */
long long lt_claim(const lt_rig *rig, long long coupon_id, const char *user);
/* Runs SQL on the rig's DB file read-write (asserts success). */
void lt_db_exec(const lt_rig *rig, const char *sql);

/* The integer at obj.key (asserts present and integer). */
long long lt_jint(const json_t *obj, const char *key);

#endif /* LT_TEST_UTIL_H */
