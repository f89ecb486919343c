/* documented.c - the commands docs_commands covers, and the test that reads
 * README.md and the docs/ pages (at run time: the text as it is when the
 * suite runs). The test fails when they tell a reader to run a script, a
 * mode of ./scripts/demo or a program that is not in that list. A newly documented
 * command must be added here, with the test that runs it.
 *
 * Commands are taken from fenced blocks (``` or ~~~, untagged or sh, bash,
 * console, shell), from indented code blocks and from inline `code`, after
 * a "$ " prompt, one per segment of a pipeline or list. A line's key is the
 * program (./scripts/X, bench/X.sh, a built binary, cmake) plus, for
 * ./scripts/demo, its mode and, for dlockctl, its subcommand. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "docs_util.h"

/* key -> what runs it. */
static const struct {
    const char *key;
    const char *how;
} covered[] = {
    {"scripts/demo", "docs_commands/demo_sale"},
    {"scripts/demo --compare", "docs_commands/demo_compare"},
    {"scripts/demo --trial", "docs_commands/demo_trial"},
    {"scripts/demo --chaos", "docs_commands/demo_chaos"},
    {"scripts/demo --hosts", "docs_commands/demo_hosts"},
    {"scripts/demo --tls", "docs_commands/demo_tls"},
    {"scripts/trial", "docs_commands/demo_trial (./scripts/demo --trial execs it)"},
    {"scripts/chaos", "docs_commands/demo_chaos (./scripts/demo --chaos execs it) and app_chaos"},
    {"scripts/hosts", "docs_commands/demo_hosts (./scripts/demo --hosts execs it) and loadtest_hosts"},
    {"scripts/test", ".ci/run's first step, which runs this suite"},
    {"scripts/memcheck", ".ci/run"},
    {"scripts/fuzz", ".ci/run"},
    {"scripts/mutate", ".ci/run (--quick)"},
    {"bench/run-bench.sh", "docs_commands/run_bench"},
    {"bench/peers.sh", "docs_commands/peers and peers_catch_violations (tests/docs/peers.c)"},
    {"bench/db-compare.sh", "docs_commands/db_compare_both_stores"},
    {"bench/sick-minority.sh", "docs_commands/sick_minority and sick_minority_contended"},
    {"bench/hot-coupon.sh", "docs_commands/hot_coupon"},
    {"bench/many-coupons.sh", "docs_commands/many_coupons, many_coupons_zipf and many_coupons_route"},
    {"bench/glance.sh", "docs_commands/glance_quick"},
    {"dlockctl", "the ctl_* suites (--help, --version, its options)"},
    {"dlockctl ping", "docs_commands/dlockctl_session"},
    {"dlockctl list", "docs_commands/dlockctl_session"},
    {"dlockctl show", "docs_commands/dlockctl_session"},
    {"dlockctl release", "docs_commands/dlockctl_session"},
    {"dlockctl fence", "docs_commands/dlockctl_session"},
    {"coupon-server", "docs_commands/server_and_loadtest"},
    {"coupon-loadtest", "docs_commands/server_and_loadtest"},
    {"dlock-bench", "docs_commands/run_bench and sick_minority"},
    {"chaos-check", "docs_commands/demo_chaos (scripts/chaos runs it)"},
    {"cmake", "every build (scripts/setup.sh) and dlock_install's find_package consumer"},
    {"cmake --build", "every build (scripts/setup.sh)"},
    {"cmake --install", "dlock_install (tests/install/install_test.sh)"},
    {"cc (consumer build)", "dlock_install (tests/install/install_test.sh: pkg-config, shared and static)"},
};

static const char *const demo_modes[] = {"--compare", "--trial", "--chaos", "--hosts", "--tls"};
/* dlockctl options that take a value, so the subcommand is the next word. */
static const char *const ctl_valued[] = {"--redis", "--password", "--user", "--prefix", "--timeout-ms"};
static const char *const programs[] = {"dlockctl", "coupon-server", "coupon-loadtest", "dlock-bench",
                                       "chaos-check"};

#define MAX_MISSING 8192
static char missing[MAX_MISSING];
static size_t n_keys;
static int saw_demo;

static int in_list(const char *w, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(w, list[i]) == 0)
            return 1;
    return 0;
}

static int is_covered(const char *key)
{
    for (size_t i = 0; i < sizeof covered / sizeof covered[0]; i++)
        if (strcmp(key, covered[i].key) == 0)
            return 1;
    return 0;
}

/* A file of the source tree that can be run (scripts/lib/sale.sh is not). */
static int executable_in_tree(const char *rel)
{
    char path[1024];
    struct stat st;
    docs_path(path, sizeof path, rel);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static void note(const char *key, const char *where, const char *text)
{
    n_keys++;
    if (strcmp(key, "scripts/demo") == 0)
        saw_demo = 1;
    if (is_covered(key))
        return;
    size_t l = strlen(missing);
    snprintf(missing + l, sizeof missing - l, "  %s: '%s' in: %s\n", where, key, text);
}

/* VAR=value, or a wrapper a reader may put in front of the command. */
static int prefix_word(const char *w)
{
    const char *const wrappers[] = {"sudo", "nice", "time", "exec", "env"};
    if (in_list(w, wrappers, sizeof wrappers / sizeof wrappers[0]))
        return 1;
    const char *eq = strchr(w, '=');
    return eq != NULL && eq != w &&
           strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == (size_t)(eq - w);
}

/* One command (no pipes or lists): its words, its key. */
static void one_command(char *cmd, const char *where, const char *text)
{
    char *w[64];
    size_t n = 0;
    for (char *t = strtok(cmd, " \t"); t != NULL && n < 64; t = strtok(NULL, " \t"))
        w[n++] = t;
    size_t i = 0;
    while (i < n && prefix_word(w[i]))
        i++;
    if (i >= n)
        return;
    char *prog = w[i];
    while (strncmp(prog, "./", 2) == 0)
        prog += 2;
    const char *base = strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog;
    char key[160];
    if (strncmp(prog, "scripts/", 8) == 0 && executable_in_tree(prog)) {
        snprintf(key, sizeof key, "%s", prog);
        if (strcmp(prog, "scripts/demo") == 0)
            for (size_t j = i + 1; j < n; j++)
                if (in_list(w[j], demo_modes, sizeof demo_modes / sizeof demo_modes[0])) {
                    snprintf(key, sizeof key, "scripts/demo %s", w[j]);
                    break;
                }
    } else if (strncmp(prog, "bench/", 6) == 0 && executable_in_tree(prog)) {
        snprintf(key, sizeof key, "%s", prog);
    } else if (strcmp(base, "dlockctl") == 0) {
        snprintf(key, sizeof key, "dlockctl");
        for (size_t j = i + 1; j < n; j++) {
            if (in_list(w[j], ctl_valued, sizeof ctl_valued / sizeof ctl_valued[0])) {
                j++;
                continue;
            }
            if (w[j][0] != '-' && isalpha((unsigned char)w[j][0])) {
                snprintf(key, sizeof key, "dlockctl %s", w[j]);
                break;
            }
        }
    } else if (in_list(base, programs, sizeof programs / sizeof programs[0])) {
        snprintf(key, sizeof key, "%s", base);
    } else if (strcmp(base, "cmake") == 0) {
        snprintf(key, sizeof key, "cmake");
        for (size_t j = i + 1; j < n; j++)
            if (strcmp(w[j], "--install") == 0 || strcmp(w[j], "--build") == 0) {
                snprintf(key, sizeof key, "cmake %s", w[j]);
                break;
            }
    } else if ((strcmp(base, "cc") == 0 || strcmp(base, "gcc") == 0 || strcmp(base, "clang") == 0) &&
               strstr(text, "dlock") != NULL) {
        snprintf(key, sizeof key, "cc (consumer build)");
    } else {
        return; /* not a command of this project */
    }
    note(key, where, text);
}

/* A line of shell: drop a prompt and a trailing comment, split it at
 * pipes and lists. */
static void shell_line(const char *line, const char *where)
{
    char buf[2048], text[2048];
    const char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    if (p[0] == '$' && p[1] == ' ')
        p += 2;
    if (*p == '#' || *p == '\0')
        return;
    snprintf(text, sizeof text, "%s", p);
    snprintf(buf, sizeof buf, "%s", p);
    char *hash = strstr(buf, " #");
    if (hash != NULL)
        *hash = '\0';
    /* Segments: | || && ; each start a command. */
    char *seg = buf;
    for (char *q = buf;; q++) {
        if (*q == '|' || *q == ';' || *q == '&' || *q == '\0') {
            int end = *q == '\0';
            *q = '\0';
            one_command(seg, where, text);
            if (end)
                break;
            if (q[1] == '|' || q[1] == '&')
                q++;
            seg = q + 1;
        }
    }
}

/* Inline `code` spans of a prose line that start with a command. */
static void inline_spans(const char *line, const char *where)
{
    const char *p = line;
    while ((p = strchr(p, '`')) != NULL) {
        const char *e = strchr(p + 1, '`');
        if (e == NULL)
            return;
        char span[1024];
        size_t l = (size_t)(e - p - 1);
        if (l > 0 && l < sizeof span) {
            memcpy(span, p + 1, l);
            span[l] = '\0';
            shell_line(span, where);
        }
        p = e + 1;
    }
}

static int shell_fence(const char *tag)
{
    const char *ok[] = {"", "sh", "bash", "console", "shell", "shell-session"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strcmp(tag, ok[i]) == 0)
            return 1;
    return 0;
}

static void scan_file(const char *rel)
{
    char path[1024], where[1100];
    docs_path(path, sizeof path, rel);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot read %s", path);
    char line[4096];
    int in_fence = 0, shell = 0, prev_blank = 1, in_indented = 0;
    unsigned ln = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        ln++;
        line[strcspn(line, "\r\n")] = '\0';
        snprintf(where, sizeof where, "%s:%u", rel, ln);
        const char *t = line;
        while (*t == ' ')
            t++;
        if (strncmp(t, "```", 3) == 0 || strncmp(t, "~~~", 3) == 0) {
            if (!in_fence) {
                char tag[64];
                snprintf(tag, sizeof tag, "%s", t + 3);
                tag[strcspn(tag, " {")] = '\0';
                shell = shell_fence(tag);
            }
            in_fence = !in_fence;
            prev_blank = 0;
            continue;
        }
        if (in_fence) {
            if (shell)
                shell_line(line, where);
            continue;
        }
        int blank = *t == '\0';
        /* An indented code block: four spaces after a blank line, until a
         * line that is not indented. */
        if (strncmp(line, "    ", 4) == 0 && (prev_blank || in_indented) && !blank) {
            in_indented = 1;
            shell_line(line + 4, where);
        } else {
            if (!blank)
                in_indented = 0;
            inline_spans(line, where);
        }
        prev_blank = blank;
    }
    cr_assert_eq(fclose(f), 0);
}

Test(docs_commands, every_documented_command_is_covered, .timeout = 30)
{
    char dir[1024];
    scan_file("README.md");
    docs_path(dir, sizeof dir, "docs");
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    struct dirent *e;
    char rel[512];
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l > 3 && strcmp(e->d_name + l - 3, ".md") == 0) {
            snprintf(rel, sizeof rel, "docs/%s", e->d_name);
            scan_file(rel);
        }
    }
    closedir(d);
    /* The reader's first command must be found, or the scan itself is broken. */
    cr_assert(saw_demo, "no ./scripts/demo found in README.md or docs/*.md: the scan is broken");
    cr_assert_gt(n_keys, 10, "only %zu commands found: the scan is broken", n_keys);
    cr_assert(missing[0] == '\0',
              "the docs tell readers to run commands docs_commands does not run (add each to "
              "tests/docs/documented.c's list, with the test that runs it):\n%s",
              missing);
}
