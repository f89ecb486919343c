/* combiner.h - a per-coupon queue in front of the distributed lock: the
 * threads of one server that want the same coupon line up here; one of them
 * (the leader) takes the lock, and may run queued claims under it too.
 *
 * Protocol: combiner_join() either makes the caller the leader, or queues it
 * until a leader has run its claim (JOIN_DONE), leadership is handed to it
 * (JOIN_LEAD), or its deadline passes while still queued (JOIN_TIMEOUT).
 * A leader, holding the lock, pulls queued requests for its coupon with
 * combiner_take() and finishes each with combiner_complete(); when done it
 * calls combiner_leave(), which hands leadership to the next queued request. */
#ifndef APP_COMBINER_H
#define APP_COMBINER_H

#include <pthread.h>
#include <stdint.h>

#include "claim/strategy.h"

typedef enum combine_state {
    COMBINE_QUEUED = 0, /* waiting in the stripe's queue */
    COMBINE_TAKEN,      /* a leader is running this claim */
    COMBINE_DONE,       /* result and *out are final */
    COMBINE_LEAD        /* handed leadership: take the lock yourself */
} combine_state;

typedef struct combine_req {
    int64_t coupon_id;
    const char *user_id;
    claim_out *out;        /* written by the leader before DONE */
    claim_result result;   /* valid in state DONE */
    int64_t t0_us;         /* when the request began waiting (for the wait histogram) */
    combine_state state;   /* guarded by the stripe mutex */
    pthread_cond_t cv;     /* signalled on every state change of this request */
    struct combine_req *next;
} combine_req;

typedef enum join_result { JOIN_LEAD = 0, JOIN_DONE, JOIN_TIMEOUT } join_result;

/* 0 ok; -1: combining unavailable (the caller goes to the lock on its own). */
int combine_req_init(combine_req *r, int64_t coupon_id, const char *user_id, claim_out *out, int64_t t0_us);
void combine_req_destroy(combine_req *r);
/* deadline_ms: CLOCK_MONOTONIC ms (dlock_now_ms() scale). */
join_result combiner_join(combine_req *me, int64_t deadline_ms);
/* Leader only: the next queued request for coupon_id, now TAKEN, or NULL. */
combine_req *combiner_take(int64_t coupon_id);
/* Leader only, holding the lock across batches (--lock-hold-ms): the next
 * queued request for coupon_id, now TAKEN, waiting for one to be queued
 * until until_ms (dlock_now_ms()'s clock); NULL when none came by then. */
combine_req *combiner_take_wait(int64_t coupon_id, int64_t until_ms);
/* Leader only: publish r's result and wake it; r must not be used afterwards. */
void combiner_complete(combine_req *r, claim_result result);
/* Leadership of coupon_id's stripe if nobody holds it now: 1 (the caller
 * leads it and must combiner_leave it), else 0 at once, never waiting. For
 * a leader that also takes the claims of other coupons into its batch
 * (strategy_redlock.c): a coupon another claim of this server leads is
 * left to that leader. */
int combiner_try_lead(int64_t coupon_id);
/* Leader only: give up leadership of coupon_id's stripe. */
void combiner_leave(int64_t coupon_id);

#endif /* APP_COMBINER_H */
