/* ctl_util.c - running dlockctl and reading its rows. */
#include "ctl_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CTL_MAX_ARGS 30

int ctl_run(char **out, ...)
{
    const char *argv[CTL_MAX_ARGS + 2];
    const char *bin = getenv("DLOCKCTL_BIN");
    size_t n = 0;
    va_list ap;

    if (out != NULL)
        *out = NULL;
    if (bin == NULL || bin[0] == '\0') {
        fprintf(stderr, "ctl_run: DLOCKCTL_BIN is not set (run through ctest)\n");
        return -1;
    }
    argv[n++] = bin;
    va_start(ap, out);
    for (const char *a = va_arg(ap, const char *); a != NULL; a = va_arg(ap, const char *)) {
        if (n > CTL_MAX_ARGS) {
            va_end(ap);
            fprintf(stderr, "ctl_run: more than %d arguments\n", CTL_MAX_ARGS);
            return -1;
        }
        argv[n++] = a;
    }
    va_end(ap);
    argv[n] = NULL;
    return run_command(argv, 10000, out);
}

/* A row is "RESOURCE NODE TOKEN PTTL FENCE", blank-separated. */
static int parse_row(const char *line, ctl_row *row)
{
    return sscanf(line, "%127s %63s %63s %23s %23s", row->resource, row->node, row->token,
                  row->pttl, row->fence) == 5
               ? 0
               : -1;
}

int ctl_find_row(const char *text, const char *resource, const char *addr, ctl_row *row)
{
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *nl = strchr(line, '\n');
        char buf[512];
        size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
        if (len < sizeof(buf)) {
            memcpy(buf, line, len);
            buf[len] = '\0';
            if (parse_row(buf, row) == 0 && strcmp(row->resource, resource) == 0 &&
                strcmp(row->node, addr) == 0)
                return 0;
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    return -1;
}

int ctl_count_rows(const char *text, const char *resource)
{
    int count = 0;
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *nl = strchr(line, '\n');
        size_t rlen = strlen(resource);
        if (strncmp(line, resource, rlen) == 0 && line[rlen] == ' ')
            count++;
        line = nl != NULL ? nl + 1 : NULL;
    }
    return count;
}
