/* cmd_admin.c - dlockctl release --force and fence --raise: the two repairs
 * an operator may make by hand, each on every node. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"

/* ---- release --force ---- */

int ctl_cmd_release(const ctl_opts *o, ctl_nodes *ns, int argc, char **argv)
{
    long long deleted[DLOCK_MAX_NODES];
    size_t answered = 0;
    ctl_keys k;
    char err[256];
    int rc;

    if (argc != 1)
        return ctl_usage_error("release needs exactly one RESOURCE");
    if (ctl_resource_keys(o->prefix, argv[0], &k, err, sizeof(err)) != 0)
        return ctl_usage_error("release: %s", err);
    if (!o->force)
        return ctl_usage_error("release deletes a lock its holder may still be using; "
                               "add --force if you mean it");
    /* Said before acting, on stderr, so that even --json users read it. */
    fprintf(stderr,
            "dlockctl: WARNING: force-releasing \"%s\". If its holder is still running, it goes on "
            "with its critical section believing it holds the lock, and the next client acquires "
            "it too: only the fence (checked by your storage) protects the data now.\n",
            argv[0]);
    ctl_nodes_connect(o, ns);
    for (size_t i = 0; i < ns->n; i++) {
        const char *cmd[2] = {"DEL", k.lock};
        redisReply *r = ctl_node_cmd(&ns->node[i], 2, cmd);
        deleted[i] = -1;
        if (r == NULL)
            continue;
        if (r->type == REDIS_REPLY_INTEGER) {
            deleted[i] = r->integer;
            answered++;
        } else {
            ctl_node_bad_reply(&ns->node[i], "DEL", r);
        }
        freeReplyObject(r);
    }
    ctl_warn_down(ns);
    if (o->json) {
        json_t *nodes = json_array();
        for (size_t i = 0; nodes != NULL && i < ns->n; i++) {
            json_t *e = deleted[i] >= 0
                            ? json_pack("{s:s, s:b}", "node", ns->node[i].addr, "deleted",
                                        deleted[i] > 0)
                            : json_pack("{s:s, s:s}", "node", ns->node[i].addr, "error",
                                        ns->node[i].err);
            if (json_array_append_new(nodes, e) != 0) {
                json_decref(nodes);
                nodes = NULL;
            }
        }
        rc = ctl_json_print(json_pack("{s:s, s:s, s:o?}", "resource", argv[0], "lock_key", k.lock,
                                      "nodes", nodes));
    } else {
        for (size_t i = 0; i < ns->n; i++) {
            if (deleted[i] >= 0)
                printf("%-24s %s\n", ns->node[i].addr,
                       deleted[i] > 0 ? "deleted" : "no lock key (already free)");
            else
                printf("%-24s DOWN: %s\n", ns->node[i].addr, ns->node[i].err);
        }
        rc = fflush(stdout) == 0 ? 0 : -1;
    }
    /* A node that did not answer still holds its key until its TTL: with
     * fewer than a quorum cleared, the lock may still be held. */
    if (answered < ns->quorum)
        fprintf(stderr, "dlockctl: only %zu of %zu nodes answered (quorum %zu): the lock may "
                        "still be held until its TTL\n", answered, ns->n, ns->quorum);
    return rc == 0 && answered >= ns->quorum ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}

/* ---- fence --raise ---- */

/* Raise only: a lower fence would let an old holder's larger fence win at
 * the storage. Atomic (GET, compare, SET in one script), so an acquisition's
 * INCR cannot slip in between and be overwritten. Answers {old, new} as
 * strings (Lua numbers would print 1e+16-style). A counter that is not an
 * integer is left alone and reported. */
static const char RAISE_LUA[] =
    "local raw = redis.call('GET', KEYS[1])\n"
    "local cur = tonumber(raw or '0')\n"
    "if cur == nil then return redis.error_reply('fence key holds a non-integer') end\n"
    "if cur < tonumber(ARGV[1]) then\n"
    "  redis.call('SET', KEYS[1], ARGV[1])\n"
    "  return {raw or '0', ARGV[1]}\n"
    "end\n"
    "return {raw, raw}\n";

int ctl_cmd_fence(const ctl_opts *o, ctl_nodes *ns, int argc, char **argv)
{
    char before[DLOCK_MAX_NODES][24], after[DLOCK_MAX_NODES][24];
    int ok[DLOCK_MAX_NODES] = {0};
    size_t answered = 0;
    char target[24], err[256];
    ctl_keys k;
    int rc;

    if (argc != 1)
        return ctl_usage_error("fence needs exactly one RESOURCE");
    if (ctl_resource_keys(o->prefix, argv[0], &k, err, sizeof(err)) != 0)
        return ctl_usage_error("fence: %s", err);
    if (o->raise == 0)
        return ctl_usage_error("fence needs --raise N (1..%" PRIu64 ")", CTL_FENCE_RAISE_MAX);
    snprintf(target, sizeof(target), "%" PRIu64, o->raise);
    ctl_nodes_connect(o, ns);
    for (size_t i = 0; i < ns->n; i++) {
        const char *cmd[5] = {"EVAL", RAISE_LUA, "1", k.fence, target};
        redisReply *r = ctl_node_cmd(&ns->node[i], 5, cmd);
        if (r == NULL)
            continue;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
            r->element[0]->type == REDIS_REPLY_STRING && r->element[0]->len < 24 &&
            r->element[1]->type == REDIS_REPLY_STRING && r->element[1]->len < 24) {
            snprintf(before[i], sizeof(before[i]), "%s", r->element[0]->str);
            snprintf(after[i], sizeof(after[i]), "%s", r->element[1]->str);
            ok[i] = 1;
            answered++;
        } else {
            ctl_node_bad_reply(&ns->node[i], "fence raise", r);
        }
        freeReplyObject(r);
    }
    ctl_warn_down(ns);
    if (o->json) {
        json_t *nodes = json_array();
        for (size_t i = 0; nodes != NULL && i < ns->n; i++) {
            json_t *e = ok[i] ? json_pack("{s:s, s:s, s:s}", "node", ns->node[i].addr, "before",
                                          before[i], "after", after[i])
                              : json_pack("{s:s, s:s}", "node", ns->node[i].addr, "error",
                                          ns->node[i].err);
            if (json_array_append_new(nodes, e) != 0) {
                json_decref(nodes);
                nodes = NULL;
            }
        }
        rc = ctl_json_print(json_pack("{s:s, s:s, s:s, s:o?}", "resource", argv[0], "fence_key",
                                      k.fence, "raise_to", target, "nodes", nodes));
    } else {
        for (size_t i = 0; i < ns->n; i++) {
            if (!ok[i])
                printf("%-24s DOWN: %s\n", ns->node[i].addr, ns->node[i].err);
            else if (strcmp(before[i], after[i]) != 0)
                printf("%-24s fence %s -> %s\n", ns->node[i].addr, before[i], after[i]);
            else
                printf("%-24s fence %s (already >= %s, left alone)\n", ns->node[i].addr,
                       after[i], target);
        }
        rc = fflush(stdout) == 0 ? 0 : -1;
    }
    /* A quorum at >= N is enough: every later quorum shares a node with it,
     * and libdlock's fence sync lifts the rest before handing out a lock. */
    return rc == 0 && answered >= ns->quorum ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}
