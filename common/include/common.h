/* common.h - what dlock-bench, coupon-loadtest, coupon-server and db/ share:
 * a latency histogram, a monotonic clock, a sleep that outlasts signals and a
 * table-driven command-line parser.
 *
 * Nothing here knows about locks, Redis or HTTP, and the library links
 * nothing of lock/ or app/: coupon-loadtest links it and checks those parts
 * from the outside, so it must stay independent of them.
 *
 * Conventions: functions return 0 on success and -1 on failure; where a
 * failure has a reason, it is one line in the caller's err buffer. */
#ifndef DLOCK_COMMON_H
#define DLOCK_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- hist.c: log-linear latency histogram ------------------------------- */

/* HdrHistogram-like, for latencies in microseconds: values below
 * 2^CM_HIST_SUB_BITS are exact; above, each power of two is cut into
 * 2^CM_HIST_SUB_BITS equal buckets, so a bucket is never wider than 1/128 of
 * its low edge and its middle is within 0.4 % of any value in it. Fixed
 * size, no allocation per sample: per-thread histograms are merged by adding
 * counts, and percentiles never sort the samples. */
#define CM_HIST_SUB_BITS 7
#define CM_HIST_MAX_BITS 40 /* bucketed values are clamped below 2^40 (12.7 days in us) */
#define CM_HIST_SUB (1u << CM_HIST_SUB_BITS)
#define CM_HIST_BUCKETS ((CM_HIST_MAX_BITS - CM_HIST_SUB_BITS + 1) * CM_HIST_SUB)

typedef struct cm_hist {
    uint64_t counts[CM_HIST_BUCKETS];
    uint64_t n;   /* samples recorded */
    uint64_t min; /* exact (UINT64_MAX while empty) */
    uint64_t max; /* exact, also beyond the clamp */
    uint64_t sum; /* exact, for the mean */
} cm_hist;

/* Empties h; every histogram starts here (a zeroed one has min 0). */
void cm_hist_init(cm_hist *h);
void cm_hist_record(cm_hist *h, uint64_t v);
/* Adds src's samples to dst: the same as having recorded them into dst. */
void cm_hist_merge(cm_hist *dst, const cm_hist *src);
/* The value at quantile q (0..1) by nearest rank: the highest value of the
 * bucket holding the ceil(q*n)-th sample, kept within the exact [min, max].
 * q <= 0 gives min, q >= 1 max, an empty histogram 0. */
uint64_t cm_hist_quantile(const cm_hist *h, double q);
/* The same sample's bucket, reported by its middle (half the error of the
 * bucket's top), kept within [min, max]. */
double cm_hist_quantile_mid(const cm_hist *h, double q);
double cm_hist_mean(const cm_hist *h); /* 0 when empty */
/* Bucket arithmetic, exposed for the unit tests. */
unsigned cm_hist_index(uint64_t v);
uint64_t cm_hist_bucket_low(unsigned idx);
uint64_t cm_hist_bucket_high(unsigned idx);

/* ---- clock.c: monotonic time -------------------------------------------- */

/* CLOCK_MONOTONIC: a wall-clock step during a run must not bend latencies,
 * deadlines or rates. The origin is arbitrary; only differences mean anything. */
int64_t cm_now_ns(void);
int64_t cm_now_us(void);
int64_t cm_now_ms(void);

/* ---- sleep.c ------------------------------------------------------------ */

/* Sleeps ms milliseconds. A signal does not shorten it: on EINTR the sleep
 * goes on for the time that remains. Any other failure returns -1 with errno
 * set; 0 when the whole time has passed. */
int cm_sleep_ms(uint32_t ms);
/* The same in microseconds (the server's business step and stalls). */
int cm_sleep_us(uint64_t us);

/* ---- args.c: table-driven long options ---------------------------------- */

typedef enum cm_arg_kind {
    CM_ARG_NONE,   /* a flag: sets its int field to 1; "--flag=x" is an error */
    CM_ARG_HELP,   /* like NONE, and parsing stops there: cm_args_parse returns 1 */
    CM_ARG_INT,    /* int field: whole decimal in [lo, hi] */
    CM_ARG_U64,    /* uint64_t field: whole unsigned decimal in [ulo, uhi] */
    CM_ARG_DOUBLE, /* double field: finite, in [dlo, dhi], or (dlo, dhi] with dlo_open */
    CM_ARG_STRING, /* const char * field borrowing argv, or whatever convert makes of it */
} cm_arg_kind;

/* One option. The value goes to the field at `offset` in the struct the
 * caller hands cm_args_parse, so one static table serves both parsing and
 * --help. Options are given as --name VALUE, --name=VALUE, or -x VALUE when
 * short_name is set. */
typedef struct cm_option {
    const char *name;    /* long name, without the leading "--" */
    char short_name;     /* "-x" alias; 0 = none */
    cm_arg_kind kind;
    size_t offset;       /* offsetof(caller's struct, field); the field's type follows kind */
    int lo, hi;          /* CM_ARG_INT */
    uint64_t ulo, uhi;   /* CM_ARG_U64 */
    double dlo, dhi;     /* CM_ARG_DOUBLE */
    int dlo_open;        /* CM_ARG_DOUBLE: dlo itself is out of range */
    /* How the error names a valid value: "--NAME: 'VAL' is not <expect>".
     * NULL: "an integer in LO..HI" or "a number in (LO, HI]" from the range. */
    const char *expect;
    /* CM_ARG_STRING: checks val and stores it into field; on failure writes
     * the reason (without the option's name, which is put in front) to err
     * and returns -1. NULL: the field is a const char * and gets val. */
    int (*convert)(const char *val, void *field, char *err, size_t errlen);
    int required;        /* "missing --NAME" when absent (not checked after --help) */
    const char *metavar; /* --help: "N" in "--workers N"; NULL = none */
    const char *help;    /* --help: its text, lines split by '\n'; NULL = not listed */
} cm_option;

#define CM_ARGS_MAX_OPTS 64

typedef struct cm_args_spec {
    const cm_option *opts;
    size_t n_opts;        /* at most CM_ARGS_MAX_OPTS */
    const char *usage;    /* --help: printed as is before the option list */
    const char *epilogue; /* --help: printed as is after it; NULL = nothing */
    int help_column;      /* --help: where the options' text starts */
} cm_args_spec;

/* Parses argv[1..argc) into the struct at base, in order; a repeated option
 * keeps its last value. The caller fills in the defaults first. Returns 0,
 * 1 when a CM_ARG_HELP option was given (nothing after it is looked at), or
 * -1 with one line in err naming the option. The errors: an unknown
 * option, a missing or unwanted value, a bad number, a convert failure, an
 * argument that is not an option, or a required option that is absent. */
int cm_args_parse(const cm_args_spec *spec, int argc, char **argv, void *base, char *err,
                  size_t errlen);
/* Writes the usage text, the option list generated from the table and the
 * epilogue to f. Returns 0, or -1 when f could not be written. */
int cm_args_usage(FILE *f, const cm_args_spec *spec);

/* Writes a one-line reason (printf format) to err and returns -1: the
 * `return cm_fail(err, errlen, ...)` of a failure path, convert functions'
 * included. */
int cm_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The strict number parsing behind the table, for values the caller splits
 * up itself: the whole string, decimal, no sign for u64, an optional '-' for
 * int, no blanks, within [lo, hi]. Return 0, or -1 leaving *out alone. */
int cm_parse_int(const char *s, int lo, int hi, int *out);
int cm_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

#endif /* DLOCK_COMMON_H */
