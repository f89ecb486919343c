/* out.c - what text and JSON output share. */
#include <stdio.h>

#include "ctl.h"

int ctl_json_print(json_t *doc)
{
    int rc = -1;

    if (doc != NULL && json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 &&
        fputc('\n', stdout) != EOF && fflush(stdout) == 0)
        rc = 0;
    json_decref(doc);
    if (rc != 0)
        fprintf(stderr, "dlockctl: cannot write the JSON output\n");
    return rc;
}

json_t *ctl_json_nodes(const ctl_nodes *ns)
{
    json_t *arr = json_array();

    for (size_t i = 0; arr != NULL && i < ns->n; i++) {
        const ctl_node *n = &ns->node[i];
        json_t *o = json_pack("{s:s, s:b, s:s?}", "addr", n->addr, "up", n->ctx != NULL, "error",
                              n->err[0] != '\0' ? n->err : NULL);
        if (o == NULL || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

void ctl_warn_down(const ctl_nodes *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        if (ns->node[i].err[0] != '\0')
            fprintf(stderr, "dlockctl: %s: %s\n", ns->node[i].addr, ns->node[i].err);
}
