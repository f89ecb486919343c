/* timeline.c - the --timeline buckets: which bucket an answer lands in,
 * the counts per column, empty buckets, the merge, and p50/p99 within the
 * small histogram's 3 %. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadtest.h"

#define MS_NS 1000000LL

static lt_timeline *a, *b;
static char *text;
static size_t text_len;

static void fini(void)
{
    lt_timeline_free(a);
    lt_timeline_free(b);
    a = b = NULL;
    free(text);
    text = NULL;
}

TestSuite(loadtest_timeline, .fini = fini);

/* The CSV of t, in text. */
static void csv(const lt_timeline *t)
{
    char err[LT_ERR_MAX] = "";
    free(text);
    text = NULL;
    FILE *f = open_memstream(&text, &text_len);
    cr_assert_not_null(f);
    cr_assert_eq(lt_timeline_write_csv(t, f, err, sizeof err), 0, "%s", err);
    cr_assert_eq(fclose(f), 0);
}

/* Line n (0 = the header) of text, without its newline. */
static const char *line(size_t n, char *buf, size_t len)
{
    const char *p = text;
    for (size_t i = 0; i < n; i++) {
        p = strchr(p, '\n');
        cr_assert_not_null(p, "no line %zu in:\n%s", n, text);
        p++;
    }
    size_t k = strcspn(p, "\n");
    cr_assert_lt(k, len);
    memcpy(buf, p, k);
    buf[k] = '\0';
    return buf;
}

static size_t lines(void)
{
    size_t n = 0;
    for (const char *p = text; *p; p++)
        n += *p == '\n';
    return n;
}

Test(loadtest_timeline, buckets_columns_and_empty_rows, .timeout = 10)
{
    char buf[256];
    a = lt_timeline_new();
    cr_assert_not_null(a);
    cr_assert_eq(lt_timeline_answer(a, 0, 200, 0, 1000), 0);
    cr_assert_eq(lt_timeline_answer(a, 249 * MS_NS, 409, 1003, 1000), 0);
    cr_assert_eq(lt_timeline_answer(a, 250 * MS_NS, 503, 1005, 2000), 0);
    cr_assert_eq(lt_timeline_answer(a, 260 * MS_NS, 503, 1006, 2000), 0);
    cr_assert_eq(lt_timeline_answer(a, 270 * MS_NS, 503, 1010, 2000), 0);
    cr_assert_eq(lt_timeline_error(a, 1100 * MS_NS), 0);
    csv(a);
    cr_assert_str_eq(line(0, buf, sizeof buf),
                     "t_ms,answered,won,503_1005,503_1006,503_1010,errors,p50_ms,p99_ms");
    cr_assert_eq(lines(), 6, "header and buckets 0..4:\n%s", text);
    /* 1000 us sits in [992, 1024), reported by its middle, 1008 us. */
    cr_assert_str_eq(line(1, buf, sizeof buf), "0,2,1,0,0,0,0,1.008,1.008");
    /* 2000 us sits in [1984, 2048): reported by its middle, 2016 us. */
    cr_assert_str_eq(line(2, buf, sizeof buf), "250,3,0,1,1,1,0,2.016,2.016");
    cr_assert_str_eq(line(3, buf, sizeof buf), "500,0,0,0,0,0,0,,");
    cr_assert_str_eq(line(4, buf, sizeof buf), "750,0,0,0,0,0,0,,");
    cr_assert_str_eq(line(5, buf, sizeof buf), "1000,0,0,0,0,0,1,,");
}

Test(loadtest_timeline, percentiles_within_three_percent, .timeout = 10)
{
    char buf[256];
    double p50 = 0, p99 = 0;
    a = lt_timeline_new();
    cr_assert_not_null(a);
    /* 97 answers at 3.3 ms, 3 at 250 ms: p50 is 3.3 ms, p99 (rank 99) 250 ms. */
    for (int i = 0; i < 97; i++)
        cr_assert_eq(lt_timeline_answer(a, 10 * MS_NS, 409, 1003, 3300), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(lt_timeline_answer(a, 10 * MS_NS, 200, 0, 250000), 0);
    csv(a);
    cr_assert_eq(sscanf(line(1, buf, sizeof buf), "0,100,3,0,0,0,0,%lf,%lf", &p50, &p99), 2, "%s", buf);
    cr_assert(p50 > 3.3 * 0.97 && p50 < 3.3 * 1.03, "p50 %f", p50);
    cr_assert(p99 > 250 * 0.97 && p99 < 250 * 1.03, "p99 %f", p99);
}

Test(loadtest_timeline, merge_adds_bucket_by_bucket, .timeout = 10)
{
    char buf[256];
    a = lt_timeline_new();
    b = lt_timeline_new();
    cr_assert(a != NULL && b != NULL);
    cr_assert_eq(lt_timeline_answer(a, 0, 200, 0, 500), 0);
    cr_assert_eq(lt_timeline_answer(b, 0, 200, 0, 500), 0);
    /* b reaches further: the merge grows a to it. */
    cr_assert_eq(lt_timeline_answer(b, 60000 * MS_NS, 503, 1005, 500), 0);
    cr_assert_eq(lt_timeline_merge(a, b), 0);
    csv(a);
    cr_assert_eq(lines(), 1 + 241, "%zu lines", lines());
    cr_assert_str_eq(line(1, buf, sizeof buf), "0,2,2,0,0,0,0,0.504,0.504");
    cr_assert_str_eq(line(241, buf, sizeof buf), "60000,1,0,1,0,0,0,0.504,0.504");
}
