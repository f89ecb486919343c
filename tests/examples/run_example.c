/* run_example.c - runs one program of examples/ against real redis-servers,
 * as a user would. It starts NODES redis-servers on free loopback ports
 * and stops the last DOWN of them (a master that is down). It runs the
 * program with one redis:// URL per node after its own arguments and
 * prints what it printed. Then it stops every server by PID and exits with
 * the program's status (2 when something around it failed).
 * usage: run_example NODES DOWN PROGRAM [ARG...] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "procs_base.h"

#define MAX_NODES 5
#define MAX_ARGS 16

int main(int argc, char **argv)
{
    redis_proc nodes[MAX_NODES];
    char urls[MAX_NODES][64];
    const char *args[MAX_ARGS + MAX_NODES + 1];
    char *out = NULL;
    int n, down, na = 0, st;

    if (argc < 4 || (n = atoi(argv[1])) < 1 || n > MAX_NODES || (down = atoi(argv[2])) < 0 ||
        down >= n || argc - 3 > MAX_ARGS) {
        fprintf(stderr, "usage: run_example NODES(1-%d) DOWN PROGRAM [ARG...]\n", MAX_NODES);
        return 2;
    }
    memset(nodes, 0, sizeof nodes);
    if (redis_start_n(nodes, (size_t)n) != 0)
        return 2;
    for (int i = n - down; i < n; i++)
        if (redis_stop(&nodes[i]) != 0) {
            redis_stop_n(nodes, (size_t)n);
            return 2;
        }
    for (int i = 3; i < argc; i++)
        args[na++] = argv[i];
    for (int i = 0; i < n; i++) {
        snprintf(urls[i], sizeof urls[i], "redis://%s", nodes[i].addr);
        args[na++] = urls[i];
    }
    args[na] = NULL;
    st = run_command(args, 60000, &out);
    printf("%s", out != NULL ? out : "");
    free(out);
    redis_stop_n(nodes, (size_t)n);
    if (st < 0)
        return 2;
    printf("run_example: %s exited %d\n", argv[3], st);
    return st;
}
