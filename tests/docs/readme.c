/* readme.c - the README's C program is a program: the first ```c block of
 * README.md is cut out as it stands, compiled with the project's compiler
 * (-Wall -Wextra -Werror) against the built libdlock and SQLite, and run
 * against a real redis-server. It must exit 0 and print the line the README
 * says it prints; a second run sells the next unit with a larger fence; with
 * no Redis it must fail fast (dlock_ping) and exit 2; under valgrind it must
 * be clean. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "procs.h"
#include "docs_util.h"

TestSuite(docs_readme, .timeout = 150);


/* What the suite works with: the README's program and its documented
 * output line, built into a temp dir. */
struct example {
    char dir[256];
    char exe[300];
    char expected[256]; /* the line the README says a first run prints */
    char error[4096];   /* why it could not be built; "" when it was */
};

/* Cuts the first ```c block out of readme into src, and the text between
 * "prints `" and "`" after the block into ex->expected. 0, or -1 with
 * ex->error set. */
static int extract(const char *readme, struct example *ex, const char *src)
{
    const char *open = strstr(readme, "\n```c\n");
    if (open == NULL)
        return snprintf(ex->error, sizeof ex->error, "README.md has no ```c block"), -1;
    const char *code = open + strlen("\n```c\n");
    const char *close = strstr(code, "\n```\n");
    if (close == NULL)
        return snprintf(ex->error, sizeof ex->error, "README.md's ```c block is not closed"), -1;

    const char *says = strstr(close, "prints `");
    const char *says_end = says ? strchr(says + strlen("prints `"), '`') : NULL;
    if (says_end == NULL || (size_t)(says_end - says) >= sizeof ex->expected)
        return snprintf(ex->error, sizeof ex->error,
                        "README.md does not say what its program prints (\"prints `...`\")"),
               -1;
    says += strlen("prints `");
    snprintf(ex->expected, sizeof ex->expected, "%.*s", (int)(says_end - says), says);

    FILE *f = fopen(src, "w");
    if (f == NULL)
        return snprintf(ex->error, sizeof ex->error, "cannot write %s", src), -1;
    size_t len = (size_t)(close - code) + 1; /* with the block's last newline */
    int ok = fwrite(code, 1, len, f) == len;
    if (fclose(f) != 0 || !ok)
        return snprintf(ex->error, sizeof ex->error, "cannot write %s", src), -1;
    return 0;
}

/* Extracts and compiles the README's program into ex->exe: 0, or -1 with
 * ex->error set. Asserts nothing, so that the fixture's clean-up runs. */
static int build_example(struct example *ex)
{
    const char *source_dir = getenv("DLOCK_SOURCE_DIR");
    char path[512], src[300], rpath[600];

    if (source_dir == NULL)
        return snprintf(ex->error, sizeof ex->error, "DLOCK_SOURCE_DIR is not set (run through ctest)"), -1;
    if (test_mkdtemp(ex->dir, sizeof ex->dir, "docs_readme.") != 0)
        return snprintf(ex->error, sizeof ex->error, "no temp dir"), -1;
    snprintf(path, sizeof path, "%s/README.md", source_dir);
    char *readme = docs_read_text(path);
    if (readme == NULL)
        return snprintf(ex->error, sizeof ex->error, "cannot read %s", path), -1;
    snprintf(src, sizeof src, "%s/example.c", ex->dir);
    int rc = extract(readme, ex, src);
    free(readme);
    if (rc != 0)
        return -1;

    snprintf(ex->exe, sizeof ex->exe, "%s/example", ex->dir);
    snprintf(rpath, sizeof rpath, "-Wl,-rpath,%s", DOCS_DLOCK_LIB_DIR);
    /* The flags a reader's build would use, made strict: a warning in the
     * README's program is a defect of the README. */
    const char *argv[] = {DOCS_CC, "-std=c17", "-Wall", "-Wextra", "-Werror", "-g",
                          "-I", DOCS_DLOCK_INCLUDE, src, "-o", ex->exe, DOCS_DLOCK_LIB, rpath,
                          "-lsqlite3", DOCS_SAN_FLAGS[0] != '\0' ? DOCS_SAN_FLAGS : NULL, NULL};
    char *out = NULL;
    rc = run_command(argv, 120000, &out);
    if (rc != 0)
        snprintf(ex->error, sizeof ex->error, "compiling README.md's program (%s) exited %d:\n%s",
                 src, rc, out ? out : "");
    free(out);
    return rc == 0 ? 0 : -1;
}

/* Runs the example with the arguments; returns its exit status, *out its
 * output (stdout and stderr). */
static int run_example(const struct example *ex, const char *addr, const char *db, char **out)
{
    const char *argv[] = {ex->exe, addr, db, NULL};
    return run_command(argv, 60000, out);
}

static struct example ex;
static redis_proc redis;

static void setup(void)
{
    memset(&ex, 0, sizeof ex);
    memset(&redis, 0, sizeof redis);
    build_example(&ex);
}

/* Every test starts here: the program must have been built. */
#define REQUIRE_BUILT() cr_assert_eq(ex.error[0], '\0', "%s", ex.error)

static void teardown(void)
{
    redis_stop(&redis);
    test_rmtree(ex.dir);
}

Test(docs_readme, prints_what_the_readme_says, .init = setup, .fini = teardown)
{
    char db[320], *out = NULL;

    REQUIRE_BUILT();
    cr_assert_eq(redis_start(&redis), 0);
    snprintf(db, sizeof db, "%s/shop.db", ex.dir);
    int rc = run_example(&ex, redis.addr, db, &out);
    cr_expect_eq(rc, 0, "README.md's program exited %d:\n%s", rc, out ? out : "");
    cr_expect(out != NULL && strstr(out, ex.expected) != NULL,
              "README.md says it prints \"%s\"; it printed:\n%s", ex.expected, out ? out : "");
    free(out);

    /* The same program again: the next unit, under a larger fence. */
    out = NULL;
    rc = run_example(&ex, redis.addr, db, &out);
    cr_expect_eq(rc, 0, "second run exited %d:\n%s", rc, out ? out : "");
    cr_expect(out != NULL && strstr(out, "sold one: stock left 98, fence 2") != NULL,
              "second run printed:\n%s", out ? out : "");
    free(out);
}

/* dlock_ping at start-up: no Redis, so the program says so and exits 2
 * before it touches the database. */
Test(docs_readme, fails_fast_without_redis, .init = setup, .fini = teardown)
{
    char db[320], *out = NULL;
    int port = free_loopback_port();

    REQUIRE_BUILT();
    cr_assert_gt(port, 0);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    snprintf(db, sizeof db, "%s/shop.db", ex.dir);
    int rc = run_example(&ex, addr, db, &out);
    cr_expect_eq(rc, 2, "exit %d:\n%s", rc, out ? out : "");
    cr_expect(out != NULL && strstr(out, "lock service:") != NULL, "%s", out ? out : "");
    FILE *f = fopen(db, "r");
    cr_expect_null(f, "the database was created although the lock service was down");
    if (f != NULL)
        fclose(f);
    free(out);
}

/* No leak, no invalid access, every handle freed: valgrind's memcheck
 * fails the run on any error or any unfreed block. */
Test(docs_readme, valgrind_clean, .init = setup, .fini = teardown)
{
    char db[320], *out = NULL;
    const char *vg = "/usr/bin/valgrind";

    if (DOCS_SAN_FLAGS[0] != '\0')
        cr_skip_test("built with sanitizers: valgrind cannot run an ASan program");
    FILE *probe = fopen(vg, "r");
    if (probe == NULL)
        cr_skip_test("%s is not installed", vg);
    fclose(probe);

    REQUIRE_BUILT();
    cr_assert_eq(redis_start(&redis), 0);
    snprintf(db, sizeof db, "%s/shop.db", ex.dir);
    const char *argv[] = {vg, "-q", "--leak-check=full", "--show-leak-kinds=all",
                          "--errors-for-leak-kinds=all", "--error-exitcode=99", ex.exe,
                          redis.addr, db, NULL};
    int rc = run_command(argv, 120000, &out);
    cr_expect_eq(rc, 0, "valgrind exited %d:\n%s", rc, out ? out : "");
    cr_expect(out != NULL && strstr(out, ex.expected) != NULL, "%s", out ? out : "");
    free(out);
}

/* The README is read in five minutes: under 10,000 characters,
 * with the two commands before anything else. Everything else lives in docs/. */
Test(docs_readme, short_enough_to_read_in_five_minutes)
{
    const char *source_dir = getenv("DLOCK_SOURCE_DIR");
    cr_assert_not_null(source_dir, "DLOCK_SOURCE_DIR is not set (run through ctest)");
    char path[4096];
    snprintf(path, sizeof path, "%s/README.md", source_dir);
    char *text = docs_read_text(path);
    cr_assert_not_null(text, "cannot read %s", path);
    size_t len = strlen(text);
    const char *demo = strstr(text, "./scripts/demo");
    const char *test = strstr(text, "./scripts/test");
    const char *code = strstr(text, "```c");
    int ok = len < 10000 && demo != NULL && test != NULL && code != NULL && demo < code && test < code;
    free(text);
    cr_assert(ok, "README.md: %zu characters (at most 9,999), and the two commands must come before the C example",
              len);
}
