/* docs_util.c - paths, running a documented command, reading its table. */
#include "docs_util.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "procs.h"

const char *docs_src(void)
{
    const char *s = getenv("DLOCK_SOURCE_DIR");
    cr_assert(s != NULL && s[0] != '\0', "DLOCK_SOURCE_DIR must name the source tree (ctest sets it)");
    return s;
}

const char *docs_bin(void)
{
    static char bin[512];
    const char *b = getenv("DLOCK_BINARY_DIR");
    cr_assert(b != NULL && b[0] != '\0', "DLOCK_BINARY_DIR must name the build (ctest sets it)");
    int n = snprintf(bin, sizeof bin, "%s/bin", b);
    cr_assert(n > 0 && (size_t)n < sizeof bin, "build path too long");
    return bin;
}

void docs_path(char *path, size_t len, const char *rel)
{
    int n = snprintf(path, len, "%s/%s", docs_src(), rel);
    cr_assert(n > 0 && (size_t)n < len, "path too long: %s", rel);
}

int docs_run(const char *const *argv, int timeout_s, char **out)
{
    const char *v[40];
    char first[600];
    size_t n = 0;
    for (; argv[n] != NULL; n++) {
        cr_assert_lt(n, sizeof v / sizeof v[0] - 1, "too many arguments");
        v[n] = argv[n];
    }
    v[n] = NULL;
    if (argv[0][0] != '/') {
        docs_path(first, sizeof first, argv[0]);
        v[0] = first;
    }
    int st = run_command(v, timeout_s * 1000, out);
    cr_assert_neq(st, -1, "could not run %s", v[0]);
    return st;
}

void docs_rows_after(const char *text, const char *header, char rows[][512], size_t n)
{
    const char *p = text;
    size_t hl = strlen(header);
    /* The header at the start of a line. */
    while (p != NULL && strncmp(p, header, hl) != 0) {
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    cr_assert_not_null(p, "no line starts with '%s':\n%s", header, text);
    for (size_t i = 0; i < n; i++) {
        p = strchr(p, '\n');
        cr_assert(p != NULL && p[1] != '\0', "the table under '%s' ends before row %zu:\n%s", header, i + 1,
                  text);
        p++;
        const char *eol = strchr(p, '\n');
        size_t l = eol ? (size_t)(eol - p) : strlen(p);
        cr_assert_lt(l, 512, "row %zu too long", i + 1);
        memcpy(rows[i], p, l);
        rows[i][l] = '\0';
    }
}

size_t docs_count_lines(const char *text, const char *prefix)
{
    size_t n = 0, pl = strlen(prefix);
    for (const char *p = text; p != NULL && *p != '\0';) {
        if (strncmp(p, prefix, pl) == 0)
            n++;
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return n;
}

/* Reads path into a malloc'd NUL-terminated string, or NULL. */
char *docs_read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0';
        }
    }
    fclose(f);
    return buf;
}

size_t docs_count_procs(const char *needle)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    size_t n = 0;

    cr_assert_not_null(d, "cannot read /proc");
    while ((e = readdir(d)) != NULL) {
        char path[300], cmd[4096];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "rb");
        if (f == NULL)
            continue; /* gone meanwhile */
        size_t len = fread(cmd, 1, sizeof cmd - 1, f);
        fclose(f);
        for (size_t i = 0; i < len; i++)
            if (cmd[i] == '\0')
                cmd[i] = ' ';
        cmd[len] = '\0';
        if (strstr(cmd, needle) != NULL)
            n++;
    }
    closedir(d);
    return n;
}

int docs_peers_installed(void)
{
    char dir[1024];
    struct stat st;
    docs_path(dir, sizeof dir, "bench/peers/node_modules");
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        return 1;
    const char *want = getenv("DLOCK_TEST_PEERS");
    if (want != NULL && strcmp(want, "1") == 0)
        cr_assert_fail("DLOCK_TEST_PEERS=1 but %s is missing: run bench/peers.sh --setup", dir);
    return 0;
}
