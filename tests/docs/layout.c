/* layout.c - docs/layout.md is the map: it names every source file of the
 * project, one line each, grouped by folder, and names none that is gone.
 *
 * The map's form: a heading "### `<folder>/`" per folder, then one bullet
 * per file (or per source with its header), "- `name.c`, `name.h`: what it
 * owns". The walk covers the folders of the parts (not tests/, whose
 * suites tests/README.md lists) and the files a reader opens: *.c, *.h and
 * *.lua. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "docs_util.h"

#define MAX_NAMES 1024
#define PATH_LEN 512

static const char *const roots[] = {"lock", "db", "app", "common", "loadtest",
                                    "bench", "ctl", "recipes", "examples"};

typedef struct map {
    char (*names)[PATH_LEN]; /* "<folder>/<file>" named by the map */
    size_t n;
} map;

static int named(const map *m, const char *path)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->names[i], path) == 0)
            return 1;
    return 0;
}

/* Every "`x`" before the first ": " of a bullet is a file of folder. */
static void read_bullet(map *m, const char *folder, const char *line)
{
    const char *end = strstr(line, ": ");
    const char *p = line;

    while (m->n < MAX_NAMES) {
        const char *a = strchr(p, '`'), *b;

        if (a == NULL || (end != NULL && a > end))
            return;
        b = strchr(a + 1, '`');
        if (b == NULL)
            return;
        snprintf(m->names[m->n++], PATH_LEN, "%s%.*s", folder, (int)(b - a - 1), a + 1);
        p = b + 1;
    }
}

static void read_map(map *m, const char *text)
{
    char folder[PATH_LEN] = "";
    const char *line = text;

    while (line != NULL && *line != '\0') {
        const char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
        char buf[2048];

        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        if (strncmp(buf, "### `", 5) == 0 && strlen(buf) > 7 && buf[strlen(buf) - 1] == '`' &&
            buf[strlen(buf) - 2] == '/')
            snprintf(folder, sizeof folder, "%.*s", (int)(strlen(buf) - 6), buf + 5);
        else if (strncmp(buf, "#", 1) == 0)
            folder[0] = '\0';
        else if (folder[0] != '\0' && strncmp(buf, "- `", 3) == 0)
            read_bullet(m, folder, buf);
        line = nl != NULL ? nl + 1 : NULL;
    }
}

static int is_source(const char *name)
{
    const char *dot = strrchr(name, '.');

    return dot != NULL && (strcmp(dot, ".c") == 0 || strcmp(dot, ".h") == 0 ||
                           strcmp(dot, ".lua") == 0);
}

/* Walks root/rel: every source file must be on the map; missing ones are
 * appended to out (a bounded list for the assertion message). */
static void walk(const map *m, const char *root, const char *rel, char *out, size_t outlen,
                 int *missing, int *seen)
{
    char dir[PATH_LEN * 2];
    DIR *d;
    struct dirent *e;

    snprintf(dir, sizeof dir, "%s/%s", root, rel);
    d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    while ((e = readdir(d)) != NULL) {
        char path[PATH_LEN], full[PATH_LEN * 3];
        struct stat st;

        if (e->d_name[0] == '.' || strcmp(e->d_name, "node_modules") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", rel, e->d_name);
        snprintf(full, sizeof full, "%s/%s", root, path);
        if (stat(full, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            walk(m, root, path, out, outlen, missing, seen);
            continue;
        }
        if (!is_source(e->d_name))
            continue;
        (*seen)++;
        if (!named(m, path)) {
            size_t used = strlen(out);

            (*missing)++;
            if (used + strlen(path) + 3 < outlen)
                snprintf(out + used, outlen - used, "  %s\n", path);
        }
    }
    closedir(d);
}

Test(docs_layout, names_every_source_file_and_no_missing_one)
{
    const char *src = getenv("DLOCK_SOURCE_DIR");
    char path[PATH_LEN], gone[8192] = "", absent[8192] = "";
    char *text;
    map m = {calloc(MAX_NAMES, PATH_LEN), 0};
    int missing = 0, seen = 0, stale = 0;

    cr_assert_not_null(src, "DLOCK_SOURCE_DIR is not set");
    cr_assert_not_null(m.names);
    snprintf(path, sizeof path, "%s/docs/layout.md", src);
    text = docs_read_text(path);
    cr_assert_not_null(text, "cannot read %s", path);
    read_map(&m, text);
    cr_assert_gt(m.n, 0, "docs/layout.md has no \"### `folder/`\" section with \"- `file`\" lines");
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++)
        walk(&m, src, roots[i], absent, sizeof absent, &missing, &seen);
    /* And the other way: every file the map names exists. */
    for (size_t i = 0; i < m.n; i++) {
        char full[PATH_LEN * 2];
        struct stat st;

        snprintf(full, sizeof full, "%s/%s", src, m.names[i]);
        if (stat(full, &st) != 0) {
            size_t used = strlen(gone);

            stale++;
            if (used + strlen(m.names[i]) + 3 < sizeof gone)
                snprintf(gone + used, sizeof gone - used, "  %s\n", m.names[i]);
        }
    }
    cr_log_info("docs/layout.md names %zu files; %d source files found", m.n, seen);
    cr_expect_eq(missing, 0, "%d source file(s) missing from docs/layout.md:\n%s", missing, absent);
    cr_expect_eq(stale, 0, "docs/layout.md names %d file(s) that do not exist:\n%s", stale, gone);
    free(text);
    free(m.names);
}
