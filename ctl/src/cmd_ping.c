/* cmd_ping.c - dlockctl ping: is a quorum of the nodes there, and how far. */
#include <stdio.h>

#include "common.h"
#include "ctl.h"

/* common/'s monotonic clock (a wall-clock step must not bend a round-trip
 * time), in fractional ms: a loopback round trip is well under one. */
static double now_ms(void)
{
    return (double)cm_now_us() / 1e3;
}

int ctl_cmd_ping(const ctl_opts *o, ctl_nodes *ns, int argc, char **argv)
{
    double rtt[DLOCK_MAX_NODES] = {0};
    size_t up = 0;
    int quorum_ok;

    if (argc != 0)
        return ctl_usage_error("ping takes no operand (got '%s')", argv[0]);
    ctl_nodes_connect(o, ns);
    for (size_t i = 0; i < ns->n; i++) {
        ctl_node *n = &ns->node[i];
        const char *cmd[1] = {"PING"};
        double t0 = now_ms();
        redisReply *r = ctl_node_cmd(n, 1, cmd);
        if (r == NULL)
            continue;
        rtt[i] = now_ms() - t0;
        if (r->type == REDIS_REPLY_STATUS)
            up++;
        else
            ctl_node_bad_reply(n, "PING", r);
        freeReplyObject(r);
    }
    quorum_ok = up >= ns->quorum;
    if (o->json) {
        json_t *nodes = json_array();
        for (size_t i = 0; nodes != NULL && i < ns->n; i++) {
            const ctl_node *n = &ns->node[i];
            int ok = n->err[0] == '\0';
            json_t *e = json_pack("{s:s, s:b, s:o, s:s?}", "addr", n->addr, "up", ok, "rtt_ms",
                                  ok ? json_real(rtt[i]) : json_null(), "error",
                                  ok ? NULL : n->err);
            if (e == NULL || json_array_append_new(nodes, e) != 0) {
                json_decref(nodes);
                nodes = NULL;
            }
        }
        if (ctl_json_print(json_pack("{s:o?, s:i, s:i, s:i, s:b}", "nodes", nodes, "up", (int)up,
                                     "total", (int)ns->n, "quorum", (int)ns->quorum, "quorum_ok",
                                     quorum_ok)) != 0)
            return CTL_EXIT_FAIL;
    } else {
        for (size_t i = 0; i < ns->n; i++) {
            const ctl_node *n = &ns->node[i];
            if (n->err[0] == '\0')
                printf("%-24s up    %8.3f ms\n", n->addr, rtt[i]);
            else
                printf("%-24s DOWN  %s\n", n->addr, n->err);
        }
        printf("%zu/%zu nodes up, quorum %zu: %s\n", up, ns->n, ns->quorum,
               quorum_ok ? "ok" : "NO QUORUM");
        if (fflush(stdout) != 0)
            return CTL_EXIT_FAIL;
    }
    return quorum_ok ? CTL_EXIT_OK : CTL_EXIT_FAIL;
}
