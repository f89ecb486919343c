/* strategy.c - what the strategy interface (strategy.h) gives every
 * strategy: the health of those that use no lock. */
#include "claim/strategy.h"

lock_health strategy_no_lock_health(const strategy *self, worker *w, size_t *nodes_up, size_t *nodes,
                                    uint32_t *up_mask)
{
    (void)self;
    (void)w;
    *up_mask = 0;
    *nodes_up = 0;
    *nodes = 0;
    return LOCK_HEALTH_UNUSED;
}
