/* commit_group.c - the per-process commit group (commit_group.h).
 *
 * Leader/follower, no thread of its own: a section joins the queue; if no
 * one is committing, its thread becomes the committer, takes up to
 * --commit-group queued sections (its own among them unless the queue was
 * longer), runs them on its own connection in one transaction and wakes
 * their threads; then the oldest section still queued becomes the next
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

/* The committer's work, outside mu: the taken sections in one transaction
 * (or, with --commit-group 1, the one section on the ordinary path). */
static void run_taken(worker *w, group_entry *const *taken, size_t k)
{
    db_group_section *secs[CONFIG_MAX_GROUP];
    int64_t t0 = cm_now_us();

    for (size_t i = 0; i < k; i++)
        secs[i] = &taken[i]->sec;
    if (w->cfg->commit_group == 1) {
        db_group_section *s = secs[0];
        s->status = db_claim_section(w->db, s->coupon_id, DB_FENCE_FULL, s->fence, s->reqs, s->n, NULL, NULL);
        s->fault = db_last_fault(w->db);
        snprintf(s->errmsg, sizeof s->errmsg, "%s", s->status == DB_OK ? "" : db_errmsg(w->db));
    } else {
        (void)db_claim_group(w->db, secs, k); /* every section's status says its outcome */
    }
    /* Once per transaction: the commit stage's passes count the groups. */
    metrics_stage_us(STAGE_COMMIT, cm_now_us() - t0);
}

db_status commit_group_run(worker *w, const app_config *cfg, int64_t coupon_id, uint64_t fence,
                           db_claim_req *reqs, size_t n)
{
    group_entry me;
    size_t max = cfg->commit_group > CONFIG_MAX_GROUP ? CONFIG_MAX_GROUP : (size_t)cfg->commit_group;

    memset(&me, 0, sizeof me);
    me.sec.coupon_id = coupon_id;
    me.sec.fence = fence;
    me.sec.reqs = reqs;
    me.sec.n = n;
    if (max == 0 || pthread_cond_init(&me.cv, NULL) != 0)
        return db_claim_section(w->db, coupon_id, DB_FENCE_FULL, fence, reqs, n, NULL, NULL);

    pthread_mutex_lock(&mu);
    if (tail != NULL)
        tail->next = &me;
    else
        head = &me;
    tail = &me;
    while (!me.done) {
        if (committing) {
            pthread_cond_wait(&me.cv, &mu);
            continue;
        }
        committing = 1;
        group_entry *taken[CONFIG_MAX_GROUP];
        size_t k = 0;
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
    pthread_mutex_unlock(&mu);
    pthread_cond_destroy(&me.cv);
    if (me.sec.status != DB_OK)
        db_adopt_error(w->db, me.sec.fault, me.sec.errmsg);
    return me.sec.status;
}
