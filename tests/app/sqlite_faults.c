/* sqlite_faults.c - coupon-server on a SQLite file that stops taking writes
 * mid-run, for real. Either the disk fills up (a small tmpfs the test
 * mounts and fills), or the file and its WAL become immutable
 * (FS_IMMUTABLE_FL, which binds root too). chmod 0444 would not: root
 * ignores modes, and the server holds the file open anyway. In both:
 *   - every claim answers 500/1500 with a fixed message (no path, no SQLite
 *     text);
 *   - nothing is written half-way (stock + records == total, one record
 *     per 200);
 *   - reads keep answering;
 *   - /healthz is 503 naming the class of fault, and the log has the
 *     detail;
 *   - once the fault is removed, claims succeed again without a restart.
 * Also: with Redis down, the 1006 reply names no address; the log does.
 *
 * Needs root-like powers (mount, FS_IOC_SETFLAGS); each test skips with one
 * line saying what the machine refused. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "app_util.h"

/* Each test puts its own SQLite file where its fault can reach it (a small
 * tmpfs, a directory on the temp dir's file system): the plan's file is unused. */
const app_suite_plan app_plan = {.db_name = "unused.db", .nredis = 1};

/* The coupon's stock, and the claims made before, during and after the fault. */
#define STOCK 60
#define BEFORE 5
#define DURING 8
#define AFTER 10

/* What the suite set up and .fini must undo on every exit path, a failed
 * assertion included: the server, the mount, the immutable flags. */
static struct {
    pid_t pid;
    int out;                 /* read end of the server's stdout */
    char err_path[400];      /* the server's stderr: the operator's log */
    server_proc srv;         /* url only, for app_util's request helpers */
    char mnt[400];           /* a tmpfs mounted here, "" when none */
    char immutable[2][512];  /* files made immutable, "" when none */
} g;

/* Sets or clears FS_IMMUTABLE_FL; 0, or -1 with errno. */
static int set_immutable(const char *path, int on)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    int flags = 0, rc = ioctl(fd, FS_IOC_GETFLAGS, &flags);
    if (rc == 0) {
        flags = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
        rc = ioctl(fd, FS_IOC_SETFLAGS, &flags);
    }
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

static void stop_server(void)
{
    int st = 0;
    if (g.pid <= 0)
        return;
    kill(g.pid, SIGTERM);
    for (int i = 0; i < 500 && waitpid(g.pid, &st, WNOHANG) == 0; i++)
        usleep(10 * 1000);
    if (waitpid(g.pid, &st, WNOHANG) == 0) {
        kill(g.pid, SIGKILL);
        while (waitpid(g.pid, &st, 0) < 0 && errno == EINTR) {
        }
    }
    g.pid = 0;
}

static void setup(void)
{
    memset(&g, 0, sizeof g);
    g.out = -1;
    app_suite_init();
}

static void teardown(void)
{
    /* The server first: its open files would keep the mount busy. */
    stop_server();
    if (g.out >= 0)
        close(g.out);
    for (int i = 0; i < 2; i++)
        if (g.immutable[i][0] != '\0' && set_immutable(g.immutable[i], 0) != 0)
            fprintf(stderr, "sqlite_faults: cannot clear the immutable flag of %s: %s\n", g.immutable[i],
                    strerror(errno));
    /* MNT_DETACH: gone from the tree now, whatever still holds it. */
    if (g.mnt[0] != '\0' && umount2(g.mnt, MNT_DETACH) != 0)
        fprintf(stderr, "sqlite_faults: umount %s: %s\n", g.mnt, strerror(errno));
    app_suite_fini();
}

TestSuite(app_sqlite_faults, .init = setup, .fini = teardown, .timeout = 90);

/* Starts coupon-server on db with the suite's Redis and the NULL-terminated
 * extra options, stderr into <dir>/server.err (not on the faulty disk);
 * waits for its start line. */
static void spawn(const char *db, const char *const *extra)
{
    const char *bin = getenv("COUPON_SERVER_BIN");
    const char *argv[32];
    size_t n = 0;
    cr_assert(bin && *bin, "COUPON_SERVER_BIN is not set");
    const char *base[] = {bin, "--listen", "127.0.0.1:0", "--db", db, "--redis", g_app.redis[0].addr,
                          "--admin-token", APP_TOKEN, "--threads", "2", "--db-busy-ms", "2000"};
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
        argv[n++] = base[i];
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 31; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    snprintf(g.err_path, sizeof g.err_path, "%s/server.err", g_app.dir);
    app_spawn_server(argv, g.err_path, &g.pid, &g.out, g.srv.url, sizeof g.srv.url);
}

/* A body that leaves the process names nothing internal. */
static void expect_clean(const char *body, const char *const *secrets)
{
    static const char *const never[] = {"SQLITE", "sqlite", "disk", "errno", "/"};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        cr_assert_null(strstr(body, never[i]), "the reply shows '%s': %s", never[i], body);
    for (size_t i = 0; secrets != NULL && secrets[i] != NULL; i++)
        cr_assert_null(strstr(body, secrets[i]), "the reply shows '%s': %s", secrets[i], body);
}

/* Claims users <prefix>0.. n times; every one must be `status`/`code`,
 * with a body that names nothing internal. */
static void claims(long long id, const char *prefix, int n, long status, long long code,
                   const char *const *secrets)
{
    for (int i = 0; i < n; i++) {
        char user[32];
        http_reply r;
        snprintf(user, sizeof user, "%s%d", prefix, i);
        app_claim(&g.srv, "POST", id, user, &r);
        json_decref(app_expect(&r, status, code));
        expect_clean(r.body, secrets);
        http_reply_free(&r);
    }
}

/* Reads answer from the data as it stands: stock and issued add up. */
static void expect_reads(long long id, long long stock, long long issued)
{
    http_reply r;
    char path[64];
    snprintf(path, sizeof path, "/api/v1/coupon/%lld", id);
    app_request(&g.srv, "GET", path, NULL, NULL, &r);
    json_t *root = app_expect(&r, 200, 0);
    json_t *data = json_object_get(root, "data");
    cr_assert_eq(app_jint(data, "stock"), stock, "%s", r.body);
    cr_assert_eq(app_jint(data, "issued"), issued, "%s", r.body);
    json_decref(root);
    http_reply_free(&r);
    app_request(&g.srv, "GET", "/api/v1/coupon", NULL, NULL, &r);
    json_decref(app_expect(&r, 200, 0));
    http_reply_free(&r);
}

/* /healthz: 200, or 503/1006 with data.db "down" and data.db_error holding
 * `fault` (and nothing internal). It answers from the health prober's last
 * round (every 500 ms): polled until the status is the one expected, for
 * at most 10 s (a round may wait out --db-busy-ms). */
static void expect_health(const char *fault, const char *const *secrets)
{
    http_reply r;
    long want = fault == NULL ? 200 : 503;
    int64_t until = test_now_ms() + 10000;
    for (;;) {
        app_request(&g.srv, "GET", "/healthz", NULL, NULL, &r);
        if (r.status == want || test_now_ms() >= until)
            break;
        http_reply_free(&r);
        test_sleep_ms(50);
    }
    if (fault == NULL) {
        json_decref(app_expect(&r, 200, 0));
    } else {
        json_t *root = app_expect(&r, 503, 1006);
        json_t *data = json_object_get(root, "data");
        cr_assert_str_eq(app_jstr(data, "db"), "down", "%s", r.body);
        cr_assert_not_null(strstr(app_jstr(data, "db_error"), fault), "%s", r.body);
        expect_clean(r.body, secrets);
        json_decref(root);
    }
    http_reply_free(&r);
}

/* The audit, straight from the file: every record has its decrement. */
static void expect_audit(const char *db, long long id, long long records)
{
    app_coupon_state st;
    app_expect_db(db, id, STOCK - records, records, &st);
    cr_assert_eq(st.stock + st.records, st.total, "stock %lld + records %lld != total %lld", st.stock, st.records,
                 st.total);
}

/* Fills the file system of dir: writes <dir>/filler until ENOSPC (bounded). */
static void fill(const char *dir)
{
    char path[480];
    static char block[64 * 1024];
    snprintf(path, sizeof path, "%s/filler", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
    ssize_t w = 0;
    /* 4096 blocks of 64 KiB = 256 MiB: far past the 2 MiB mount. */
    for (int i = 0; i < 4096 && (w = write(fd, block, sizeof block)) > 0; i++) {
    }
    int err = errno;
    close(fd);
    cr_assert(w < 0 && err == ENOSPC, "the mount did not fill up (%s)", w < 0 ? strerror(err) : "no ENOSPC");
}

/* The disk fills up under the server, then frees up again. fence picks
 * where the first failing commit is: under `full` the section's read
 * writes (it registers the fence), so it fails there; under `write` the
 * read is a plain read and the failure lands on the write's commit. */
static void disk_full(const char *strategy, const char *fence)
{
    APP_SETUP_OK();
    char db[480];
    snprintf(g.mnt, sizeof g.mnt, "%s/small", g_app.dir);
    cr_assert_eq(mkdir(g.mnt, 0700), 0, "%s: %s", g.mnt, strerror(errno));
    if (mount("tmpfs", g.mnt, "tmpfs", MS_NOSUID | MS_NODEV, "size=2m") != 0) {
        int err = errno;
        g.mnt[0] = '\0';
        cr_skip_test("cannot mount a 2 MiB tmpfs to fill (%s): the disk-full fault is not run", strerror(err));
    }
    snprintf(db, sizeof db, "%s/full.db", g.mnt);
    const char *extra[] = {"--strategy", strategy, "--fence", fence, NULL};
    spawn(db, extra);
    long long id = app_create_coupon(&g.srv, "full", STOCK, 0);
    claims(id, "before", BEFORE, 200, 0, NULL);
    expect_health(NULL, NULL);

    fill(g.mnt);
    const char *secrets[] = {db, "full.db", NULL};
    claims(id, "during", DURING, 500, 1500, secrets);
    expect_reads(id, STOCK - BEFORE, BEFORE);
    expect_health("full", secrets);
    expect_audit(db, id, BEFORE);
    /* The detail is the operator's: in the log, with SQLite's words. */
    char *log = app_slurp(g.err_path);
    cr_assert_not_null(strstr(log, " error db-error "), "%s", log);
    cr_assert_not_null(strstr(log, "database or disk is full"), "%s", log);
    free(log);

    /* No restart: the same server, the same connections. */
    char filler[480];
    snprintf(filler, sizeof filler, "%s/filler", g.mnt);
    cr_assert_eq(unlink(filler), 0, "%s: %s", filler, strerror(errno));
    expect_health(NULL, NULL);
    claims(id, "after", AFTER, 200, 0, NULL);
    expect_reads(id, STOCK - BEFORE - AFTER, BEFORE + AFTER);
    expect_audit(db, id, BEFORE + AFTER);
}

Test(app_sqlite_faults, disk_full_under_redlock_answers_1500_and_recovers)
{
    disk_full("redlock", "full");
}

Test(app_sqlite_faults, disk_full_on_the_sections_write_answers_1500_and_recovers)
{
    disk_full("redlock", "write");
}

Test(app_sqlite_faults, disk_full_under_atomic_sql_answers_1500_and_recovers)
{
    disk_full("atomic-sql", "full");
}

/* The file and its WAL stop taking writes (immutable), then take them again. */
Test(app_sqlite_faults, immutable_db_file_answers_1500_and_recovers)
{
    APP_SETUP_OK();
    char dir[400], db[480], wal[490], probe[480];
    snprintf(dir, sizeof dir, "%s/imm", g_app.dir);
    cr_assert_eq(mkdir(dir, 0700), 0);
    /* The flag must bind an open file: ext4 and xfs do, tmpfs and overlay
     * may accept it or refuse it without binding anything. */
    snprintf(probe, sizeof probe, "%s/probe", dir);
    int fd = open(probe, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0);
    if (set_immutable(probe, 1) != 0) {
        int err = errno;
        close(fd);
        cr_skip_test("this file system refuses the immutable flag (%s): the read-only fault is not run",
                     strerror(err));
    }
    snprintf(g.immutable[0], sizeof g.immutable[0], "%s", probe);
    int bound = write(fd, "x", 1) < 0 && errno == EPERM;
    close(fd);
    cr_assert_eq(set_immutable(probe, 0), 0);
    g.immutable[0][0] = '\0';
    if (!bound)
        cr_skip_test("this file system keeps writing an open immutable file: the read-only fault is not run");

    snprintf(db, sizeof db, "%s/ro.db", dir);
    snprintf(wal, sizeof wal, "%s-wal", db);
    spawn(db, NULL);
    long long id = app_create_coupon(&g.srv, "ro", STOCK, 0);
    claims(id, "before", BEFORE, 200, 0, NULL);
    struct stat sb;
    cr_assert_eq(stat(wal, &sb), 0, "no WAL file %s: %s", wal, strerror(errno));

    /* Both: with WAL, commits only append to the -wal file. */
    snprintf(g.immutable[0], sizeof g.immutable[0], "%s", db);
    cr_assert_eq(set_immutable(db, 1), 0, "%s: %s", db, strerror(errno));
    snprintf(g.immutable[1], sizeof g.immutable[1], "%s", wal);
    cr_assert_eq(set_immutable(wal, 1), 0, "%s: %s", wal, strerror(errno));
    const char *secrets[] = {db, "ro.db", NULL};
    claims(id, "during", DURING, 500, 1500, secrets);
    expect_reads(id, STOCK - BEFORE, BEFORE);
    expect_health("read-only", secrets);
    char *log = app_slurp(g.err_path);
    cr_assert_not_null(strstr(log, " error db-error "), "%s", log);
    cr_assert_not_null(strstr(log, "refuses writes"), "%s", log);
    free(log);

    for (int i = 1; i >= 0; i--) {
        cr_assert_eq(set_immutable(g.immutable[i], 0), 0, "%s: %s", g.immutable[i], strerror(errno));
        g.immutable[i][0] = '\0';
    }
    expect_audit(db, id, BEFORE);
    expect_health(NULL, NULL);
    claims(id, "after", AFTER, 200, 0, NULL);
    expect_reads(id, STOCK - BEFORE - AFTER, BEFORE + AFTER);
    expect_audit(db, id, BEFORE + AFTER);
}

/* Redis gone: the claim's 1006 names neither its address nor its port; the
 * log line of the refused claim does. */
Test(app_sqlite_faults, lock_service_down_1006_names_no_address)
{
    APP_SETUP_OK();
    char db[400], port[16];
    snprintf(db, sizeof db, "%s/lock.db", g_app.dir);
    spawn(db, NULL);
    long long id = app_create_coupon(&g.srv, "lock", STOCK, 0);
    claims(id, "before", 1, 200, 0, NULL);
    cr_assert_eq(redis_kill(&g_app.redis[0]), 0);
    snprintf(port, sizeof port, "%d", g_app.redis[0].port);
    const char *secrets[] = {"127.0.0.1", port, NULL};
    claims(id, "down", 3, 503, 1006, secrets);
    char *log = app_slurp(g.err_path);
    char line[1024];
    cr_assert_eq(text_line(log, "", "lock service unavailable: ", line, sizeof line), 0,
                 "no claim refusal in the log:\n%s", log);
    cr_assert_not_null(strstr(line, port), "the log line does not name the node's port %s: %s", port, line);
    free(log);
    expect_audit(db, id, 1);
}
