/* client.c - options, client creation and teardown, and accessors. */
#include "dlock_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <strings.h>

/* Source of dlock_client.id; 0 is never handed out. */
static _Atomic uint64_t next_client_id = 1;

void dlock_options_init(dlock_options *opts)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof(*opts));
    opts->key_prefix = "";
    opts->connect_timeout_ms = 200;
    opts->command_timeout_ms = 100;
    opts->drift_factor = 0.01;
    opts->drift_min_ms = 2;
    opts->retry_base_ms = 2;
    opts->retry_max_ms = 50;
    opts->retry_fixed_ms = 0;
    opts->retry_jitter_ms = 0;
    opts->retry_unavailable = 0;
    opts->wake_on_release = 1;
}

/* An empty string counts as "not set": an unset environment variable often
 * arrives as "", and AUTH with an empty password is never what was meant. */
static int set(const char *s)
{
    return s != NULL && s[0] != '\0';
}

static int validate(const dlock_options *o, char *why, size_t whylen)
{
    if (o->addrs == NULL || o->n_addrs == 0 || o->n_addrs > DLOCK_MAX_NODES) {
        snprintf(why, whylen, "need 1..%d addresses (got %zu%s)", DLOCK_MAX_NODES, o->n_addrs,
                 o->addrs == NULL ? ", addrs is NULL" : "");
        return -1;
    }
    if (o->connect_timeout_ms <= 0 || o->command_timeout_ms <= 0) {
        snprintf(why, whylen, "timeouts must be > 0 ms (connect %d, command %d)",
                 o->connect_timeout_ms, o->command_timeout_ms);
        return -1;
    }
    if (!isfinite(o->drift_factor) || o->drift_factor < 0.0 || o->drift_factor >= 1.0 ||
        o->drift_min_ms < 0) {
        snprintf(why, whylen, "drift_factor must be in [0, 1) and drift_min_ms >= 0");
        return -1;
    }
    if (o->retry_base_ms <= 0 || o->retry_max_ms <= 0 || o->retry_fixed_ms < 0 ||
        o->retry_jitter_ms < 0) {
        snprintf(why, whylen,
                 "retry_base_ms and retry_max_ms must be > 0, retry_fixed_ms and "
                 "retry_jitter_ms >= 0");
        return -1;
    }
    if (set(o->username) && !set(o->password)) {
        snprintf(why, whylen, "username given without a password");
        return -1;
    }
    if (o->key_prefix != NULL && strlen(o->key_prefix) >= DLOCK_MAX_KEY_LEN) {
        snprintf(why, whylen, "key_prefix is %zu bytes; it must leave room for a resource "
                 "within %d", strlen(o->key_prefix), DLOCK_MAX_KEY_LEN);
        return -1;
    }
    return 0;
}

/* Two sentinel addresses are the same node when they name the same master
 * to a common sentinel. A sentinel address and a plain one cannot be
 * compared before the sentinels are asked: that mix is the caller's care. */
static int same_sentinel_node(const dlock__addr *a, const dlock__addr *b)
{
    if (strcmp(a->master_name, b->master_name) != 0)
        return 0;
    for (size_t i = 0; i < a->n_sentinels; i++) {
        for (size_t j = 0; j < b->n_sentinels; j++) {
            if (a->sentinels[i].port == b->sentinels[j].port &&
                strcasecmp(a->sentinels[i].host, b->sentinels[j].host) == 0)
                return 1;
        }
    }
    return 0;
}

/* Two entries naming one node would count it twice toward the quorum: with
 * "a,a,b" node a alone would be a majority. Compared after parsing, so
 * "127.0.0.1:6379" and "127.0.0.1:06379" are one node; host names without
 * case (DNS is case-insensitive). Names that differ but resolve to one
 * server ("localhost" and "127.0.0.1") are not caught: that needs DNS. */
static int same_node(const dlock__addr *a, const dlock__addr *b)
{
    if (a->is_sentinel || b->is_sentinel)
        return a->is_sentinel && b->is_sentinel && same_sentinel_node(a, b);
    if (a->is_unix != b->is_unix)
        return 0;
    if (a->is_unix)
        return strcmp(a->host, b->host) == 0;
    return a->port == b->port && strcasecmp(a->host, b->host) == 0;
}

/* Where addresses cannot be compared as text (a sentinel:// node, or two
 * host names for one server: "localhost" and "127.0.0.1"), the servers
 * themselves are asked, by run id, before the client is handed out. One
 * PING round goes to the nodes that connected (their INFO server rode
 * along with the connect, conn.c). A node found to reach another's server
 * then fails dlock_client_new with the whole message. Nodes that cannot be
 * reached now are checked on first contact (refused for good then). One
 * round per client of two or more nodes, at creation only. Client mutex
 * held. 0, or -1 with why. */
static int refuse_same_servers(dlock_client *c, char *why, size_t whylen)
{
    static const char *const ping[1] = {"PING"};
    static const size_t ping_len[1] = {4};
    dlock__result res[DLOCK_MAX_NODES];
    uint32_t up = 0;

    for (size_t i = 0; i < c->n; i++)
        if (c->nodes[i].state == DLOCK__UP)
            up |= 1u << i;
    /* Also for one node: its INFO tells a Redis Cluster node, refused here
     * rather than by CROSSSLOT at the first call. */
    if (up == 0)
        return 0;
    memset(res, 0, sizeof(res));
    dlock__round(c, up, 0, 1, (const char **)ping, ping_len, res, NULL, NULL);
    dlock__results_clear(res, DLOCK_MAX_NODES);
    /* The caller's statistics start at its first call. */
    memset(&c->stats, 0, sizeof(c->stats));
    for (size_t i = 0; i < c->n; i++) {
        if (c->nodes[i].same_as != 0) {
            snprintf(why, whylen, "%s", c->nodes[i].same_detail);
            return -1;
        }
    }
    return 0;
}

/* The client's credentials: the options', or those of the redis:// URLs
 * (redis://user:password@host). One client sends one AUTH to every node,
 * so wherever they are given they must agree: a list with two different
 * passwords is refused rather than half of it failing AUTH later. */
static int pick_credentials(const dlock_options *o, const dlock_client *c, const char **user,
                            const char **pass, char *why, size_t whylen)
{
    const char *from = "the options";
    char where[32];

    *user = set(o->username) ? o->username : NULL;
    *pass = set(o->password) ? o->password : NULL;
    for (size_t i = 0; i < c->n; i++) {
        const dlock__addr *a = &c->nodes[i].addr;

        if (!a->has_auth)
            continue;
        if (*pass == NULL) {
            *user = a->user[0] != '\0' ? a->user : NULL;
            *pass = a->password;
            snprintf(where, sizeof(where), "addrs[%zu]", i);
            from = where;
            continue;
        }
        if (strcmp(*pass, a->password) != 0 || strcmp(*user != NULL ? *user : "", a->user) != 0) {
            snprintf(why, whylen, "addrs[%zu] \"%.60s\": its user or password differs from %s; "
                     "one client authenticates to every node with one user and password", i, a->text, from);
            return -1;
        }
    }
    return 0;
}

static char *dup_or_null(const char *s, int *oom)
{
    char *d;

    if (!set(s))
        return NULL;
    d = strdup(s);
    if (d == NULL)
        *oom = 1;
    return d;
}

/* A condition variable on CLOCK_MONOTONIC, for waits until an instant of
 * the lease clock (converted by dlock__cond_deadline): a realtime one would
 * wake early or late when the wall clock is stepped. 0, or -1. */
static int monotonic_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t ca;
    int ok;

    if (pthread_condattr_init(&ca) != 0)
        return -1;
    ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(cond, &ca) == 0;
    pthread_condattr_destroy(&ca);
    return ok ? 0 : -1;
}

/* The client's mutex and condition variables, all of them or none: NULL,
 * or why not (what was made is destroyed again). */
static const char *sync_init(dlock_client *c)
{
    const char *why = "cannot create the client mutex";

    if (pthread_mutex_init(&c->mu, NULL) != 0)
        return why;
    /* The watchdog's: it sleeps on wd_cond until a renewal is due;
     * cb_cond is waited on without a deadline (dlock_lock_free during
     * on_lost). */
    why = "cannot create the watchdog condition variable";
    if (monotonic_cond_init(&c->wd_cond) != 0)
        goto no_wd_cond;
    if (pthread_cond_init(&c->cb_cond, NULL) != 0)
        goto no_cb_cond;
    /* The sentinel resolver's (sentinel.c): rs_done is waited on until an
     * instant of dlock_now_ms, rs_cond without a deadline. */
    why = "cannot create the sentinel condition variables";
    if (monotonic_cond_init(&c->rs_done) != 0)
        goto no_rs_done;
    if (pthread_cond_init(&c->rs_cond, NULL) != 0)
        goto no_rs_cond;
    return NULL;
no_rs_cond:
    pthread_cond_destroy(&c->rs_done);
no_rs_done:
    pthread_cond_destroy(&c->cb_cond);
no_cb_cond:
    pthread_cond_destroy(&c->wd_cond);
no_wd_cond:
    pthread_mutex_destroy(&c->mu);
    return why;
}

/* c's nodes from the addresses of o, each parsed, none named twice. 0, or
 * -1 with why. */
static int add_nodes(dlock_client *c, const dlock_options *o, char *why, size_t whylen)
{
    for (size_t i = 0; i < c->n; i++) {
        char perr[200];
        if (dlock__addr_parse(o->addrs[i], &c->nodes[i].addr, perr, sizeof(perr)) != 0) {
            snprintf(why, whylen, "addrs[%zu]: %s", i, perr);
            return -1;
        }
        for (size_t j = 0; j < i; j++) {
            if (same_node(&c->nodes[j].addr, &c->nodes[i].addr)) {
                snprintf(why, whylen,
                         "addrs[%zu] and addrs[%zu] are the same node \"%.100s\": it would "
                         "count twice toward the quorum",
                         j, i, c->nodes[i].addr.text);
                return -1;
            }
        }
    }
    return 0;
}

/* TLS: every node's with o->tls, rediss:// nodes' otherwise; the client's
 * SSL context made once, here, when any node uses it. 0, or -1 with why. */
static int take_tls(dlock_client *c, const dlock_options *o, char *why, size_t whylen)
{
    int any = 0;

    for (size_t i = 0; i < c->n; i++) {
        dlock__addr *a = &c->nodes[i].addr;

        if (o->tls && a->is_unix) {
            snprintf(why, whylen, "addrs[%zu] \"%.100s\": a unix socket, and tls is set: Redis "
                     "speaks TLS on TCP ports only", i, a->text);
            return -1;
        }
        if (o->tls)
            a->tls = 1;
        any |= a->tls;
    }
    if (!any) {
        /* CA or certificate files with no TLS node: a forgotten rediss://
         * or tls = 1 would otherwise send everything in plaintext. */
        if (set(o->tls_ca_file) || set(o->tls_ca_dir) || set(o->tls_cert_file) ||
            set(o->tls_key_file) || set(o->tls_server_name) || o->tls_insecure_skip_verify) {
            snprintf(why, whylen, "TLS files or settings given, but no node uses TLS: set tls, "
                     "or write the nodes as rediss://host:port");
            return -1;
        }
        return 0;
    }
    return dlock__tls_new(o, &c->tls, why, whylen);
}

/* The timeouts, drift, retry and wake settings of o (validated). */
static void take_settings(dlock_client *c, const dlock_options *o)
{
    int64_t h = 2 * (int64_t)o->command_timeout_ms;

    c->connect_timeout_ms = o->connect_timeout_ms;
    c->command_timeout_ms = o->command_timeout_ms;
    c->drift_factor = o->drift_factor;
    c->drift_min_ms = o->drift_min_ms;
    c->retry_base_ms = o->retry_base_ms;
    c->retry_max_ms = o->retry_max_ms;
    c->retry_fixed_ms = o->retry_fixed_ms;
    c->retry_jitter_ms = o->retry_jitter_ms;
    c->retry_unavailable = o->retry_unavailable;
    c->wake_on_release = o->wake_on_release != 0;
    c->cache_on = o->cache_locks != 0;
    /* The woken waiter needs one wake-up plus one acquire round to claim
     * the key: 2 command timeouts. The ceiling bounds what a reservation
     * nobody claims costs (a waiter that died after its wake-up, a
     * leftover on a slow Redlock node); past it the key is simply free. */
    c->handoff_ms = h < 10 ? 10 : h > 250 ? 250 : (int)h;
}

/* The first connections, all nodes in parallel, and the check that no two
 * reach one server. 0, or -1 with why. */
static int connect_first(dlock_client *c, char *why, size_t whylen)
{
    dlock__result res[DLOCK_MAX_NODES];
    int rc;

    memset(res, 0, sizeof(res));
    /* Unreachable nodes are not an error here: Redlock works with a
     * majority, and every later call retries the missing connections. */
    pthread_mutex_lock(&c->mu);
    dlock__connect_nodes(c, dlock__all_nodes(c), res);
    rc = refuse_same_servers(c, why, whylen);
    if (rc == 0)
        c->count_reconnects = 1;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

dlock_err dlock__client_make(const dlock_options *opts, int connect, dlock_client **out,
                             char *errbuf, size_t errbuf_len)
{
    dlock_err rc = DLOCK_ERR_ARG;
    dlock_client *c = NULL;
    char why[DLOCK_ERRSTR_LEN] = "";
    const char *user = NULL, *pass = NULL, *sync_why;
    int oom = 0;

    if (out != NULL)
        *out = NULL;
    if (opts == NULL || out == NULL) {
        snprintf(why, sizeof(why), "%s is NULL", opts == NULL ? "opts" : "out");
        goto fail;
    }
    if (validate(opts, why, sizeof(why)) != 0)
        goto fail;
    c = calloc(1, sizeof(*c));
    sync_why = c == NULL ? "out of memory" : sync_init(c);
    if (sync_why != NULL) {
        /* Nothing else is made yet, and dlock_client_free needs the mutex. */
        free(c);
        c = NULL;
        rc = DLOCK_ERR_NOMEM;
        snprintf(why, sizeof(why), "%s", sync_why);
        goto fail;
    }
    c->cache_pipe[0] = c->cache_pipe[1] = -1; /* none yet: dlock_client_free closes what is made */
    /* Process-wide and never reused, unlike the client's address. */
    c->id = atomic_fetch_add(&next_client_id, 1);
    c->pid = getpid();
    c->n = opts->n_addrs;
    /* A majority: two majorities always share a node, so two clients can
     * never both hold a quorum of the same key. */
    c->quorum = c->n / 2 + 1;
    if (add_nodes(c, opts, why, sizeof(why)) != 0 ||
        pick_credentials(opts, c, &user, &pass, why, sizeof(why)) != 0 ||
        take_tls(c, opts, why, sizeof(why)) != 0)
        goto fail;
    c->username = dup_or_null(user, &oom);
    c->password = dup_or_null(pass, &oom);
    c->prefix = strdup(opts->key_prefix != NULL ? opts->key_prefix : "");
    if (oom || c->prefix == NULL) {
        rc = DLOCK_ERR_NOMEM;
        snprintf(why, sizeof(why), "out of memory");
        goto fail;
    }
    c->prefix_len = strlen(c->prefix);
    take_settings(c, opts);
    dlock__scripts_init(c);
    dlock__rng_seed(c);
    /* Sentinel nodes: their masters asked for before the first connect,
     * and the thread that asks later without the mutex. */
    if (connect && dlock__sentinel_start(c) != 0) {
        rc = DLOCK_ERR_NOMEM;
        snprintf(why, sizeof(why), "cannot start the sentinel resolver thread");
        goto fail;
    }
    if (connect && connect_first(c, why, sizeof(why)) != 0)
        goto fail;
    /* After the first connections: the listener subscribes on its own. */
    if (connect && dlock__cache_start(c, why, sizeof(why)) != 0) {
        rc = DLOCK_ERR_NOMEM;
        goto fail;
    }
    if (errbuf != NULL && errbuf_len > 0) {
        errbuf[0] = '\0';
        /* A majority of an even count is half plus one: 2 nodes need both
         * (like 1 needs 1), 4 need 3 (like 3 need 2) - the extra node adds
         * a failure point and no tolerance. Said, not refused: it is safe. */
        if (c->n == 2 || c->n == 4)
            snprintf(errbuf, errbuf_len,
                     "note: %zu nodes (quorum %zu) tolerate %zu failed node%s, as %zu node%s "
                     "would: an odd count is the better choice",
                     c->n, c->quorum, c->n - c->quorum, c->n - c->quorum == 1 ? "" : "s",
                     c->n - 1, c->n - 1 == 1 ? "" : "s");
    }
    *out = c;
    return DLOCK_OK;
fail:
    if (errbuf != NULL && errbuf_len > 0)
        snprintf(errbuf, errbuf_len, "%s", why);
    /* c is NULL, or has its mutex and condition variables and the zero of
     * calloc in every field not set yet: dlock_client_free frees what was
     * made and passes over the rest. */
    dlock_client_free(c);
    return rc;
}

dlock_err dlock_client_new(const dlock_options *opts, dlock_client **out, char *errbuf,
                           size_t errbuf_len)
{
    return dlock__client_make(opts, 1, out, errbuf, errbuf_len);
}

void dlock_client_free(dlock_client *c)
{
    int child;

    if (c == NULL)
        return;
    /* In a child of fork() only the child's copies are freed: its
     * descriptors (closing them leaves the parent's connections open) and
     * its memory. The watchdog and resolver threads are the parent's, and
     * the mutex and condition variables may have been copied in use. */
    child = dlock__forked(c);
    if (!child) {
        /* First: giving up the kept locks needs the connections. */
        dlock__cache_stop(c);
        dlock__watchdog_stop(c);
        dlock__sentinel_stop(c);
        /* Handles outlive the client: dlock_lock_free must find none. */
        pthread_mutex_lock(&c->mu);
        dlock__held_clear(c);
        pthread_mutex_unlock(&c->mu);
    }
    dlock__wakers_free(c);
    for (size_t i = 0; i < c->n; i++)
        dlock__node_close(&c->nodes[i]);
    free(c->username);
    free(c->password);
    free(c->prefix);
    dlock__tls_free(c->tls);
    if (!child) {
        pthread_cond_destroy(&c->wd_cond);
        pthread_cond_destroy(&c->cb_cond);
        pthread_cond_destroy(&c->rs_cond);
        pthread_cond_destroy(&c->rs_done);
        pthread_mutex_destroy(&c->mu);
    }
    free(c);
}

const char *dlock_client_errstr(dlock_client *c, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return "";
    if (c == NULL) {
        snprintf(buf, len, "client is NULL");
        return buf;
    }
    /* Under the mutex: every call writes errstr with it held, so the copy
     * is one whole message, never half of one and half of the next. A
     * child of fork() reads its own copy without it (dlock__enter). */
    if (dlock__forked(c)) {
        snprintf(buf, len, "%s", c->errstr);
        return buf;
    }
    pthread_mutex_lock(&c->mu);
    snprintf(buf, len, "%s", c->errstr);
    pthread_mutex_unlock(&c->mu);
    return buf;
}

size_t dlock_client_nodes(const dlock_client *c)
{
    return c != NULL ? c->n : 0;
}

size_t dlock_client_quorum(const dlock_client *c)
{
    return c != NULL ? c->quorum : 0;
}
