/* clock.c - monotonic now, in ns, us and ms. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common.h"

int64_t cm_now_ns(void)
{
    struct timespec ts;
    /* Monotonic: a wall-clock step during a run must not bend latencies or the end time. */
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        /* POSIX 2008 requires CLOCK_MONOTONIC, so this fails only on a broken
         * platform; every time measured after it would be garbage. */
        perror("clock_gettime(CLOCK_MONOTONIC)");
        abort();
    }
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t cm_now_us(void)
{
    return cm_now_ns() / 1000;
}

int64_t cm_now_ms(void)
{
    return cm_now_ns() / 1000000;
}
