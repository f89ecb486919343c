/* lockwatch.h - which Redis nodes of the lock service answer, as last seen:
 * logs every change (node down / up, quorum lost / back) once, sets the
 * node gauges, and runs a background probe so the changes are logged even
 * when nobody asks /healthz. */
#ifndef APP_LOCKWATCH_H
#define APP_LOCKWATCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

/* One observation: bit i of up_mask = cfg->redis[i] answered. Thread-safe;
 * logs the differences with the previous observation (the first one logs
 * only what is down). */
void lockwatch_observe(const app_config *cfg, uint32_t up_mask, size_t nodes);

/* Starts the probe thread (its own lock client, one PING round a second).
 * 0, or -1 with errbuf set. */
int lockwatch_start(const app_config *cfg, char *errbuf, size_t errlen);
/* Stops and joins it; no-op when not started. */
void lockwatch_stop(void);

#endif /* APP_LOCKWATCH_H */
