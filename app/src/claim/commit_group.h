/* commit_group.h - the per-process commit group (--commit-group): lock
 * holders of different coupons hand their sections to it, one of them runs
 * all the sections queued at that moment in one SQLite transaction
 * (db_claim_group: a savepoint each, one COMMIT), and each gets its own
 * section's outcome. The caller still holds its coupon's lock while it
 * waits here, and gets its answer only after the COMMIT, so it cannot
 * release before its write is durable; the row's fence refuses a section
 * whose lease ran out while it waited. */
#ifndef APP_COMMIT_GROUP_H
#define APP_COMMIT_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "coupon_db.h"

#include "core/config.h"
#include "core/workers.h"

/* Whether a section of w with this config goes through the group: SQLite,
 * --commit-group > 0, fence full, no business step and no pause fault
 * (those run between the read and the write with no transaction open). */
int commit_group_applies(const worker *w, const app_config *cfg, db_fence_mode mode);

/* Runs the section of coupon_id (fence, the n claims) through the group and
 * returns its status as db_claim_section would (reqs filled the same way);
 * on failure db_errmsg(w->db) and db_last_fault(w->db) tell why, whichever
 * thread's connection ran it. */
db_status commit_group_run(worker *w, const app_config *cfg, int64_t coupon_id, uint64_t fence,
                           db_claim_req *reqs, size_t n);

/* The sections of several coupons (each under its own lock, fence in
 * secs[i].fence) through the group at once: queued next to each other, so
 * one committer runs them in one transaction (a savepoint each) when
 * --commit-group allows, each secs[i].status (fault, errmsg) its own
 * outcome. The caller adopts a failed section's error into its store
 * (db_adopt_error) before reading it. k <= CONFIG_MAX_GROUP. */
void commit_group_run_each(worker *w, const app_config *cfg, db_group_section *secs, size_t k);

#endif /* APP_COMMIT_GROUP_H */
