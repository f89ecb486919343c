/* chaos_check.c - chaos-check: judges a chaos run (scripts/chaos) from what
 * it left behind, never from the servers' own word: the SQLite file, the
 * servers' hold logs (coupon-server --hold-log, format in
 * app/src/claim/hold_log.h) and coupon-loadtest's JSON report.
 *
 * Rules (exit 0 iff all hold):
 *   no oversell   issued <= total, stock >= 0, stock + issued == total, no
 *                 user above per_user_limit (the contract's conditions);
 *   fence order   the coupon's records in id (commit) order carry
 *                 non-decreasing fences: no write was accepted after a write
 *                 with a newer fence, so accepted holds never interleave;
 *   logged        every record's fence is that of a logged hold: listed in
 *                 an applied hold line with the same fence, or (its server
 *                 was killed between the commit and the line) the fence of a
 *                 begin line that never got its hold line and is the last
 *                 line of its server;
 *   one holder    no two applied holds share a fence while their holds
 *                 overlap in time (two writers the store could not tell apart).
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { H_BEGIN, H_APPLIED, H_REFUSED, H_NONE, H_ERROR } hold_kind;

typedef struct hold {
    long pid;
    uint64_t fence;
    int64_t acquired_us, valid_until_us, done_us;
    hold_kind kind;
    int closed; /* a begin line whose hold line was found */
} hold;

typedef struct logged_record {
    int64_t id;
    uint64_t fence;
} logged_record;

typedef struct run {
    hold *holds;
    size_t n_holds, cap_holds;
    logged_record *recs;
    size_t n_recs, cap_recs;
    long applied_late; /* applied holds that finished after their validity (safe only with the fence) */
} run;

static void *grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    size_t n = *cap ? *cap * 2 : 256;
    void *q = realloc(p, n * size);
    if (q == NULL) {
        fprintf(stderr, "chaos-check: out of memory\n");
        exit(2);
    }
    *cap = n;
    return q;
}

static int field(const char *line, const char *key, char *out, size_t outlen)
{
    char pat[32];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(line, pat);
    if (p == NULL)
        return -1;
    p += strlen(pat);
    size_t n = strcspn(p, " \n");
    if (n >= outlen)
        return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

static int num_field(const char *line, const char *key, int64_t *v)
{
    char buf[32], *end;
    if (field(line, key, buf, sizeof buf) != 0)
        return -1;
    errno = 0;
    long long x = strtoll(buf, &end, 10);
    if (errno != 0 || *end != '\0' || end == buf)
        return -1;
    *v = x;
    return 0;
}

/* One log file; lines of other resources are skipped. -1 on a bad line. */
static int read_log(run *r, const char *path, const char *resource)
{
    FILE *f = fopen(path, "r");
    char line[8192], res[128], outcome[16], records[8192];
    long lineno = 0;

    if (f == NULL) {
        fprintf(stderr, "chaos-check: %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        int is_begin = strncmp(line, "begin ", 6) == 0;
        if (!is_begin && strncmp(line, "hold ", 5) != 0)
            goto bad;
        memmove(line + 1, line + (is_begin ? 5 : 4), strlen(line + (is_begin ? 5 : 4)) + 1);
        line[0] = ' '; /* every key now follows a space */
        int64_t pid, fence, acq, until, done = 0;
        if (field(line, "resource", res, sizeof res) != 0 || num_field(line, "pid", &pid) != 0 ||
            num_field(line, "fence", &fence) != 0 || num_field(line, "acquired_us", &acq) != 0 ||
            num_field(line, "valid_until_us", &until) != 0)
            goto bad;
        if (strcmp(res, resource) != 0)
            continue;
        r->holds = grow(r->holds, &r->cap_holds, r->n_holds + 1, sizeof *r->holds);
        hold *h = &r->holds[r->n_holds++];
        *h = (hold){.pid = (long)pid, .fence = (uint64_t)fence, .acquired_us = acq, .valid_until_us = until};
        if (is_begin) {
            h->kind = H_BEGIN;
            continue;
        }
        if (num_field(line, "done_us", &done) != 0 || field(line, "outcome", outcome, sizeof outcome) != 0 ||
            field(line, "records", records, sizeof records) != 0)
            goto bad;
        h->done_us = done;
        h->kind = strcmp(outcome, "applied") == 0   ? H_APPLIED
                  : strcmp(outcome, "refused") == 0 ? H_REFUSED
                  : strcmp(outcome, "none") == 0    ? H_NONE
                                                    : H_ERROR;
        if (h->kind == H_APPLIED && done > until)
            r->applied_late++;
        for (char *tok = strtok(records, ","); tok != NULL; tok = strtok(NULL, ",")) {
            r->recs = grow(r->recs, &r->cap_recs, r->n_recs + 1, sizeof *r->recs);
            r->recs[r->n_recs++] = (logged_record){.id = strtoll(tok, NULL, 10), .fence = (uint64_t)fence};
        }
    }
    if (ferror(f)) {
        fprintf(stderr, "chaos-check: %s: read error\n", path);
        fclose(f);
        return -1;
    }
    fclose(f);
    return 0;
bad:
    fprintf(stderr, "chaos-check: %s:%ld: not a hold-log line\n", path, lineno);
    fclose(f);
    return -1;
}

static int cmp_rec(const void *a, const void *b)
{
    int64_t x = ((const logged_record *)a)->id, y = ((const logged_record *)b)->id;
    return (x > y) - (x < y);
}

static int cmp_hold(const void *a, const void *b)
{
    const hold *x = a, *y = b;
    if (x->fence != y->fence)
        return x->fence < y->fence ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return (x->kind != H_BEGIN) - (y->kind != H_BEGIN); /* begin first */
}

/* Marks each begin line that has its hold line (same pid and fence). */
static void close_begins(run *r)
{
    qsort(r->holds, r->n_holds, sizeof *r->holds, cmp_hold);
    for (size_t i = 0; i + 1 < r->n_holds; i++) {
        hold *b = &r->holds[i], *n = &r->holds[i + 1];
        if (b->kind == H_BEGIN && n->kind != H_BEGIN && n->pid == b->pid && n->fence == b->fence)
            b->closed = 1;
    }
}

/* A begin line of this fence without its hold line, and its server's last
 * line of the resource: a server killed mid-hold (one server's holds of one
 * resource are sequential, so only its last one can lack its hold line). */
static int open_begin_with(const run *r, uint64_t fence)
{
    for (size_t i = 0; i < r->n_holds; i++) {
        const hold *b = &r->holds[i];
        if (b->kind != H_BEGIN || b->closed || b->fence != fence)
            continue;
        int last = 1;
        for (size_t j = 0; j < r->n_holds && last; j++)
            if (r->holds[j].pid == b->pid && r->holds[j].acquired_us > b->acquired_us)
                last = 0;
        if (last)
            return 1;
    }
    return 0;
}

static int64_t one_int(sqlite3 *db, const char *sql, int64_t coupon, int *ok)
{
    sqlite3_stmt *st = NULL;
    int64_t v = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK || sqlite3_bind_int64(st, 1, coupon) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        fprintf(stderr, "chaos-check: %s: %s\n", sql, sqlite3_errmsg(db));
        *ok = 0;
    } else {
        v = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return v;
}

static json_int_t jint(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? json_integer_value(v) : 0;
}

/* "200 N, 503 N (1005: a, ...)" from coupon-loadtest --json. */
static int print_report(const char *path)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (root == NULL) {
        fprintf(stderr, "chaos-check: %s: %s (line %d)\n", path, jerr.text, jerr.line);
        return -1;
    }
    json_t *by_status = json_object_get(root, "by_status"), *by_code = json_object_get(root, "by_code");
    printf("claims %" JSON_INTEGER_FORMAT ", 200s %" JSON_INTEGER_FORMAT ", 503s %" JSON_INTEGER_FORMAT " (",
           jint(root, "requests"), jint(by_status, "200"), jint(by_status, "503"));
    const char *key;
    json_t *val;
    int first = 1;
    json_object_foreach(by_code, key, val)
    {
        if (strcmp(key, "0") == 0 || !json_is_integer(val) || json_integer_value(val) == 0)
            continue;
        printf("%s%s: %" JSON_INTEGER_FORMAT, first ? "" : ", ", key, json_integer_value(val));
        first = 0;
    }
    printf("), no answer %" JSON_INTEGER_FORMAT ", ", jint(json_object_get(root, "errors"), "total"));
    json_decref(root);
    return 0;
}

static void usage(FILE *to)
{
    fprintf(to, "usage: chaos-check --db PATH --coupon ID [--report LOADTEST.json] [--faults N] HOLD_LOG...\n"
                "Judges a chaos run (scripts/chaos) from the SQLite file, the coupon-server --hold-log files\n"
                "and coupon-loadtest's --json report: no oversell, records' fences non-decreasing in commit\n"
                "order, every record's fence a logged hold, no fence shared by overlapping holds.\n"
                "Prints one summary line; exit 0 PASS, 1 FAIL, 2 bad input.\n");
}

int main(int argc, char **argv)
{
    const char *db_path = NULL, *report = NULL, *faults = NULL;
    int64_t coupon = 0;
    run r = {0};
    int i, ok = 1, failed = 0;

    for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            usage(stderr);
            return 2;
        }
        if (strcmp(argv[i], "--db") == 0)
            db_path = argv[++i];
        else if (strcmp(argv[i], "--report") == 0)
            report = argv[++i];
        else if (strcmp(argv[i], "--faults") == 0)
            faults = argv[++i];
        else if (strcmp(argv[i], "--coupon") == 0) {
            char *end;
            coupon = strtoll(argv[++i], &end, 10);
            if (*end != '\0' || coupon <= 0) {
                fprintf(stderr, "chaos-check: --coupon: '%s' is not a positive integer\n", argv[i]);
                return 2;
            }
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (db_path == NULL || coupon == 0 || i >= argc) {
        usage(stderr);
        return 2;
    }
    char resource[64];
    /* The lock's resource name (its key is <prefix>lock:coupon:<id>). */
    snprintf(resource, sizeof resource, "coupon:%" PRId64, coupon);
    for (; i < argc; i++)
        if (read_log(&r, argv[i], resource) != 0)
            return 2;
    close_begins(&r);
    qsort(r.recs, r.n_recs, sizeof *r.recs, cmp_rec);

    sqlite3 *db = NULL;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        fprintf(stderr, "chaos-check: %s: %s\n", db_path, db ? sqlite3_errmsg(db) : "cannot open");
        sqlite3_close(db);
        return 2;
    }
    sqlite3_busy_timeout(db, 5000);
    int64_t total = one_int(db, "SELECT total FROM coupon WHERE id = ?1", coupon, &ok);
    int64_t stock = one_int(db, "SELECT stock FROM coupon WHERE id = ?1", coupon, &ok);
    int64_t issued = one_int(db, "SELECT COUNT(*) FROM coupon_record WHERE coupon_id = ?1", coupon, &ok);
    int64_t excess = one_int(db,
                             "SELECT COALESCE(SUM(n - l), 0) FROM (SELECT COUNT(*) AS n, c.per_user_limit AS l"
                             " FROM coupon_record r JOIN coupon c ON c.id = r.coupon_id WHERE r.coupon_id = ?1"
                             " GROUP BY r.user_id) WHERE l > 0 AND n > l",
                             coupon, &ok);
    if (!ok) {
        sqlite3_close(db);
        return 2;
    }
    int64_t oversold = issued - total;
    if (-stock > oversold)
        oversold = -stock;
    if (llabs(stock + issued - total) > oversold)
        oversold = llabs(stock + issued - total);
    if (excess > oversold)
        oversold = excess;

    /* Fence order and the holds behind each record, in commit order. */
    long order_breaks = 0, unlogged = 0, mismatched = 0, killed_mid_hold = 0;
    uint64_t prev = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT id, fence FROM coupon_record WHERE coupon_id = ?1 ORDER BY id", -1, &st,
                           NULL) != SQLITE_OK ||
        sqlite3_bind_int64(st, 1, coupon) != SQLITE_OK) {
        fprintf(stderr, "chaos-check: records: %s\n", sqlite3_errmsg(db));
        sqlite3_finalize(st);
        sqlite3_close(db);
        return 2;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        logged_record key = {.id = sqlite3_column_int64(st, 0)};
        uint64_t fence = (uint64_t)sqlite3_column_int64(st, 1);
        if (fence < prev && order_breaks++ < 5)
            printf("fence order broken: record %" PRId64 " fence %" PRIu64 " after fence %" PRIu64 "\n", key.id, fence,
                   prev);
        if (fence > prev)
            prev = fence;
        const logged_record *l = bsearch(&key, r.recs, r.n_recs, sizeof *r.recs, cmp_rec);
        if (l != NULL && l->fence != fence) {
            if (mismatched++ < 5)
                printf("record %" PRId64 ": fence %" PRIu64 " in the DB, %" PRIu64 " in the hold log\n", key.id,
                       fence, l->fence);
        } else if (l == NULL && open_begin_with(&r, fence)) {
            killed_mid_hold++;
        } else if (l == NULL && unlogged++ < 5) {
            printf("record %" PRId64 " (fence %" PRIu64 ") has no logged hold\n", key.id, fence);
        }
    }
    if (rc != SQLITE_DONE) {
        fprintf(stderr, "chaos-check: records: %s\n", sqlite3_errmsg(db));
        failed = 2;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    if (failed)
        return failed;

    /* One holder per fence: applied holds sharing a fence must not overlap. */
    long shared = 0, applied = 0, refused = 0, holds = 0;
    for (size_t a = 0; a < r.n_holds; a++) {
        const hold *x = &r.holds[a];
        if (x->kind == H_BEGIN)
            continue;
        holds++;
        applied += x->kind == H_APPLIED;
        refused += x->kind == H_REFUSED;
        for (size_t b = a + 1; x->kind == H_APPLIED && b < r.n_holds && r.holds[b].fence == x->fence; b++) {
            const hold *y = &r.holds[b];
            if (y->kind == H_APPLIED && y->acquired_us < x->done_us && x->acquired_us < y->done_us &&
                shared++ < 5)
                printf("fence %" PRIu64 ": applied by pid %ld and pid %ld in overlapping holds\n", x->fence, x->pid,
                       y->pid);
        }
    }

    int pass = oversold == 0 && order_breaks == 0 && unlogged == 0 && mismatched == 0 && shared == 0;
    printf("chaos-check: ");
    if (report != NULL && print_report(report) != 0)
        return 2;
    if (faults != NULL)
        printf("faults %s, ", faults);
    printf("records %" PRId64 " of stock %" PRId64 " (left %" PRId64 "), holds %ld (applied %ld, refused %ld, "
           "applied after validity %ld, killed mid-hold %ld), fence order breaks %ld, unlogged %ld, "
           "shared fences %ld, oversold %" PRId64 ", verdict %s\n",
           issued, total, stock, holds, applied, refused, r.applied_late, killed_mid_hold, order_breaks,
           unlogged + mismatched, shared, oversold, pass ? "PASS" : "FAIL");
    free(r.holds);
    free(r.recs);
    return pass ? 0 : 1;
}
