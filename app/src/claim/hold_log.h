/* hold_log.h - the holder history (--hold-log FILE): one line per lock hold
 * of the redlock strategy, appended so that several servers may share one
 * file, for the chaos checker (scripts/chaos, chaos-check) to prove that
 * the writes the store accepted never came from interleaved holds.
 *
 * Two lines per hold (space-separated key=value, one write(2) each): when
 * the lock is taken, before the section (so a server killed between its
 * commit and its second line still left its fence on record),
 *   begin pid=P resource=R fence=F acquired_us=A valid_until_us=V
 * and when the section is over,
 *   hold pid=P resource=R fence=F acquired_us=A valid_until_us=V done_us=D
 *        outcome=applied|refused|none|error status=S records=ID,ID,...
 * Times are CLOCK_MONOTONIC microseconds, one clock for every process of a
 * machine. outcome: applied = records were written under this fence;
 * refused = the store refused the fence (1010); none = the section ran but
 * wrote nothing (sold out, per-user limit); error = the section failed. */
#ifndef APP_HOLD_LOG_H
#define APP_HOLD_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "coupon_db.h"
#include "dlock.h"

/* Opens path for appending (created 0644 if absent); NULL: no log, every
 * hold_log_note is then a no-op. Call once at start-up, before any thread.
 * On failure returns -1 with a one-line reason in errbuf. */
int hold_log_open(const char *path, char *errbuf, size_t errlen);
void hold_log_close(void);

/* Appends the begin line of the hold just taken and returns its start
 * (CLOCK_MONOTONIC us), for hold_log_note. */
int64_t hold_log_begin(const dlock_lock *lock);

/* Appends the line of one hold: the lock taken at acquired_us, the
 * section's status st and its n requests (their records on DB_OK). A failed
 * write is counted on stderr once, never fails the claim. */
void hold_log_note(const dlock_lock *lock, int64_t acquired_us, db_status st, const db_claim_req *reqs, size_t n);

#endif /* APP_HOLD_LOG_H */
