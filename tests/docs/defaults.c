/* defaults.c - every default the docs state is the one the program has.
 *
 * A default lives in the code and its --help. The docs may quote one, and
 * this suite is what keeps the quote true. It reads README.md, docs/ pages,
 * loadtest/README.md and tests/README.md, and finds each "(default X)",
 * "default X", "default: X" and "defaults to X" outside code blocks. It
 * takes the nearest option (--flag) before it in the same sentence and
 * decides which program the option belongs to. That is the first of these
 * that knows it: the program named last before it in the paragraph, the
 * one its heading names, the page's own program, coupon-server. Then it
 * compares X with the default that program's --help gives that option. A mismatch,
 * an option the program does not know, or one whose --help states no
 * default fails the suite with file:line. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "procs.h"
#include "docs_util.h"

TestSuite(docs_defaults, .timeout = 100);

#define MAX_FLAGS 128
#define FAIL_CAP 8192

/* One option of one program's --help: its name and the text of its
 * "default" (what follows the word, up to the closing parenthesis). */
struct help_flag {
    char name[48];
    char deflt[256]; /* "" when the help states no default */
};

struct program {
    const char *name;      /* as the docs name it: "coupon-server", "scripts/demo" */
    const char *bin;       /* binary in build/bin, or NULL for a script */
    const char *script;    /* scripts/<script>, or NULL for a binary */
    struct help_flag flags[MAX_FLAGS];
    size_t n_flags;
};

/* The programs whose --help the docs quote. scripts/test is not here: it
 * installs packages before it reads its arguments. */
static struct program programs[] = {
    {.name = "coupon-server", .bin = "coupon-server"},
    {.name = "coupon-loadtest", .bin = "coupon-loadtest"},
    {.name = "dlockctl", .bin = "dlockctl"},
    {.name = "dlock-bench", .bin = "dlock-bench"},
    {.name = "scripts/demo", .script = "demo"},
    {.name = "scripts/trial", .script = "trial"},
    {.name = "scripts/chaos", .script = "chaos"},
    {.name = "scripts/hosts", .script = "hosts"},
};
#define N_PROGRAMS (sizeof programs / sizeof programs[0])

/* The page's own program, when a paragraph names none. */
static const struct {
    const char *file;
    const char *program;
} page_program[] = {
    {"README.md", "scripts/demo"},          {"docs/coupon-service.md", "coupon-server"},
    {"docs/loadtest.md", "coupon-loadtest"}, {"loadtest/README.md", "coupon-loadtest"},
    {"docs/dlockctl.md", "dlockctl"},        {"docs/benchmarks.md", "dlock-bench"},
    {"docs/reliability.md", "scripts/chaos"}, {"docs/deployment.md", "scripts/hosts"},
    {"docs/recipes.md", "scripts/trial"},
};


static int is_word(char ch)
{
    return isalnum((unsigned char)ch) || ch == '_';
}

/* Copies s[0..len) into out, backticks dropped, runs of white space made
 * one space, trimmed, and a trailing '.' dropped. */
static void normalize(const char *s, size_t len, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 1 < outlen; i++) {
        char ch = s[i];
        if (ch == '`')
            continue;
        if (isspace((unsigned char)ch)) {
            if (o > 0 && out[o - 1] != ' ')
                out[o++] = ' ';
            continue;
        }
        out[o++] = ch;
    }
    while (o > 0 && (out[o - 1] == ' ' || out[o - 1] == '.'))
        o--;
    out[o] = '\0';
}

/* Where the value of a "default" at text[at] starts: after "default",
 * "default:" or "defaults to", and white space. NULL when this "default" is
 * no statement of a value: "by default", "(default)", "the defaults". */
static const char *value_start(const char *text, const char *at)
{
    const char *p = at + strlen("default");

    if (at > text && is_word(at[-1]))
        return NULL;
    if (at - text >= 3 && strncmp(at - 3, "by ", 3) == 0)
        return NULL;
    if (*p == 's') {
        if (strncmp(p, "s to ", 5) != 0)
            return NULL;
        p += 5;
    } else if (*p == ':') {
        p++;
    } else if (*p != ' ' && *p != '\n') {
        return NULL;
    }
    while (*p == ' ' || *p == '\n')
        p++;
    if (*p == '\0' || *p == ')' || *p == '(' || *p == ',' || *p == ';' || *p == '.')
        return NULL;
    return p;
}

/* The value text from p: up to ')', ',', ';', " (", ": ", ". " or a blank
 * line, whichever comes first, normalized. */
static void value_text(const char *p, char *out, size_t outlen)
{
    const char *e = p;
    while (*e != '\0' && *e != ')' && *e != ',' && *e != ';' && strncmp(e, " (", 2) != 0 &&
           strncmp(e, ": ", 2) != 0 && strncmp(e, ":\n", 2) != 0 && strncmp(e, ". ", 2) != 0 && strncmp(e, ".\n", 2) != 0 &&
           strncmp(e, "\n\n", 2) != 0)
        e++;
    normalize(p, (size_t)(e - p), out, outlen);
}

/* "4 s", "500 ms": a number and its unit compare as the number, since
 * --help states each option's unit once, beside the option. */
static void strip_unit(char *value)
{
    static const char *const units[] = {" s", " ms", " us", " seconds"};
    char *sp = strchr(value, ' ');
    if (sp == NULL || !isdigit((unsigned char)value[0]))
        return;
    for (const char *d = value; d < sp; d++)
        if (!isdigit((unsigned char)*d) && *d != '.')
            return;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(sp, units[i]) == 0)
            *sp = '\0';
}

/* The option (--name) named last in text[from, to), or "" when none. */
static void last_flag(const char *from, const char *to, char *out, size_t outlen)
{
    out[0] = '\0';
    for (const char *p = to - 2; p >= from; p--) {
        if (p[0] == '-' && p[1] == '-' && islower((unsigned char)p[2]) &&
            (p == from || !(is_word(p[-1]) || p[-1] == '-'))) {
            size_t n = 2;
            while (is_word(p[n]) || p[n] == '-')
                n++;
            snprintf(out, outlen, "%.*s", (int)n, p);
            return;
        }
    }
}

/* Parses --help text into prog->flags: a line "  --name ..." starts an
 * option; more-indented lines that do not start with "-" continue it. Its
 * default is what follows its first "default" up to the closing ')'. */
static void parse_help(struct program *prog, const char *help)
{
    struct help_flag *cur = NULL;
    char block[2048];
    size_t blen = 0;

    for (const char *line = help; line != NULL && *line != '\0';) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        const char *t = line;
        while (*t == ' ' && t < line + len)
            t++;
        int starts_flag = (t - line) >= 2 && (t - line) <= 4 && t[0] == '-' && t[1] == '-' &&
                          islower((unsigned char)t[2]);
        int continues = cur != NULL && (t - line) > 4 && *t != '-';
        /* "-h, --help": a short form first. */
        if ((t - line) >= 2 && t[0] == '-' && t[1] != '-' && strncmp(t + 2, ", --", 4) == 0) {
            t += 4;
            starts_flag = 1;
        }
        if (starts_flag || !continues) {
            if (cur != NULL) {
                block[blen] = '\0';
                const char *d = strstr(block, "default");
                const char *v = d ? value_start(block, d) : NULL;
                if (v != NULL) {
                    const char *e = strchr(v, ')');
                    normalize(v, e ? (size_t)(e - v) : strlen(v), cur->deflt, sizeof cur->deflt);
                }
            }
            cur = NULL;
            blen = 0;
        }
        if (starts_flag && prog->n_flags < MAX_FLAGS) {
            cur = &prog->flags[prog->n_flags++];
            memset(cur, 0, sizeof *cur);
            size_t n = 2;
            while (is_word(t[n]) || t[n] == '-')
                n++;
            snprintf(cur->name, sizeof cur->name, "%.*s", (int)n, t);
        }
        if (cur != NULL && blen + len + 2 < sizeof block) {
            memcpy(block + blen, line, len);
            blen += len;
            block[blen++] = '\n';
        }
        line = eol ? eol + 1 : NULL;
    }
    if (cur != NULL) {
        block[blen] = '\0';
        const char *d = strstr(block, "default");
        const char *v = d ? value_start(block, d) : NULL;
        if (v != NULL) {
            const char *e = strchr(v, ')');
            normalize(v, e ? (size_t)(e - v) : strlen(v), cur->deflt, sizeof cur->deflt);
        }
    }
}

static struct program *program_named(const char *name)
{
    for (size_t i = 0; i < N_PROGRAMS; i++)
        if (strcmp(programs[i].name, name) == 0)
            return &programs[i];
    return NULL;
}

static const struct help_flag *flag_of(const struct program *prog, const char *name)
{
    for (size_t i = 0; prog != NULL && i < prog->n_flags; i++)
        if (strcmp(prog->flags[i].name, name) == 0)
            return &prog->flags[i];
    return NULL;
}

/* The program named last in text[from, to), or NULL. "./scripts/demo",
 * "scripts/demo" and the binaries' names count. */
static struct program *last_program(const char *from, const char *to)
{
    struct program *best = NULL;
    const char *best_at = NULL;
    for (size_t i = 0; i < N_PROGRAMS; i++) {
        const char *name = programs[i].name;
        size_t n = strlen(name);
        for (const char *p = from; p + n <= to && (p = strstr(p, name)) != NULL && p + n <= to;
             p += n) {
            if ((p > from && (is_word(p[-1]) || p[-1] == '-')) || is_word(p[n]) ||
                (p[n] == '-' && is_word(p[n + 1])))
                continue;
            if (best_at == NULL || p > best_at) {
                best = &programs[i];
                best_at = p;
            }
        }
    }
    return best;
}

/* Nonzero when value appears in deflt as a whole: at its start or after a
 * non-word character, and followed by its end or a non-word character. */
static int quotes(const char *deflt, const char *value)
{
    size_t n = strlen(value);
    if (n == 0)
        return 0;
    for (const char *p = deflt; (p = strstr(p, value)) != NULL; p++) {
        int left = p == deflt || !(is_word(p[-1]) || p[-1] == '.');
        int right = !(is_word(p[n]) || (p[n] == '.' && isdigit((unsigned char)p[n + 1])));
        if (left && right)
            return 1;
    }
    return 0;
}

static void append(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...)
{
    size_t used = strlen(buf);
    va_list ap;
    if (used + 1 >= cap)
        return;
    va_start(ap, fmt);
    vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
}

static int checked; /* mentions compared, over every page */

/* Checks every default stated in the page rel (relative to the source
 * dir); appends each problem to fails. */
static void check_page(const char *source_dir, const char *rel, char *fails, size_t cap)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", source_dir, rel);
    char *text = docs_read_text(path);
    cr_assert_not_null(text, "cannot read %s", path);

    const char *own = NULL;
    for (size_t i = 0; i < sizeof page_program / sizeof page_program[0]; i++)
        if (strcmp(page_program[i].file, rel) == 0)
            own = page_program[i].program;

    int line = 1, in_code = 0;
    const char *para = text; /* where the current paragraph starts */
    struct program *heading = NULL; /* the program the current heading names */
    for (const char *p = text; *p != '\0'; p++) {
        int at_line_start = p == text || p[-1] == '\n';
        if (at_line_start && *p == '#' && !in_code) {
            const char *eol = strchr(p, '\n');
            heading = last_program(p, eol ? eol : p + strlen(p));
        }
        if (at_line_start && strncmp(p, "```", 3) == 0) {
            in_code = !in_code;
            para = p;
        }
        if (*p == '\n') {
            line++;
            if (p[1] == '\n')
                para = p + 1;
            continue;
        }
        if (in_code || (*p != 'd' && *p != 'D') || strncasecmp(p, "default", 7) != 0)
            continue;
        const char *v = value_start(text, p);
        if (v == NULL)
            continue;
        char value[256], flag[48];
        value_text(v, value, sizeof value);
        /* The option must be named in the same sentence as its default. */
        const char *sentence = para;
        for (const char *q = para; q + 1 < p; q++)
            if (q[0] == '.' && (q[1] == ' ' || q[1] == '\n'))
                sentence = q + 1;
        last_flag(sentence, p, flag, sizeof flag);
        strip_unit(value);
        if (value[0] == '\0' || flag[0] == '\0')
            continue; /* a default of no option: nothing to compare with */

        /* Candidates: the program named in the paragraph, in its heading,
         * the page's own, coupon-server; the first that knows the option is
         * its owner. */
        struct program *cand[4] = {last_program(para, p), heading,
                                   own ? program_named(own) : NULL, program_named("coupon-server")};
        const struct help_flag *hf = NULL;
        const struct program *owner = NULL;
        for (size_t i = 0; i < 4 && hf == NULL; i++) {
            hf = flag_of(cand[i], flag);
            owner = cand[i];
        }
        checked++;
        if (getenv("DOCS_DEFAULTS_LIST") != NULL) /* to see what was compared */
            cr_log_info("%s:%d: %s of %s: \"%s\" vs \"%s\"", rel, line, flag,
                        owner && hf ? owner->name : "?", value, hf ? hf->deflt : "?");
        if (hf == NULL) {
            append(fails, cap, "%s:%d: %s: no --help knows this option (asked %s%s%s)\n", rel, line,
                   flag, cand[0] ? cand[0]->name : "", own ? " and " : "", own ? own : "");
        } else if (hf->deflt[0] == '\0') {
            append(fails, cap, "%s:%d: %s of %s: the doc says default \"%s\"; --help states none\n",
                   rel, line, flag, owner->name, value);
        } else if (!quotes(hf->deflt, value)) {
            append(fails, cap, "%s:%d: %s of %s: the doc says default \"%s\"; --help says \"%s\"\n",
                   rel, line, flag, owner->name, value, hf->deflt);
        }
    }
    free(text);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

Test(docs_defaults, every_stated_default_is_the_programs)
{
    const char *source_dir = getenv("DLOCK_SOURCE_DIR");
    char script[1024], bin_dir[1024];

    cr_assert_not_null(source_dir, "DLOCK_SOURCE_DIR is not set (run through ctest)");
    for (size_t i = 0; i < N_PROGRAMS; i++) {
        struct program *prog = &programs[i];
        char path[1100];
        cr_assert_eq(test_script_paths(prog->script ? prog->script : "demo", script, sizeof script,
                                       bin_dir, sizeof bin_dir),
                     0, "DLOCK_SOURCE_DIR / DLOCK_BINARY_DIR not set");
        if (prog->script != NULL)
            snprintf(path, sizeof path, "%s", script);
        else
            snprintf(path, sizeof path, "%s/%s", bin_dir, prog->bin);
        const char *argv[] = {path, "--help", NULL};
        char *out = NULL;
        int rc = run_command(argv, 30000, &out);
        cr_assert_eq(rc, 0, "%s --help exited %d:\n%s", path, rc, out ? out : "");
        parse_help(prog, out);
        free(out);
        cr_assert_gt(prog->n_flags, 2, "%s --help: no options parsed", path);
    }

    /* The pages: README.md, docs/ pages (sorted, so failures come in a fixed
     * order), and the two READMEs of parts. */
    const char *pages[64];
    size_t n_pages = 0;
    char *owned[64];
    size_t n_owned = 0;
    pages[n_pages++] = "README.md";
    char docs_dir[1100];
    snprintf(docs_dir, sizeof docs_dir, "%s/docs", source_dir);
    DIR *d = opendir(docs_dir);
    cr_assert_not_null(d, "cannot open %s", docs_dir);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name);
        if (n > 3 && strcmp(e->d_name + n - 3, ".md") == 0 && n_owned < 60) {
            char *rel = malloc(n + 6);
            cr_assert_not_null(rel);
            snprintf(rel, n + 6, "docs/%s", e->d_name);
            owned[n_owned++] = rel;
        }
    }
    closedir(d);
    qsort(owned, n_owned, sizeof owned[0], by_name);
    for (size_t i = 0; i < n_owned; i++)
        pages[n_pages++] = owned[i];
    pages[n_pages++] = "loadtest/README.md";
    pages[n_pages++] = "tests/README.md";

    char *fails = calloc(1, FAIL_CAP);
    cr_assert_not_null(fails);
    for (size_t i = 0; i < n_pages; i++)
        check_page(source_dir, pages[i], fails, FAIL_CAP);
    for (size_t i = 0; i < n_owned; i++)
        free(owned[i]);

    cr_log_info("%d stated defaults compared over %zu pages", checked, n_pages);
    /* A suite that compares nothing would pass forever: the pages do state
     * defaults (the README's demo options, coupon-server's, ...). */
    cr_expect_gt(checked, 10, "only %d stated defaults found: is the scanner blind?", checked);
    cr_expect_eq(fails[0], '\0', "defaults stated in the docs that the programs do not have:\n%s",
                 fails);
    free(fails);
}
