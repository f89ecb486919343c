/* round_core.h - the rules of one round, without I/O ("sans-I/O"): which
 * nodes are asked, when the outcome is decided, how long the others get,
 * when skipped nodes get a second chance, and what an unanswered node
 * costs. Two drivers move the bytes: rounds.c (poll() over blocking-API
 * contexts, for the blocking client) and async_round.c (hiredis's async
 * contexts on the caller's event loop). Neither decides anything here. */
#ifndef DLOCK_ROUND_CORE_H
#define DLOCK_ROUND_CORE_H

#include "dlock_internal.h"

/* A node in a round, by what the round owes it. */
typedef enum dlock__slot_role {
    DLOCK__SLOT_OUT = 0,  /* not in this round (its own I/O is still served, never waited for) */
    DLOCK__SLOT_WAITED,   /* asked; the round waits for its answer until decided or the deadline */
    DLOCK__SLOT_OPTIONAL, /* breaker open but sent anyway (a release reaching a node that may hold
                             the key, a reconnect probe): its answer counts if it comes in time,
                             the round never waits for it */
    DLOCK__SLOT_SKIPPED   /* breaker open: not sent */
} dlock__slot_role;

typedef struct dlock__round_core {
    dlock_client *c;
    dlock__result *res;             /* the caller's array, as stop() sees it */
    uint8_t role[DLOCK_MAX_NODES];  /* dlock__slot_role */
    uint8_t waiting[DLOCK_MAX_NODES]; /* the command went out (or waits behind a connect): due */
    dlock__stop_fn stop;
    void *stop_arg;
    int64_t start;                  /* when the commands went out */
    int64_t deadline;               /* start + command timeout, or sooner once decided */
    int64_t call_deadline_ms;       /* the call's own deadline (INT64_MAX: none) */
    int stopped;                    /* stop() said the outcome is decided */
    int second_chance;              /* the skipped nodes were asked after all (once per round) */
} dlock__round_core;

/* Opens a round of c over mask: clears those results, counts the round
 * trip and gives each node its role. Returns the nodes to send to. */
uint32_t dlock__rc_open(dlock__round_core *r, dlock_client *c, uint32_t mask, uint32_t reach,
                        dlock__result *res, dlock__stop_fn stop, void *stop_arg,
                        int64_t call_deadline_ms);
/* The driver queued node i's command (waiting) or could not (res[i] says why). */
void dlock__rc_sent(dlock__round_core *r, size_t i, int queued);
/* The commands went out: the deadline. connecting: a waited node is still
 * connecting, so the round adds the connect time as a blocking connect would. */
void dlock__rc_start(dlock__round_core *r, int connecting);
/* res[i] holds node i's answer to this round's command (status REPLY, or
 * AUTH): it answered everything before it too, so its breaker closes. */
void dlock__rc_replied(dlock__round_core *r, size_t i);
/* Node i failed for this round (res[i] says how): nothing more is due. */
void dlock__rc_failed(dlock__round_core *r, size_t i);
/* After answers: whether stop() decides the round now; the first time, the
 * deadline comes forward to the end of a short grace. */
void dlock__rc_check_stop(dlock__round_core *r);
/* Whether the round still waits for an answer that matters. */
int dlock__rc_still_waiting(const dlock__round_core *r);
/* The round ran out of healthy answers: the skipped nodes to ask after all
 * (release and extend only, once), their results cleared and roles set.
 * 0: none. */
uint32_t dlock__rc_second_chance(dlock__round_core *r);
/* Whether the round still waits, after giving the second chance when it is
 * due: send(driver, mask) sends the command to those nodes and says
 * whether a waited one is still connecting (its connect time is added). */
int dlock__rc_waits(dlock__round_core *r, int (*send)(void *driver, uint32_t mask),
                    void *driver);
/* The nodes whose answer the round still waits for (any role). */
uint32_t dlock__rc_waiting(const dlock__round_core *r);
/* Ends the round: every node still due is marked PENDING (decided without
 * it, or optional) or TIMEOUT, and owes its reply (stale); breakers trip as
 * the rules say. Returns the nodes the driver must close: waited for,
 * undecided, and still connecting (nothing was sent). */
uint32_t dlock__rc_finish(dlock__round_core *r);

#endif /* DLOCK_ROUND_CORE_H */
