/* ctl.h - dlockctl: what its files share. The options, one connection per
 * Redis node (nodes.c), the key layout of libdlock (keys.c), output in text
 * or JSON (out.c), and one function per subcommand (cmd_*.c).
 *
 * Exit status of every subcommand: CTL_EXIT_OK, CTL_EXIT_FAIL (Redis
 * answered an error, or fewer than a quorum of nodes answered), or
 * CTL_EXIT_USAGE (bad command line, before any network call). */
#ifndef DLOCKCTL_CTL_H
#define DLOCKCTL_CTL_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock.h"

enum { CTL_EXIT_OK = 0, CTL_EXIT_FAIL = 1, CTL_EXIT_USAGE = 2 };

/* Fence values above 2^53 lose precision as Lua numbers, and the raise
 * script compares them in Lua: --raise stops there so "only raise" holds. */
#define CTL_FENCE_RAISE_MAX UINT64_C(9007199254740992)

typedef struct ctl_opts {
    const char *redis;    /* --redis: comma-separated node addresses */
    const char *password; /* --password, or $DLOCKCTL_PASSWORD; NULL = no AUTH */
    const char *user;     /* --user: ACL user for AUTH; NULL = password only */
    const char *prefix;   /* --prefix: libdlock's key_prefix; default "" */
    int timeout_ms;       /* --timeout-ms: connect and each command, per node */
    int json;             /* --json */
    int force;            /* --force (release) */
    uint64_t raise;       /* --raise N (fence); 0 = not given */
    const char *tls_ca;   /* --tls-ca: CAs to verify the nodes by; given: every node over TLS */
    const char *tls_cert; /* --tls-cert: client certificate (with --tls-key) */
    const char *tls_key;  /* --tls-key */
    int help, version;
} ctl_opts;

/* One Redis master. ctx is NULL while down; err then says why. */
typedef struct ctl_node {
    char addr[320];       /* as given in --redis */
    char host[300];       /* host name / IP, or the unix socket path */
    int port;             /* 0 = unix socket */
    char user[256];       /* redis://user:password@ credentials ("" when none) */
    char password[256];
    int tls;              /* rediss://, or --tls-ca given: over TLS */
    redisContext *ctx;    /* owned; NULL when the connection failed or broke */
    char err[256];        /* last failure on this node, "" when none */
} ctl_node;

typedef struct ctl_nodes {
    ctl_node node[DLOCK_MAX_NODES];
    size_t n;
    size_t quorum;        /* n/2 + 1, as libdlock counts it */
    void *tls;            /* the TLS context (tls.c) when a node uses TLS; owned */
} ctl_nodes;

/* ---- tls.c ---- */
/* The TLS context for o's --tls-* files (verification on; the system's CAs
 * without --tls-ca): 0 with *out set, or -1 with why in err (a file that
 * does not load; a build without TLS). */
int ctl_tls_new(const ctl_opts *o, void **out, char *err, size_t errlen);
void ctl_tls_free(void *tls);
/* TLS on a connected blocking context for host, the handshake bounded by
 * the timeouts set on ctx: 0, or -1 with why in err. */
int ctl_tls_start(void *tls, redisContext *ctx, const char *host, char *err, size_t errlen);

/* ---- nodes.c ---- */
/* Parses o->redis into nodes (libdlock's own address rules): 0, or -1 with
 * one line in err. Makes no connection. */
int ctl_nodes_parse(const ctl_opts *o, ctl_nodes *ns, char *err, size_t errlen);
/* Connects to every node, each bounded by o->timeout_ms (connect and every
 * later command), AUTH when a password is set. A node that fails is left
 * down with its reason in err; returns how many are up. */
size_t ctl_nodes_connect(const ctl_opts *o, ctl_nodes *ns);
void ctl_nodes_close(ctl_nodes *ns);
/* One command on a node that is up. NULL when the node is down or the
 * connection failed now (then node->err says why and the node goes down).
 * An error reply is returned as is (type REDIS_REPLY_ERROR); the caller
 * frees the reply with freeReplyObject. */
redisReply *ctl_node_cmd(ctl_node *node, int argc, const char *const *argv);
/* Records an error reply, or an unexpected reply type, into node->err. */
void ctl_node_bad_reply(ctl_node *node, const char *what, const redisReply *r);

/* ---- keys.c ---- */
typedef struct ctl_keys {
    char lock[DLOCK_MAX_KEY_LEN + 64];  /* the key holding the holder's token, with a TTL */
    char fence[DLOCK_MAX_KEY_LEN + 64]; /* the resource's fence counter, no TTL */
} ctl_keys;
/* The keys libdlock uses for resource under prefix: 0, or -1 with err. */
int ctl_resource_keys(const char *prefix, const char *resource, ctl_keys *out, char *err,
                      size_t errlen);
/* SCAN MATCH pattern for every lock key under prefix: <prefix>lock:* with the
 * prefix's glob characters escaped. */
int ctl_scan_pattern(const char *prefix, char *out, size_t outlen);
/* Nonzero when value has the shape of a libdlock token (32 lowercase hex). */
int ctl_is_token(const char *value, size_t len);

/* ---- out.c ---- */
/* Prints a JSON document to stdout (indent 2, a newline after) and drops
 * the reference; 0, or -1 when stdout could not be written. */
int ctl_json_print(json_t *doc);
/* Node status objects for --json: [{"addr", "up", "error"}...]. */
json_t *ctl_json_nodes(const ctl_nodes *ns);
/* Warns on stderr about every node that is down ("dlockctl: ADDR: why"). */
void ctl_warn_down(const ctl_nodes *ns);

/* ---- the subcommands (argv: the operands after the subcommand name) ---- */
int ctl_cmd_list(const ctl_opts *o, ctl_nodes *ns, int argc, char **argv);
int ctl_cmd_show(const ctl_opts *o, ctl_nodes *ns, int argc, char **argv);
int ctl_cmd_release(const ctl_opts *o, ctl_nodes *ns, int argc, char **argv);
int ctl_cmd_fence(const ctl_opts *o, ctl_nodes *ns, int argc, char **argv);
int ctl_cmd_ping(const ctl_opts *o, ctl_nodes *ns, int argc, char **argv);

/* "dlockctl: <message>" on stderr; returns CTL_EXIT_USAGE. */
int ctl_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* DLOCKCTL_CTL_H */
