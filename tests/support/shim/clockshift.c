/* clockshift.c - an LD_PRELOAD shim that steps the wall clock of the process
 * it is loaded into, for tests of what a clock step does to a lock
 * (Kleppmann's objection to Redlock). clock_gettime on CLOCK_REALTIME and
 * CLOCK_REALTIME_COARSE, gettimeofday and time return the real wall clock
 * plus an offset in ms. The offset is read from the file named by
 * $DLOCK_CLOCKSHIFT_FILE (a decimal integer, may be negative; missing or
 * unreadable = 0). Every other clock passes through unchanged: a process's
 * monotonic clock does not step.
 *
 * Why raw syscalls and no malloc: Debian's libfaketime cannot start
 * Debian's redis-server, because its dlsym/malloc calls recurse into
 * jemalloc while jemalloc itself is initialising and asking for the time.
 * This shim calls nothing that allocates: getenv, and syscall() for the
 * clock, open, read and close. The file is read again at most once per
 * millisecond of monotonic time, so a step written by the test (the helper
 * renames a complete file into place) shows within about 1 ms. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static _Atomic long long cached_offset_ms;
static _Atomic long long next_read_ns; /* monotonic ns; 0 = never read */

static long long mono_ns(void)
{
    struct timespec ts;

    if (syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The offset file, parsed by hand (strtoll may touch the locale). */
static long long read_offset_ms(void)
{
    const char *path = getenv("DLOCK_CLOCKSHIFT_FILE");
    char buf[32];
    long long v = 0;
    int neg = 0;
    long fd, n;

    if (path == NULL || path[0] == '\0')
        return 0;
    fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = syscall(SYS_read, (int)fd, buf, sizeof(buf) - 1);
    syscall(SYS_close, (int)fd);
    if (n <= 0)
        return 0;
    for (long i = 0; i < n; i++) {
        if (i == 0 && buf[i] == '-') {
            neg = 1;
        } else if (buf[i] >= '0' && buf[i] <= '9') {
            v = v * 10 + (buf[i] - '0');
        } else {
            break;
        }
    }
    return neg ? -v : v;
}

static long long offset_ms(void)
{
    long long now = mono_ns();

    if (now == 0 || now >= atomic_load(&next_read_ns)) {
        atomic_store(&cached_offset_ms, read_offset_ms());
        atomic_store(&next_read_ns, now + 1000000LL);
    }
    return atomic_load(&cached_offset_ms);
}

static void shift(struct timespec *ts, long long ms)
{
    long long ns = (long long)ts->tv_nsec + (ms % 1000) * 1000000LL;

    ts->tv_sec += (time_t)(ms / 1000);
    if (ns < 0) {
        ns += 1000000000LL;
        ts->tv_sec -= 1;
    } else if (ns >= 1000000000LL) {
        ns -= 1000000000LL;
        ts->tv_sec += 1;
    }
    ts->tv_nsec = (long)ns;
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
    if (syscall(SYS_clock_gettime, clk, ts) != 0)
        return -1;
    if (clk == CLOCK_REALTIME || clk == CLOCK_REALTIME_COARSE)
        shift(ts, offset_ms());
    return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    struct timespec ts;

    (void)tz; /* obsolete: glibc fills it with zeros, nobody reads it */
    if (syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts) != 0)
        return -1;
    shift(&ts, offset_ms());
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
    return 0;
}

time_t time(time_t *out)
{
    struct timespec ts;
    time_t t;

    if (syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts) != 0)
        return (time_t)-1;
    shift(&ts, offset_ms());
    t = ts.tv_sec;
    if (out != NULL)
        *out = t;
    return t;
}
