/* tempdir.c - temp dirs for the suites and the processes they start: made
 * with mkdtemp under $TMPDIR (else /tmp), removed depth first. */
/* nftw is an XSI interface: not visible with _POSIX_C_SOURCE alone. */
#define _XOPEN_SOURCE 700
#include "procs_base.h"

#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *test_tmp_base(void)
{
    const char *base = getenv("TMPDIR");
    return base && base[0] ? base : "/tmp";
}

int test_mkdtemp(char *dir, size_t len, const char *prefix_fmt, ...)
{
    char prefix[192];
    va_list ap;
    va_start(ap, prefix_fmt);
    int p = vsnprintf(prefix, sizeof prefix, prefix_fmt, ap);
    va_end(ap);
    int n = p < 0 || (size_t)p >= sizeof prefix
                ? -1
                : snprintf(dir, len, "%s/%sXXXXXX", test_tmp_base(), prefix);
    if (n <= 0 || (size_t)n >= len) {
        fprintf(stderr, "test_mkdtemp: temp dir name too long\n");
        if (len > 0)
            dir[0] = '\0';
        return -1;
    }
    if (!mkdtemp(dir)) {
        fprintf(stderr, "test_mkdtemp: mkdtemp %s: %s\n", dir, strerror(errno));
        dir[0] = '\0';
        return -1;
    }
    return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    /* Best effort: an entry that cannot go must not stop the rest going. */
    if (remove(path) != 0)
        fprintf(stderr, "test_rmtree: cannot remove %s: %s\n", path, strerror(errno));
    return 0;
}

int test_rmtree(const char *dir)
{
    if (!dir || !dir[0])
        return 0;
    /* FTW_DEPTH: files before their directory; FTW_PHYS: a symlink a server
     * or chromium left must not lead the removal outside the dir. */
    if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT) {
        fprintf(stderr, "test_rmtree: cannot walk %s: %s\n", dir, strerror(errno));
        return -1;
    }
    return 0;
}
