/* fault.h - the crash fault of a lock holder (--fault-crash-after-lock N).
 * (The pause fault lives in section.c: it stalls inside the section.) */
#ifndef APP_FAULT_H
#define APP_FAULT_H

#include "core/config.h"

/* Exit status of a server killed by the crash fault. */
#define FAULT_CRASH_STATUS 86

/* Called on every successful lock acquisition of this process; on the N-th
 * one it _exits at once: no release, no reply, no clean-up, like kill -9
 * or a power cut while the lock is held. A no-op when N is 0. */
void fault_lock_acquired(const app_config *cfg);

#endif /* APP_FAULT_H */
