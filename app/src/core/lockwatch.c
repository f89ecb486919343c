/* lockwatch.c - the last seen state of the lock service's nodes, its log
 * lines on every change, and the once-a-second probe thread. */
#include "core/lockwatch.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dlock.h"

#include "core/log.h"
#include "core/metrics.h"
#include "core/workers.h"

#define PROBE_EVERY_MS 1000

static pthread_mutex_t state_mu = PTHREAD_MUTEX_INITIALIZER;
static int seen;           /* an observation was made (state_mu) */
static uint32_t last_mask; /* its up_mask (state_mu) */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC; signalled by lockwatch_stop */
    pthread_t thread;
    int started;
    int stop;
    dlock_client *client; /* the probe's own: never waits behind a claim's slot */
    const app_config *cfg;
} probe = {.mu = PTHREAD_MUTEX_INITIALIZER};

static size_t popcount(uint32_t m)
{
    size_t n = 0;
    for (; m != 0; m &= m - 1)
        n++;
    return n;
}

/* "a, b, c": the nodes of one log line (cut when the buffer is full). */
static void append_addr(char *buf, size_t len, size_t *count, const char *addr)
{
    size_t used = strlen(buf);
    if (used < len)
        snprintf(buf + used, len - used, "%s%.200s", *count > 0 ? ", " : "", addr);
    (*count)++;
}

void lockwatch_observe(const app_config *cfg, uint32_t up_mask, size_t nodes)
{
    size_t quorum = nodes / 2 + 1, up = popcount(up_mask);

    metrics_lock_nodes(up, nodes, quorum);
    pthread_mutex_lock(&state_mu);
    /* The first observation is compared with "all up": a node down at start
     * is logged, a healthy start is not. */
    uint32_t before = seen ? last_mask : (nodes >= 32 ? UINT32_MAX : (UINT32_C(1) << nodes) - 1);
    size_t up_before = popcount(before);
    seen = 1;
    last_mask = up_mask;
    pthread_mutex_unlock(&state_mu);
    /* Logged outside the mutex; two observers racing may log one change
     * twice, never miss one. One line per direction for all the nodes that
     * changed together, so the rate limit never hides a node. */
    char went_down[512] = "", came_up[512] = "";
    size_t nd = 0, nu = 0;
    for (size_t i = 0; i < nodes && i < cfg->n_redis; i++) {
        uint32_t bit = UINT32_C(1) << i;
        char shown[512]; /* never a redis:// password in the log */
        dlock_addr_shown(cfg->redis[i], shown, sizeof shown);
        if ((before & bit) && !(up_mask & bit))
            append_addr(went_down, sizeof went_down, &nd, shown);
        else if (!(before & bit) && (up_mask & bit))
            append_addr(came_up, sizeof came_up, &nu, shown);
    }
    if (nd > 0)
        log_event_line(LOG_WARN, LOG_EV_NODE_DOWN, "redis node%s %s stopped answering (%zu of %zu up, quorum %zu)",
                       nd > 1 ? "s" : "", went_down, up, nodes, quorum);
    if (nu > 0)
        log_event_line(LOG_INFO, LOG_EV_NODE_UP, "redis node%s %s answer%s again (%zu of %zu up, quorum %zu)",
                       nu > 1 ? "s" : "", came_up, nu > 1 ? "" : "s", up, nodes, quorum);
    if (up_before >= quorum && up < quorum)
        log_event_line(LOG_ERROR, LOG_EV_QUORUM_LOST,
                       "lock quorum lost: %zu of %zu nodes up, %zu needed; claims answer 503 / 1006", up, nodes,
                       quorum);
    else if (up_before < quorum && up >= quorum)
        log_event_line(LOG_INFO, LOG_EV_QUORUM_BACK, "lock quorum back: %zu of %zu nodes up", up, nodes);
}

static void *probe_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&probe.mu);
    while (!probe.stop) {
        uint32_t mask = 0;
        pthread_mutex_unlock(&probe.mu);
        (void)dlock_ping_nodes(probe.client, &mask); /* the mask is the answer, the code adds nothing */
        lockwatch_observe(probe.cfg, mask, dlock_client_nodes(probe.client));
        pthread_mutex_lock(&probe.mu);

        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += PROBE_EVERY_MS / 1000;
        /* Woken early only by lockwatch_stop; a spurious wake probes sooner, harmlessly. */
        if (!probe.stop)
            pthread_cond_timedwait(&probe.cv, &probe.mu, &ts);
    }
    pthread_mutex_unlock(&probe.mu);
    return NULL;
}

int lockwatch_start(const app_config *cfg, char *errbuf, size_t errlen)
{
    pthread_condattr_t ca;

    probe.cfg = cfg;
    if (worker_lock_client_new(cfg, &probe.client, errbuf, errlen) != DLOCK_OK)
        return -1;
    if (pthread_condattr_init(&ca) != 0)
        goto fail;
    /* Monotonic: a wall-clock step must not stall the probe. */
    if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 || pthread_cond_init(&probe.cv, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        goto fail;
    }
    pthread_condattr_destroy(&ca);
    probe.stop = 0;
    if (pthread_create(&probe.thread, NULL, probe_main, NULL) != 0) {
        pthread_cond_destroy(&probe.cv);
        goto fail;
    }
    probe.started = 1;
    return 0;
fail:
    snprintf(errbuf, errlen, "cannot start the lock health probe");
    dlock_client_free(probe.client);
    probe.client = NULL;
    return -1;
}

void lockwatch_stop(void)
{
    if (!probe.started)
        return;
    pthread_mutex_lock(&probe.mu);
    probe.stop = 1;
    pthread_cond_signal(&probe.cv);
    pthread_mutex_unlock(&probe.mu);
    pthread_join(probe.thread, NULL);
    pthread_cond_destroy(&probe.cv);
    dlock_client_free(probe.client);
    probe.client = NULL;
    probe.started = 0;
}
