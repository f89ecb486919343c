/* cmd_locks.c - dlockctl list and show: what libdlock holds in Redis, node
 * by node (holder token, PTTL, fence), read-only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

/* What one node holds for one resource. */
typedef struct lock_row {
    size_t node;                         /* index into ctl_nodes */
    char resource[DLOCK_MAX_KEY_LEN + 1];
    char token[DLOCK_TOKEN_LEN];         /* "" when the node holds no lock */
    long long pttl;                      /* ms left; -2 no lock key, -1 key without TTL */
    long long fence;                     /* the counter; 0 none yet, -1 not an integer */
} lock_row;

/* GET key into buf: 1 a string, 0 no such key, -1 failure (node->err). */
static int get_string(ctl_node *n, const char *key, char *buf, size_t len, size_t *got)
{
    const char *cmd[2] = {"GET", key};
    redisReply *r = ctl_node_cmd(n, 2, cmd);
    int rc = -1;

    if (r == NULL)
        return -1;
    if (r->type == REDIS_REPLY_NIL) {
        rc = 0;
    } else if (r->type == REDIS_REPLY_STRING) {
        size_t take = r->len < len - 1 ? r->len : len - 1;
        memcpy(buf, r->str, take);
        buf[take] = '\0';
        *got = r->len;
        rc = 1;
    } else {
        ctl_node_bad_reply(n, "GET", r);
    }
    freeReplyObject(r);
    return rc;
}

static int get_pttl(ctl_node *n, const char *key, long long *out)
{
    const char *cmd[2] = {"PTTL", key};
    redisReply *r = ctl_node_cmd(n, 2, cmd);
    int rc = -1;

    if (r == NULL)
        return -1;
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        rc = 0;
    } else {
        ctl_node_bad_reply(n, "PTTL", r);
    }
    freeReplyObject(r);
    return rc;
}

static int get_fence(ctl_node *n, const char *key, long long *out)
{
    char buf[32], *end = NULL;
    size_t len = 0;
    int got = get_string(n, key, buf, sizeof(buf), &len);

    if (got < 0)
        return -1;
    *out = 0;
    if (got == 1) {
        long long v = strtoll(buf, &end, 10);
        /* INCR keeps it a positive integer; anything else was written by hand. */
        *out = (len < sizeof(buf) && end != buf && *end == '\0' && v > 0) ? v : -1;
    }
    return 0;
}

/* Fills row for resource on node i: 0, or -1 (the node's err says why). */
static int read_row(const ctl_opts *o, ctl_nodes *ns, size_t i, const char *resource,
                    lock_row *row)
{
    ctl_node *n = &ns->node[i];
    ctl_keys k;
    char value[64];
    size_t len = 0;
    int got;

    memset(row, 0, sizeof(*row));
    row->node = i;
    row->pttl = -2;
    snprintf(row->resource, sizeof(row->resource), "%s", resource);
    if (ctl_resource_keys(o->prefix, resource, &k, n->err, sizeof(n->err)) != 0)
        return -1;
    got = get_string(n, k.lock, value, sizeof(value), &len);
    if (got < 0)
        return -1;
    if (got == 1 && ctl_is_token(value, len))
        memcpy(row->token, value, DLOCK_TOKEN_LEN);
    if (get_pttl(n, k.lock, &row->pttl) != 0 || get_fence(n, k.fence, &row->fence) != 0)
        return -1;
    return 0;
}

/* Column widths of the table: the longest resource and node name shown
 * (at least 24), so long names never push a row's columns out of line. */
typedef struct widths {
    int resource, node;
} widths;

static widths table_widths(const ctl_nodes *ns, const lock_row *rows, size_t n)
{
    widths w = {24, 24};

    for (size_t k = 0; k < n; k++) {
        int lr = (int)strlen(rows[k].resource), ln = (int)strlen(ns->node[rows[k].node].addr);

        if (lr > w.resource)
            w.resource = lr;
        if (ln > w.node)
            w.node = ln;
    }
    return w;
}

static void print_header(widths w)
{
    printf("%-*s %-*s %-32s %9s %8s\n", w.resource, "RESOURCE", w.node, "NODE", "TOKEN", "PTTL_MS",
           "FENCE");
}

static void print_row(const ctl_nodes *ns, const lock_row *r, widths w)
{
    char pttl[24], fence[24];

    if (r->pttl >= 0)
        snprintf(pttl, sizeof(pttl), "%lld", r->pttl);
    else
        snprintf(pttl, sizeof(pttl), "%s", r->pttl == -1 ? "no-ttl" : "-");
    if (r->fence > 0)
        snprintf(fence, sizeof(fence), "%lld", r->fence);
    else
        snprintf(fence, sizeof(fence), "%s", r->fence == 0 ? "-" : "invalid");
    printf("%-*s %-*s %-32s %9s %8s\n", w.resource, r->resource, w.node, ns->node[r->node].addr,
           r->token[0] != '\0' ? r->token : "-", pttl, fence);
}

static json_t *row_json(const ctl_nodes *ns, const lock_row *r)
{
    return json_pack("{s:s, s:s, s:s?, s:o, s:o}", "resource", r->resource, "node",
                     ns->node[r->node].addr, "token", r->token[0] != '\0' ? r->token : NULL,
                     "pttl_ms", r->pttl >= 0 ? json_integer(r->pttl) : json_null(), "fence",
                     r->fence > 0 ? json_integer(r->fence) : json_null());
}

/* ---- list ---- */

typedef struct row_list {
    lock_row *v;
    size_t n, cap;
} row_list;

static lock_row *row_list_add(row_list *l)
{
    if (l->n == l->cap) {
        size_t cap = l->cap != 0 ? 2 * l->cap : 64;
        lock_row *v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        l->v = v;
        l->cap = cap;
    }
    return &l->v[l->n++];
}

static int row_cmp(const void *a, const void *b)
{
    const lock_row *x = a, *y = b;
    int c = strcmp(x->resource, y->resource);
    return c != 0 ? c : (x->node > y->node) - (x->node < y->node);
}

/* One SCAN batch's key: a lock when its value is a token and it has a TTL
 * (a fence counter or a foreign key under the prefix is neither). */
static int scan_key(const ctl_opts *o, ctl_nodes *ns, size_t i, const redisReply *key,
                    row_list *rows)
{
    /* The resource is what follows <prefix>lock: (ctl_scan_pattern). */
    size_t plen = strlen(o->prefix) + strlen(DLOCK_LOCK_NS);
    lock_row row, *slot;

    if (key->type != REDIS_REPLY_STRING || key->len <= plen ||
        key->len > DLOCK_MAX_KEY_LEN + strlen(DLOCK_LOCK_NS) ||
        memchr(key->str, '\0', key->len) != NULL)
        return 0;
    if (read_row(o, ns, i, key->str + plen, &row) != 0) {
        if (ns->node[i].ctx == NULL)
            return -1;
        /* The node answered, with WRONGTYPE: a hash or a list under the
         * prefix is not a lock of ours. Skip it, and the node is fine. */
        ns->node[i].err[0] = '\0';
        return 0;
    }
    if (row.token[0] == '\0' || row.pttl < 0)
        return 0;
    slot = row_list_add(rows);
    if (slot == NULL) {
        snprintf(ns->node[i].err, sizeof(ns->node[i].err), "out of memory");
        return -1;
    }
    *slot = row;
    return 0;
}

static int scan_node(const ctl_opts *o, ctl_nodes *ns, size_t i, const char *pattern,
                     row_list *rows)
{
    ctl_node *n = &ns->node[i];
    char cursor[32] = "0";

    do {
        const char *cmd[6] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
        redisReply *r = ctl_node_cmd(n, 6, cmd);
        int bad;
        if (r == NULL)
            return -1;
        bad = r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
              r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= sizeof(cursor) ||
              r->element[1]->type != REDIS_REPLY_ARRAY;
        if (bad) {
            ctl_node_bad_reply(n, "SCAN", r);
            freeReplyObject(r);
            return -1;
        }
        memcpy(cursor, r->element[0]->str, r->element[0]->len);
        cursor[r->element[0]->len] = '\0';
        for (size_t k = 0; k < r->element[1]->elements; k++) {
            if (scan_key(o, ns, i, r->element[1]->element[k], rows) != 0) {
                freeReplyObject(r);
                return -1;
            }
        }
        freeReplyObject(r);
        /* SCAN's full iteration ends at cursor 0, guaranteed by Redis. */
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

int ctl_cmd_list(const ctl_opts *o, ctl_nodes *ns, int argc, char **argv)
{
    char pattern[2 * DLOCK_MAX_KEY_LEN + sizeof(DLOCK_LOCK_NS) + 2];
    row_list rows = {0};
    size_t answered = 0;
    int rc;

    if (argc != 0)
        return ctl_usage_error("list takes no operand (got '%s'); use --prefix P", argv[0]);
    if (strlen(o->prefix) >= DLOCK_MAX_KEY_LEN ||
        ctl_scan_pattern(o->prefix, pattern, sizeof(pattern)) != 0)
        return ctl_usage_error("--prefix is longer than %d bytes", DLOCK_MAX_KEY_LEN - 1);
    ctl_nodes_connect(o, ns);
    for (size_t i = 0; i < ns->n; i++)
        if (ns->node[i].ctx != NULL && scan_node(o, ns, i, pattern, &rows) == 0)
            answered++;
    if (rows.n > 0)
        qsort(rows.v, rows.n, sizeof(rows.v[0]), row_cmp);
    ctl_warn_down(ns);
    if (o->json) {
        json_t *locks = json_array();
        for (size_t k = 0; locks != NULL && k < rows.n; k++) {
            if (json_array_append_new(locks, row_json(ns, &rows.v[k])) != 0) {
                json_decref(locks);
                locks = NULL;
            }
        }
        rc = ctl_json_print(json_pack("{s:s, s:o?, s:o?}", "prefix", o->prefix, "nodes",
                                      ctl_json_nodes(ns), "locks", locks));
    } else {
        widths w = table_widths(ns, rows.v, rows.n);

        print_header(w);
        for (size_t k = 0; k < rows.n; k++)
            print_row(ns, &rows.v[k], w);
        printf("%zu lock key(s) on %zu/%zu nodes answering (quorum %zu)\n", rows.n, answered,
               ns->n, ns->quorum);
        rc = fflush(stdout) == 0 ? 0 : -1;
    }
    free(rows.v);
    return rc == 0 && answered >= ns->quorum ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

/* ---- show ---- */

int ctl_cmd_show(const ctl_opts *o, ctl_nodes *ns, int argc, char **argv)
{
    lock_row rows[DLOCK_MAX_NODES];
    int ok[DLOCK_MAX_NODES] = {0};
    size_t answered = 0, held_on = 0;
    const char *holder = NULL;
    ctl_keys k;
    char err[256];
    int rc;

    if (argc != 1)
        return ctl_usage_error("show needs exactly one RESOURCE");
    if (ctl_resource_keys(o->prefix, argv[0], &k, err, sizeof(err)) != 0)
        return ctl_usage_error("show: %s", err);
    ctl_nodes_connect(o, ns);
    for (size_t i = 0; i < ns->n; i++) {
        if (ns->node[i].ctx != NULL && read_row(o, ns, i, argv[0], &rows[i]) == 0) {
            ok[i] = 1;
            answered++;
        }
    }
    /* The holder is the token a quorum agrees on; Redlock grants nothing less. */
    for (size_t i = 0; i < ns->n; i++) {
        size_t same = 0;
        if (!ok[i] || rows[i].token[0] == '\0')
            continue;
        for (size_t j = 0; j < ns->n; j++)
            same += ok[j] && strcmp(rows[j].token, rows[i].token) == 0;
        if (same > held_on) {
            held_on = same;
            holder = rows[i].token;
        }
    }
    if (held_on < ns->quorum)
        holder = NULL;
    ctl_warn_down(ns);
    if (o->json) {
        json_t *nodes = json_array();
        for (size_t i = 0; nodes != NULL && i < ns->n; i++) {
            json_t *e = ok[i] ? row_json(ns, &rows[i])
                              : json_pack("{s:s, s:s}", "node", ns->node[i].addr, "error",
                                          ns->node[i].err);
            if (json_array_append_new(nodes, e) != 0) {
                json_decref(nodes);
                nodes = NULL;
            }
        }
        rc = ctl_json_print(json_pack("{s:s, s:s, s:s, s:s?, s:i, s:i, s:o?}", "resource", argv[0],
                                      "lock_key", k.lock, "fence_key", k.fence, "holder", holder,
                                      "held_on", (int)held_on, "quorum", (int)ns->quorum, "nodes",
                                      nodes));
    } else {
        /* Every node has a row here (ok or DOWN): widths over all of them. */
        widths w = {24, 24};

        for (size_t i = 0; i < ns->n; i++) {
            int ln = (int)strlen(ns->node[i].addr);

            if (ln > w.node)
                w.node = ln;
        }
        if ((int)strlen(argv[0]) > w.resource)
            w.resource = (int)strlen(argv[0]);
        printf("resource %s: lock key \"%s\", fence key \"%s\"\n", argv[0], k.lock, k.fence);
        print_header(w);
        for (size_t i = 0; i < ns->n; i++) {
            if (ok[i])
                print_row(ns, &rows[i], w);
            else
                printf("%-*s %-*s DOWN: %s\n", w.resource, argv[0], w.node, ns->node[i].addr,
                       ns->node[i].err);
        }
        if (holder != NULL)
            printf("held by %s on %zu/%zu nodes (quorum %zu)\n", holder, held_on, ns->n,
                   ns->quorum);
        else
            printf("not held: no token on a quorum (%zu of %zu needed)\n", ns->quorum, ns->n);
        rc = fflush(stdout) == 0 ? 0 : -1;
    }
    return rc == 0 && answered >= ns->quorum ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}
