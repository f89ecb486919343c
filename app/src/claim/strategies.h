/* strategies.h - the registry of claim strategies: every strategy once,
 * by name, then the seeds' recipes. main.c picks --strategy's entry here
 * and hands the list to the options (core/ knows no strategy). */
#ifndef APP_STRATEGIES_H
#define APP_STRATEGIES_H

#include <stddef.h>

#include "claim/strategy.h"

/* NULL for an unknown name. */
const strategy *strategy_by_name(const char *name);
/* The i-th registered strategy, NULL past the end (the first is the default). */
const strategy *strategy_at(size_t i);

#endif /* APP_STRATEGIES_H */
