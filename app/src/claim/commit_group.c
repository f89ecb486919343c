/* commit_group.c - the per-process commit group (commit_group.h).
 *
 * Leader/follower, no thread of its own: a section joins the queue. If no
 * one is committing, its thread becomes the committer. It takes up to
 * --commit-group queued sections (its own among them unless the queue was
 * longer), runs them on its own connection in one transaction and wakes
 * their threads. Then the oldest section still queued becomes the next
 * committer. So at most one write transaction per process is open at a
 * time, and every section that arrived while one was running shares the
 * next COMMIT. */
#include "claim/commit_group.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "core/metrics.h"

typedef struct group_entry {
    db_group_section sec;
    int done;                 /* guarded by mu: sec is final */
    pthread_cond_t cv;        /* signalled when done, or when it may commit */
    struct group_entry *next; /* the queue, oldest first */
} group_entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static group_entry *head, *tail; /* sections waiting for a committer */
static int committing;           /* a thread is running a group now */

int commit_group_applies(const worker *w, const app_config *cfg, db_fence_mode mode)
{
    /* A business step or a pause runs between the read and the write with
     * no transaction open; inside a group it would hold the file's write
     * lock for every other section, so those sections keep their own path. */
    return cfg->commit_group > 0 && mode == DB_FENCE_FULL && cfg->work_us == 0 && cfg->fault_pause_ms == 0 &&
           db_group_supported(w->db);
}

/* One section in a transaction of its own, on w's connection. */
static void run_alone(worker *w, db_group_section *s)
{
    s->status = db_claim_section(w->db, s->coupon_id, DB_FENCE_FULL, s->fence, s->reqs, s->n, NULL, NULL);
    s->fault = db_last_fault(w->db);
    snprintf(s->errmsg, sizeof s->errmsg, "%s", s->status == DB_OK ? "" : db_errmsg(w->db));
}

/* The committer's work, outside mu: the taken sections in one transaction
 * (or, with --commit-group 1, the one section on the ordinary path). */
static void run_taken(worker *w, group_entry *const *taken, size_t k)
{
    db_group_section *secs[CONFIG_MAX_GROUP];
    int64_t t0 = cm_now_us();

    for (size_t i = 0; i < k; i++)
        secs[i] = &taken[i]->sec;
    if (w->cfg->commit_group == 1) {
        run_alone(w, secs[0]);
    } else {
        (void)db_claim_group(w->db, secs, k); /* every section's status says its outcome */
    }
    /* Once per transaction: the commit stage's passes count the groups. */
    metrics_stage_us(STAGE_COMMIT, cm_now_us() - t0);
}

/* mu held, nobody committing: this thread commits the queue's first (up
 * to max) sections, with mu released while it runs them. */
static void commit_next(worker *w, size_t max)
{
    group_entry *taken[CONFIG_MAX_GROUP];
    size_t k = 0;

    committing = 1;
    while (head != NULL && k < max) {
        taken[k++] = head;
        head = head->next;
    }
    if (head == NULL)
        tail = NULL;
    pthread_mutex_unlock(&mu);
    run_taken(w, taken, k);
    pthread_mutex_lock(&mu);
    /* Under mu: a waiter sees done only after we unlock, so its cv (on
     * its stack) outlives the signal. */
    for (size_t i = 0; i < k; i++) {
        taken[i]->done = 1;
        pthread_cond_signal(&taken[i]->cv);
    }
    committing = 0;
    /* The oldest waiter commits next; if that is us (the queue was
     * longer than one group), the loop goes round with committing 0. */
    if (head != NULL)
        pthread_cond_signal(&head->cv);
}

void commit_group_run_each(worker *w, const app_config *cfg, db_group_section *secs, size_t k)
{
    group_entry me[CONFIG_MAX_GROUP];
    size_t max = cfg->commit_group > CONFIG_MAX_GROUP ? CONFIG_MAX_GROUP : (size_t)cfg->commit_group;
    size_t made = 0;

    for (; made < k && made < CONFIG_MAX_GROUP; made++) {
        memset(&me[made], 0, sizeof me[made]);
        me[made].sec = secs[made];
        if (pthread_cond_init(&me[made].cv, NULL) != 0)
            break;
    }
    if (max == 0 || made < k) {
        /* No group (or no condition variable): each section on its own. */
        for (size_t i = 0; i < made; i++)
            pthread_cond_destroy(&me[i].cv);
        for (size_t i = 0; i < k; i++)
            run_alone(w, &secs[i]);
        return;
    }
    pthread_mutex_lock(&mu);
    /* All k queued at once and next to each other, so one committer takes
     * them together (up to --commit-group). */
    for (size_t i = 0; i < k; i++) {
        if (tail != NULL)
            tail->next = &me[i];
        else
            head = &me[i];
        tail = &me[i];
    }
    for (size_t i = 0; i < k;) {
        if (me[i].done) {
            i++;
            continue;
        }
        /* Ours are taken in queue order: the first not done is the one a
         * committer signals next (done, or the head's turn to commit). */
        if (committing) {
            pthread_cond_wait(&me[i].cv, &mu);
            continue;
        }
        commit_next(w, max);
    }
    pthread_mutex_unlock(&mu);
    for (size_t i = 0; i < k; i++) {
        pthread_cond_destroy(&me[i].cv);
        secs[i] = me[i].sec;
    }
}

db_status commit_group_run(worker *w, const app_config *cfg, int64_t coupon_id, uint64_t fence,
                           db_claim_req *reqs, size_t n)
{
    db_group_section sec = {.coupon_id = coupon_id, .fence = fence, .reqs = reqs, .n = n};

    commit_group_run_each(w, cfg, &sec, 1);
    if (sec.status != DB_OK)
        db_adopt_error(w->db, sec.fault, sec.errmsg);
    return sec.status;
}
