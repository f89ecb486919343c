/* section.h - the claim's critical section as every strategy runs it: the
 * store's read / business step / write (db_claim_section), with this
 * server's business step (--work-us) and fault injection (--fault-pause-ms)
 * between the read and the write. `none` runs it with no lock, `redlock`
 * under libdlock's lock with its fence: the code is the same, only the
 * mutual exclusion around it differs. */
#ifndef APP_SECTION_H
#define APP_SECTION_H

#include <stddef.h>
#include <stdint.h>

#include "coupon_db.h"

#include "claim/strategy.h"
#include "core/config.h"
#include "core/workers.h"

/* Runs the section for the n claims on w's connection (see
 * db_claim_section for the statuses). fence 0 with DB_FENCE_OFF: no lock. */
db_status section_run(worker *w, const app_config *cfg, int64_t coupon_id, db_fence_mode mode, uint64_t fence,
                      db_claim_req *reqs, size_t n);

/* The sections of several coupons, each under its own lock (secs[i].fence;
 * k <= CONFIG_MAX_GROUP): through the commit group at once when it applies
 * (one transaction, a savepoint each), else one by one as section_run.
 * secs[i].status, fault and errmsg give each outcome; the caller adopts a
 * failure into w's store (db_adopt_error) before claim_from_req reads it. */
void section_run_each(worker *w, const app_config *cfg, db_group_section *secs, size_t k);

/* One claim's outcome after the section: out->rec on success, out->detail
 * (from w's store) on failure; returns its row of the outcome table. */
claim_result claim_from_req(worker *w, const db_claim_req *req, claim_out *out);

/* The business step and the pause fault alone, for a section the store
 * runs another way (the bundle's, claim/bundle.c): a db_work_fn whose arg
 * is the const app_config. */
void section_business_step(void *cfg, size_t n_claims);

/* --fault-pause-ms MS:signal: the next section to run stalls MS (called
 * from the SIGUSR1 handler: async-signal-safe). */
void section_fault_arm(void);

#endif /* APP_SECTION_H */
