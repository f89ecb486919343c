/* sleep.c - a sleep that a signal cannot shorten. */
#include <errno.h>
#include <time.h>

#include "common.h"

int cm_sleep_us(uint64_t us)
{
    /* No syscall for nothing: bench's default hold is 0 ms on every cycle. */
    if (us == 0)
        return 0;
    struct timespec req = {.tv_sec = (time_t)(us / 1000000u), .tv_nsec = (long)(us % 1000000u) * 1000L};
    /* nanosleep leaves the remainder in req on EINTR: a signal must not shorten the hold.
     * Only EINTR is retried; anything else is the caller's to report. */
    while (nanosleep(&req, &req) != 0) {
        if (errno != EINTR)
            return -1;
    }
    return 0;
}

int cm_sleep_ms(uint32_t ms)
{
    return cm_sleep_us((uint64_t)ms * 1000u);
}
