/* nodes.c - one hiredis connection per Redis node, every call bounded by
 * the --timeout-ms of the command line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>

#include "ctl.h"

int ctl_nodes_parse(const ctl_opts *o, ctl_nodes *ns, char *err, size_t errlen)
{
    const char *p = o->redis;

    memset(ns, 0, sizeof(*ns));
    for (;;) {
        /* libdlock's split: a sentinel:// address keeps its own commas. */
        size_t len = dlock_addr_span(p);
        const char *comma = p[len] == ',' ? p + len : NULL;
        ctl_node *n;
        char why[DLOCK_ERRSTR_LEN];

        if (ns->n == DLOCK_MAX_NODES) {
            snprintf(err, errlen, "--redis: more than %d addresses", DLOCK_MAX_NODES);
            return -1;
        }
        n = &ns->node[ns->n];
        if (len >= sizeof(n->addr)) {
            snprintf(err, errlen, "--redis: address %zu bytes long", len);
            return -1;
        }
        memcpy(n->addr, p, len);
        n->addr[len] = '\0';
        /* libdlock's own parser: dlockctl takes exactly the addresses the
         * applications' --redis takes. */
        if (dlock_addr_parse(n->addr, n->host, sizeof(n->host), &n->port, why, sizeof(why)) !=
            DLOCK_OK) {
            snprintf(err, errlen, "--redis: %s", why);
            return -1;
        }
        n->tls = strncasecmp(n->addr, "rediss://", 9) == 0 || o->tls_ca != NULL;
        if (n->tls && n->port == 0) {
            snprintf(err, errlen, "--redis: \"%s\" is a unix socket: Redis speaks TLS on TCP "
                     "ports only", n->addr);
            return -1;
        }
        if (dlock_addr_credentials(n->addr, n->user, sizeof(n->user), n->password,
                                   sizeof(n->password), why, sizeof(why)) != DLOCK_OK) {
            snprintf(err, errlen, "--redis: %s", why);
            return -1;
        }
        if (n->password[0] != '\0') {
            /* One set of credentials for every node, as libdlock's client
             * has: --password or the URLs, and the URLs alike. */
            const char *pw = o->password != NULL ? o->password : ns->n > 0 ? ns->node[0].password : NULL;
            const char *us = o->password != NULL ? (o->user != NULL ? o->user : "")
                                                 : ns->n > 0 ? ns->node[0].user : NULL;
            if (pw != NULL && (strcmp(pw, n->password) != 0 || strcmp(us, n->user) != 0)) {
                snprintf(err, errlen, "--redis: address %zu: its user or password differs from "
                         "the others' (or --password's); give one set for every node", ns->n + 1);
                return -1;
            }
            /* What is printed about the node never shows the password. */
            char shown[sizeof(n->addr)];
            int v6 = strchr(n->host, ':') != NULL;

            snprintf(shown, sizeof(shown), "%s://%.100s:***@%s%.100s%s:%d",
                     n->tls ? "rediss" : "redis", n->user, v6 ? "[" : "", n->host,
                     v6 ? "]" : "", n->port);
            memcpy(n->addr, shown, sizeof(shown));
        }
        if (n->port < 0) {
            /* dlockctl talks to fixed nodes: it does not follow Sentinel. */
            snprintf(err, errlen, "--redis: \"%s\": give the master's host:port, dlockctl does not "
                     "resolve sentinel:// addresses", n->addr);
            return -1;
        }
        ns->n++;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    ns->quorum = ns->n / 2 + 1;
    {
        int any = 0;

        for (size_t i = 0; i < ns->n; i++)
            any |= ns->node[i].tls;
        if (!any && o->tls_cert != NULL) {
            /* A certificate with no TLS node would go unused in plaintext. */
            snprintf(err, errlen, "--tls-cert given, but no node uses TLS: add --tls-ca, or "
                     "write the nodes as rediss://host:port");
            return -1;
        }
        if (any && ctl_tls_new(o, &ns->tls, err, errlen) != 0)
            return -1;
    }
    return 0;
}

static void node_down(ctl_node *n, const char *what, const char *why)
{
    snprintf(n->err, sizeof(n->err), "%s: %s", what, why);
    if (n->ctx != NULL) {
        redisFree(n->ctx);
        n->ctx = NULL;
    }
}

void ctl_node_bad_reply(ctl_node *n, const char *what, const redisReply *r)
{
    /* A node that wants a password says NOAUTH: name the option that gives one. */
    if (r != NULL && r->type == REDIS_REPLY_ERROR)
        snprintf(n->err, sizeof(n->err), "%s: %.*s%s", what, (int)r->len, r->str,
                 r->len >= 6 && strncmp(r->str, "NOAUTH", 6) == 0 ? " (give --password, or $DLOCKCTL_PASSWORD)" : "");
    else
        snprintf(n->err, sizeof(n->err), "%s: unexpected reply (type %d)", what,
                 r != NULL ? r->type : -1);
}

redisReply *ctl_node_cmd(ctl_node *n, int argc, const char *const *argv)
{
    redisReply *r;

    if (n->ctx == NULL)
        return NULL;
    r = redisCommandArgv(n->ctx, argc, (const char **)argv, NULL);
    if (r == NULL) {
        /* hiredis cannot resync a connection after an I/O error or a
         * timeout (a late reply would answer the next command): drop it. */
        char why[160];
        /* hiredis 0.14 reports its read timeout as EAGAIN's text, 1.x as
         * REDIS_ERR_TIMEOUT: say what it is. */
        int timed_out = n->ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
#ifdef REDIS_ERR_TIMEOUT
        timed_out = timed_out || n->ctx->err == REDIS_ERR_TIMEOUT;
#endif
        if (timed_out)
            snprintf(why, sizeof(why), "no answer within the timeout (--timeout-ms)");
        else
            snprintf(why, sizeof(why), "%s", n->ctx->errstr[0] != '\0' ? n->ctx->errstr : "no reply");
        node_down(n, argv[0], why);
    }
    return r;
}

static int node_auth(const ctl_opts *o, ctl_node *n)
{
    const char *argv[3] = {"AUTH", NULL, NULL};
    int argc = 0;
    redisReply *r;
    int ok;

    if (o->password == NULL && n->password[0] == '\0')
        return 0;
    argc = 1;
    if (o->password != NULL) {
        if (o->user != NULL)
            argv[argc++] = o->user;
        argv[argc++] = o->password;
    } else {
        /* The credentials of a redis://user:password@host address. */
        if (n->user[0] != '\0')
            argv[argc++] = n->user;
        argv[argc++] = n->password;
    }
    r = ctl_node_cmd(n, argc, argv);
    if (r == NULL)
        return -1;
    ok = r->type == REDIS_REPLY_STATUS;
    if (!ok)
        ctl_node_bad_reply(n, "AUTH", r);
    freeReplyObject(r);
    if (!ok) {
        redisFree(n->ctx);
        n->ctx = NULL;
    }
    return ok ? 0 : -1;
}

size_t ctl_nodes_connect(const ctl_opts *o, ctl_nodes *ns)
{
    struct timeval tv = {o->timeout_ms / 1000, (o->timeout_ms % 1000) * 1000};
    size_t up = 0;

    for (size_t i = 0; i < ns->n; i++) {
        ctl_node *n = &ns->node[i];
        n->err[0] = '\0';
        n->ctx = n->port == 0 ? redisConnectUnixWithTimeout(n->host, tv)
                              : redisConnectWithTimeout(n->host, n->port, tv);
        if (n->ctx == NULL) {
            snprintf(n->err, sizeof(n->err), "connect: out of memory");
            continue;
        }
        if (n->ctx->err != 0) {
            char why[160];
            snprintf(why, sizeof(why), "%s", n->ctx->errstr);
            node_down(n, "connect", why);
            continue;
        }
        /* The connect timeout does not cover later reads and writes: without
         * this, a node that accepts and then stalls (SIGSTOP) hangs us. */
        if (redisSetTimeout(n->ctx, tv) != REDIS_OK) {
            node_down(n, "connect", "cannot set the command timeout");
            continue;
        }
        if (n->tls) {
            char why[200];

            /* After redisSetTimeout: the handshake is bounded like a command. */
            if (ctl_tls_start(ns->tls, n->ctx, n->host, why, sizeof(why)) != 0) {
                node_down(n, "connect", why);
                continue;
            }
        }
        if (node_auth(o, n) != 0)
            continue;
        up++;
    }
    return up;
}

void ctl_nodes_close(ctl_nodes *ns)
{
    for (size_t i = 0; i < ns->n; i++) {
        if (ns->node[i].ctx != NULL)
            redisFree(ns->node[i].ctx);
        ns->node[i].ctx = NULL;
    }
    ctl_tls_free(ns->tls);
    ns->tls = NULL;
}
