/* args.c - table-driven long options: parsing with strict numbers and
 * one-line errors naming the option, and --help generated from the table. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define REASON_MAX 512 /* a convert function's reason, before the option's name goes in front */

int cm_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* strtoull alone accepts "-1" (as a huge number) and "12x". */
int cm_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v;
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

/* The magnitude goes through cm_parse_u64, so both accept the same digits;
 * INT_MAX + 1 is let through for INT_MIN, and the range check does the rest. */
int cm_parse_int(const char *s, int lo, int hi, int *out)
{
    int neg = s[0] == '-';
    uint64_t mag;
    long long v;
    if (cm_parse_u64(s + neg, 0, (uint64_t)INT_MAX + (uint64_t)neg, &mag) != 0)
        return -1;
    v = neg ? -(long long)mag : (long long)mag;
    if (v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* strtod skips leading blanks and reads "inf" and "nan": none is a value. */
static int parse_double(const char *s, const cm_option *o, double *out)
{
    char *end = NULL;
    double v;
    if (*s == '\0' || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v) || v > o->dhi)
        return -1;
    if (o->dlo_open ? v <= o->dlo : v < o->dlo)
        return -1;
    *out = v;
    return 0;
}

static const cm_option *find_long(const cm_args_spec *spec, const char *name, size_t len)
{
    for (size_t i = 0; i < spec->n_opts; i++) {
        const char *n = spec->opts[i].name;
        if (strlen(n) == len && strncmp(n, name, len) == 0)
            return &spec->opts[i];
    }
    return NULL;
}

static const cm_option *find_short(const cm_args_spec *spec, char c)
{
    for (size_t i = 0; i < spec->n_opts; i++)
        if (spec->opts[i].short_name != 0 && spec->opts[i].short_name == c)
            return &spec->opts[i];
    return NULL;
}

/* Puts val into o's field; on failure the error names the option and the value. */
static int store(const cm_option *o, const char *val, void *base, char *err, size_t errlen)
{
    void *field = (char *)base + o->offset;
    char range[128] = "";
    char why[REASON_MAX] = "";
    switch (o->kind) {
    case CM_ARG_NONE:
    case CM_ARG_HELP:
        *(int *)field = 1;
        return 0;
    case CM_ARG_INT:
        if (cm_parse_int(val, o->lo, o->hi, field) == 0)
            return 0;
        snprintf(range, sizeof range, "an integer in %d..%d", o->lo, o->hi);
        break;
    case CM_ARG_U64:
        if (cm_parse_u64(val, o->ulo, o->uhi, field) == 0)
            return 0;
        snprintf(range, sizeof range, "an integer in %" PRIu64 "..%" PRIu64, o->ulo, o->uhi);
        break;
    case CM_ARG_DOUBLE:
        if (parse_double(val, o, field) == 0)
            return 0;
        snprintf(range, sizeof range, "a number in %c%g, %g]", o->dlo_open ? '(' : '[', o->dlo,
                 o->dhi);
        break;
    case CM_ARG_STRING:
        if (o->convert == NULL) {
            *(const char **)field = val;
            return 0;
        }
        if (o->convert(val, field, why, sizeof why) == 0)
            return 0;
        return cm_fail(err, errlen, "--%s: %s", o->name, why);
    }
    return cm_fail(err, errlen, "--%s: '%s' is not %s", o->name, val,
                   o->expect != NULL ? o->expect : range);
}

int cm_args_parse(const cm_args_spec *spec, int argc, char **argv, void *base, char *err,
                  size_t errlen)
{
    uint64_t given = 0; /* bit k: opts[k] was on the command line */
    if (spec->n_opts > CM_ARGS_MAX_OPTS)
        return cm_fail(err, errlen, "internal error: more than %d options", CM_ARGS_MAX_OPTS);

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *val = NULL;
        const cm_option *o;
        if (strcmp(arg, "--") == 0) {
            /* The usual end of the options; these tools take no operands after it. */
            if (i + 1 < argc)
                return cm_fail(err, errlen, "unexpected argument '%s' (see --help)", argv[i + 1]);
            break;
        }
        if (arg[0] == '-' && arg[1] == '-') {
            /* Both "--name value" and "--name=value". */
            const char *name = arg + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
            o = find_long(spec, name, len);
            if (o == NULL)
                return cm_fail(err, errlen, "unknown option '--%.*s' (see --help)", (int)len, name);
            if (eq != NULL)
                val = eq + 1;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            o = arg[2] == '\0' ? find_short(spec, arg[1]) : NULL;
            if (o == NULL)
                return cm_fail(err, errlen, "unknown option '%s' (see --help)", arg);
        } else {
            return cm_fail(err, errlen, "unexpected argument '%s' (see --help)", arg);
        }
        given |= UINT64_C(1) << (size_t)(o - spec->opts);

        if (o->kind == CM_ARG_NONE || o->kind == CM_ARG_HELP) {
            if (val != NULL)
                return cm_fail(err, errlen, "--%s takes no value", o->name);
            if (store(o, NULL, base, err, errlen) != 0)
                return -1;
            /* --help wins over whatever follows, so it always answers. */
            if (o->kind == CM_ARG_HELP)
                return 1;
            continue;
        }
        if (val == NULL) {
            if (i + 1 >= argc)
                return cm_fail(err, errlen, "--%s needs a value", o->name);
            val = argv[++i];
        }
        if (store(o, val, base, err, errlen) != 0)
            return -1;
    }

    for (size_t k = 0; k < spec->n_opts; k++)
        if (spec->opts[k].required && (given & (UINT64_C(1) << k)) == 0)
            return cm_fail(err, errlen, "missing --%s (see --help)", spec->opts[k].name);
    return 0;
}

/* "  -x, --name META" then the help text from `column` on (two spaces after
 * a longer left part); its further lines are indented to `column`. */
static int print_option(FILE *f, const cm_option *o, int column)
{
    char short_part[8] = "";
    const char *line = o->help;
    int used, pad;
    if (o->short_name != 0)
        snprintf(short_part, sizeof short_part, "-%c, ", o->short_name);
    used = fprintf(f, "  %s--%s%s%s", short_part, o->name, o->metavar != NULL ? " " : "",
                   o->metavar != NULL ? o->metavar : "");
    if (used < 0)
        return -1;
    pad = used + 2 <= column ? column - used : 2;
    for (;;) {
        const char *nl = strchr(line, '\n');
        int len = nl != NULL ? (int)(nl - line) : (int)strlen(line);
        if (fprintf(f, "%*s%.*s\n", pad, "", len, line) < 0)
            return -1;
        if (nl == NULL)
            return 0;
        line = nl + 1;
        pad = column;
    }
}

int cm_args_usage(FILE *f, const cm_args_spec *spec)
{
    if (fputs(spec->usage, f) == EOF)
        return -1;
    for (size_t i = 0; i < spec->n_opts; i++)
        if (spec->opts[i].help != NULL && print_option(f, &spec->opts[i], spec->help_column) != 0)
            return -1;
    if (spec->epilogue != NULL && fputs(spec->epilogue, f) == EOF)
        return -1;
    /* Output is buffered and fails late: the flush is where a full disk or a
     * closed pipe shows. */
    if (fflush(f) != 0 || ferror(f))
        return -1;
    return 0;
}
