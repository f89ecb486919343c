/* progress.c - the progress line on stderr while the load runs: requests done,
 * rate, errors, failed connects; in place on a terminal, one line per second otherwise. */
#include "loadtest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct lt_progress {
    FILE *f;
    const lt_worker *w;
    unsigned n;
    uint64_t total;       /* 0 = unknown (--duration only) */
    int tty;
    int64_t start_ns;
    uint64_t last_done;
    int64_t last_ns;
    size_t last_width;    /* chars of the previous in-place line, to blank its tail */
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* CLOCK_MONOTONIC: a wall-clock jump must not stall or spin the line */
    int stopping;         /* under mu */
    pthread_t tid;
    int have_mu, have_cv, have_thread;
};

static void print_line(lt_progress *p, int final)
{
    uint64_t done = 0, errors = 0, connect_failures = 0;
    int64_t now = cm_now_ns();
    double dt = (double)(now - p->last_ns) / 1e9;
    double elapsed = (double)(now - p->start_ns) / 1e9;
    double rate;
    char line[200];
    int len;

    for (unsigned i = 0; i < p->n; i++) {
        done += atomic_load_explicit(&p->w[i].done, memory_order_relaxed);
        errors += atomic_load_explicit(&p->w[i].errors, memory_order_relaxed);
        connect_failures += atomic_load_explicit(&p->w[i].connect_failures, memory_order_relaxed);
    }
    /* The final line reports the whole run's mean rate, not the last sliver. */
    if (final)
        rate = elapsed > 0 ? (double)done / elapsed : 0;
    else
        rate = dt > 0 ? (double)(done - p->last_done) / dt : 0;
    p->last_done = done;
    p->last_ns = now;

    if (p->total > 0)
        len = snprintf(line, sizeof line,
                       "progress: %llu/%llu requests (%.0f%%)  %.0f req/s  errors %llu  "
                       "failed connects %llu  %.1f s",
                       (unsigned long long)done, (unsigned long long)p->total,
                       100.0 * (double)done / (double)p->total, rate, (unsigned long long)errors,
                       (unsigned long long)connect_failures, elapsed);
    else
        len = snprintf(line, sizeof line,
                       "progress: %llu requests  %.0f req/s  errors %llu  failed connects %llu  %.1f s",
                       (unsigned long long)done, rate, (unsigned long long)errors,
                       (unsigned long long)connect_failures, elapsed);
    if (len < 0)
        return;
    if (p->tty) {
        size_t w = (size_t)len < sizeof line ? (size_t)len : sizeof line - 1;
        /* '\r' rewrites the same line; pad so a shorter line leaves no stale tail. */
        fprintf(p->f, "\r%s%*s", line, p->last_width > w ? (int)(p->last_width - w) : 0, "");
        p->last_width = w;
        if (final)
            fputc('\n', p->f);
    } else {
        fprintf(p->f, "%s\n", line);
    }
    fflush(p->f);
}

static void *progress_main(void *arg)
{
    lt_progress *p = arg;
    const int64_t period_ns = p->tty ? 250000000 : 1000000000;
    int64_t next = p->start_ns + period_ns;

    pthread_mutex_lock(&p->mu);
    while (!p->stopping) {
        struct timespec ts = {.tv_sec = (time_t)(next / 1000000000), .tv_nsec = (long)(next % 1000000000)};
        int e = pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        if (p->stopping)
            break;
        if (e == ETIMEDOUT) {
            pthread_mutex_unlock(&p->mu);
            print_line(p, 0);
            pthread_mutex_lock(&p->mu);
            next += period_ns;
            /* After a long stall (SIGSTOP, swap), skip the missed ticks instead of bursting. */
            if (next < cm_now_ns())
                next = cm_now_ns() + period_ns;
        }
    }
    pthread_mutex_unlock(&p->mu);
    print_line(p, 1);
    return NULL;
}

static void progress_free(lt_progress *p)
{
    if (p == NULL)
        return;
    if (p->have_cv)
        pthread_cond_destroy(&p->cv);
    if (p->have_mu)
        pthread_mutex_destroy(&p->mu);
    free(p);
}

int lt_progress_start(FILE *f, const lt_worker *w, unsigned n, uint64_t total, lt_progress **out,
                      char *err, size_t errlen)
{
    int rc = -1;
    int e;
    pthread_condattr_t attr;
    int have_attr = 0;
    lt_progress *p = calloc(1, sizeof *p);
    *out = NULL;
    if (p == NULL) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    p->f = f;
    p->w = w;
    p->n = n;
    p->total = total;
    p->tty = isatty(fileno(f));
    p->start_ns = p->last_ns = cm_now_ns();
    if ((e = pthread_mutex_init(&p->mu, NULL)) != 0)
        goto fail;
    p->have_mu = 1;
    if ((e = pthread_condattr_init(&attr)) != 0)
        goto fail;
    have_attr = 1;
    if ((e = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC)) != 0)
        goto fail;
    if ((e = pthread_cond_init(&p->cv, &attr)) != 0)
        goto fail;
    p->have_cv = 1;
    if ((e = pthread_create(&p->tid, NULL, progress_main, p)) != 0)
        goto fail;
    p->have_thread = 1;
    *out = p;
    p = NULL;
    rc = 0;
    goto out;
fail:
    snprintf(err, errlen, "cannot start the progress thread: %s", strerror(e));
out:
    if (have_attr)
        pthread_condattr_destroy(&attr);
    progress_free(p);
    return rc;
}

void lt_progress_stop(lt_progress *p)
{
    if (p == NULL)
        return;
    if (p->have_thread) {
        pthread_mutex_lock(&p->mu);
        p->stopping = 1;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->tid, NULL);
    }
    progress_free(p);
}
