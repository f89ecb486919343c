/* pg_proc.c - a real PostgreSQL server for the suites: initdb into a temp
 * dir, postgres on a free loopback port (its socket in the same dir), one
 * database per test, stopped by PID (SIGINT = fast shutdown, bounded, then
 * SIGKILL) and the dir removed.
 *
 * Root: initdb and postgres refuse to run as root. When the tests run as
 * root (CI, containers), both run as the unprivileged user `nobody`
 * (setgroups/setgid/setuid in the forked child before exec), and the temp
 * dir is chowned to it; DLOCK_PG_USER names another user. */
#include "procs.h"
#include "procs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG_INITDB_MS 60000
#define PG_READY_MS 20000
#define PG_STOP_MS 10000
#define PG_PORT_TRIES 3

static int is_dir_with(const char *dir, const char *file)
{
    char path[512];
    (void)snprintf(path, sizeof path, "%s/%s", dir, file);
    return access(path, X_OK) == 0;
}

int pg_bindir(char *out, size_t len)
{
    const char *env = getenv("DLOCK_PG_BINDIR");
    glob_t g;

    out[0] = '\0';
    if (env != NULL && env[0] != '\0') {
        if (!is_dir_with(env, "postgres") || !is_dir_with(env, "initdb"))
            return -1;
        (void)snprintf(out, len, "%s", env);
        return 0;
    }
    /* Debian keeps the server binaries out of PATH, one dir per major
     * version; the highest installed one (glob sorts, "15" < "16"). */
    if (glob("/usr/lib/postgresql/*/bin", 0, NULL, &g) == 0) {
        for (size_t i = g.gl_pathc; i > 0; i--) {
            if (is_dir_with(g.gl_pathv[i - 1], "postgres") && is_dir_with(g.gl_pathv[i - 1], "initdb")) {
                (void)snprintf(out, len, "%s", g.gl_pathv[i - 1]);
                break;
            }
        }
        globfree(&g);
    }
    return out[0] != '\0' ? 0 : -1;
}

/* The user initdb and postgres run as: none (ourselves) unless we are root. */
static int target_user(uid_t *uid, gid_t *gid, int *drop)
{
    const char *name = getenv("DLOCK_PG_USER");
    struct passwd *pw;

    *drop = 0;
    if (geteuid() != 0)
        return 0;
    if (name == NULL || name[0] == '\0')
        name = "nobody";
    pw = getpwnam(name);
    if (pw == NULL || pw->pw_uid == 0) {
        fprintf(stderr, "pg_proc: running as root and no unprivileged user '%s' to run PostgreSQL as\n", name);
        return -1;
    }
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
    *drop = 1;
    return 0;
}

/* fork + (drop to the user) + exec argv with stdout/stderr appended to log. */
static pid_t spawn(const char *const *argv, const char *log, int die_with_parent)
{
    uid_t uid = 0;
    gid_t gid = 0;
    int drop = 0;
    pid_t parent = getpid();
    pid_t pid;

    if (target_user(&uid, &gid, &drop) != 0)
        return -1;
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "pg_proc: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(126);
        procs_close_extra_fds();
        /* Order matters: groups and gid while we still may, uid last. */
        if (drop && (setgroups(0, NULL) != 0 || setgid(gid) != 0 || setuid(uid) != 0))
            _exit(125);
        /* After setuid: a credential change clears the parent-death signal. */
        if (die_with_parent)
            procs_die_with_parent(parent);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    procs_track(pid);
    return pid;
}

static void print_log_tail(const char *log)
{
    char buf[2048];
    FILE *f = fopen(log, "r");
    size_t n;

    if (f == NULL)
        return;
    if (fseek(f, -(long)(sizeof buf - 1), SEEK_END) != 0)
        (void)fseek(f, 0, SEEK_SET);
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "pg_proc: last lines of %s:\n%s\n", log, buf);
}

static int run_initdb(pg_proc *p, const char *bindir)
{
    char initdb[512], data[320], log[320];
    int status = 0;
    pid_t pid;

    (void)snprintf(initdb, sizeof initdb, "%s/initdb", bindir);
    (void)snprintf(data, sizeof data, "%s/data", p->dir);
    (void)snprintf(log, sizeof log, "%s/initdb.log", p->dir);
    /* trust on loopback only (the server listens on 127.0.0.1 and its own
     * socket dir); -N: no fsync of the new files, a test cluster. */
    const char *argv[] = {initdb, "-D", data, "-U", "postgres", "--auth=trust", "-N", "-E", "UTF8",
                          "--no-locale", NULL};
    pid = spawn(argv, log, 0);
    if (pid < 0)
        return -1;
    if (procs_wait_bounded(pid, PG_INITDB_MS, &status) != 1) {
        (void)procs_stop_pid(pid, SIGKILL, 1000, NULL);
        procs_untrack(pid);
        fprintf(stderr, "pg_proc: initdb did not finish in %d ms\n", PG_INITDB_MS);
        return -1;
    }
    procs_untrack(pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "pg_proc: initdb failed (status 0x%x)\n", status);
        print_log_tail(log);
        return -1;
    }
    return 0;
}

static int launch(pg_proc *p, const char *bindir)
{
    char postgres[512], data[320], log[320], port[16], conninfo[256];
    int64_t deadline;

    (void)snprintf(postgres, sizeof postgres, "%s/postgres", bindir);
    (void)snprintf(data, sizeof data, "%s/data", p->dir);
    (void)snprintf(log, sizeof log, "%s/postgres.log", p->dir);
    (void)snprintf(port, sizeof port, "%d", p->port);
    /* -F: no fsync (a test server: speed over durability); room for two
     * coupon-servers' worker connections plus the tests' own. */
    const char *argv[] = {postgres, "-D", data, "-k", p->dir, "-p", port, "-h", "127.0.0.1", "-F",
                          "-c", "max_connections=200", NULL};
    p->pid = spawn(argv, log, 1);
    if (p->pid < 0) {
        p->pid = 0;
        return -1;
    }
    (void)snprintf(conninfo, sizeof conninfo,
                   "host=127.0.0.1 port=%d user=postgres dbname=postgres connect_timeout=2", p->port);
    deadline = test_now_ms() + PG_READY_MS;
    while (test_now_ms() < deadline) {
        int status;
        if (PQping(conninfo) == PQPING_OK)
            return 0;
        /* Exited already (port taken, bad setting): no use waiting. */
        if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
            procs_untrack(p->pid);
            p->pid = 0;
            print_log_tail(log);
            return -1;
        }
        test_sleep_ms(50);
    }
    fprintf(stderr, "pg_proc: postgres on port %d not ready in %d ms\n", p->port, PG_READY_MS);
    print_log_tail(log);
    (void)pg_stop_server_only(p);
    return -1;
}

int pg_stop_server_only(pg_proc *p)
{
    int result = 0;
    if (p->pid > 0) {
        /* SIGINT: fast shutdown (roll back sessions, checkpoint, exit). */
        if (procs_stop_pid(p->pid, SIGINT, PG_STOP_MS, NULL) != 0) {
            fprintf(stderr, "pg_proc: postgres (pid %d) could not be reaped\n", (int)p->pid);
            result = -1;
        }
        procs_untrack(p->pid);
    }
    p->pid = 0;
    return result;
}

int pg_start(pg_proc *p)
{
    char bindir[256];
    uid_t uid = 0;
    gid_t gid = 0;
    int drop = 0;

    memset(p, 0, sizeof *p);
    if (pg_bindir(bindir, sizeof bindir) != 0) {
        fprintf(stderr, "pg_proc: no PostgreSQL server binaries (postgres, initdb) under /usr/lib/postgresql/*/bin "
                        "or $DLOCK_PG_BINDIR\n");
        return -1;
    }
    if (target_user(&uid, &gid, &drop) != 0)
        return -1;
    if (test_mkdtemp(p->dir, sizeof p->dir, "dlock-pg-%d-", (int)getpid()) != 0)
        return -1;
    /* initdb creates data/ inside; postgres puts its socket here. */
    if (drop && chown(p->dir, uid, gid) != 0) {
        fprintf(stderr, "pg_proc: chown %s: %s\n", p->dir, strerror(errno));
        goto fail;
    }
    if (run_initdb(p, bindir) != 0)
        goto fail;
    for (int tries = 0; tries < PG_PORT_TRIES; tries++) {
        /* free_loopback_port releases the port before postgres binds it:
         * another process may take it in between, so try a few. */
        p->port = free_loopback_port();
        if (p->port > 0 && launch(p, bindir) == 0) {
            (void)snprintf(p->url, sizeof p->url, "postgresql://postgres@127.0.0.1:%d/postgres", p->port);
            return 0;
        }
    }
fail:
    (void)pg_stop(p);
    return -1;
}

int pg_stop(pg_proc *p)
{
    int result;

    if (p == NULL)
        return 0;
    result = pg_stop_server_only(p);
    if (p->dir[0] != '\0') {
        if (test_rmtree(p->dir) != 0)
            result = -1;
        p->dir[0] = '\0';
    }
    return result;
}

int pg_query(const char *url, const char *sql, char *out, size_t outlen, int *rows)
{
    char conninfo[512];
    PGconn *c;
    PGresult *r;
    int rc = -1;

    if (out != NULL && outlen > 0)
        out[0] = '\0';
    if (rows != NULL)
        *rows = 0;
    /* Bounded: connect_timeout, and statement_timeout for the statement. */
    (void)snprintf(conninfo, sizeof conninfo, "%s%sconnect_timeout=5&options=-c%%20statement_timeout%%3D30000", url,
                   strchr(url, '?') != NULL ? "&" : "?");
    c = PQconnectdb(conninfo);
    if (c == NULL || PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "pg_sql: connect %s: %s", url, c != NULL ? PQerrorMessage(c) : "out of memory\n");
        PQfinish(c);
        return -1;
    }
    r = PQexec(c, sql);
    if (PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK) {
        int tuples = PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : 0;
        if (out != NULL && outlen > 0 && tuples > 0 && PQnfields(r) > 0)
            (void)snprintf(out, outlen, "%s", PQgetisnull(r, 0, 0) ? "(null)" : PQgetvalue(r, 0, 0));
        if (rows != NULL)
            *rows = tuples;
        rc = 0;
    } else {
        fprintf(stderr, "pg_sql: %s: %s", sql, PQresultErrorMessage(r));
    }
    PQclear(r);
    PQfinish(c);
    return rc;
}

int pg_sql(const char *url, const char *sql, char *out, size_t outlen)
{
    return pg_query(url, sql, out, outlen, NULL);
}

int pg_create_db(const pg_proc *p, const char *name, char *url, size_t urllen)
{
    char sql[160];

    /* name is the caller's own identifier ([a-z0-9_]), never input. */
    (void)snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
    if (pg_sql(p->url, sql, NULL, 0) != 0)
        return -1;
    (void)snprintf(url, urllen, "postgresql://postgres@127.0.0.1:%d/%s", p->port, name);
    return 0;
}

int pg_drop_db(const pg_proc *p, const char *name)
{
    char sql[160];

    /* FORCE: a test that failed half-way may leave sessions open. */
    (void)snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
    return pg_sql(p->url, sql, NULL, 0);
}
