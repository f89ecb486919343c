/* header_deadline.c - the request-header deadline (header_deadline.h): the
 * connections waiting for headers, and the watchdog that cuts the late ones. */
#include "http/header_deadline.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "common.h"
#include "core/log.h"

/* How often the watchdog looks: a late connection is cut at most this much
 * after its deadline. */
#define SCAN_MS 200

typedef struct conn_entry {
    struct conn_entry *prev, *next;
    struct header_deadline *hd;
    MHD_socket fd;
    int64_t waiting_since_ms; /* start of the wait for headers (accept, or the last answer) */
    int in_request;           /* headers complete, the request is being served */
    int cut;                  /* shut down already: once is enough */
} conn_entry;

struct header_deadline {
    pthread_mutex_t mu; /* guards the list, the entries' fields and stop */
    pthread_cond_t wake;
    pthread_t thread;
    conn_entry *head;
    int64_t timeout_ms;
    int stop;
};

static void *watchdog(void *arg)
{
    header_deadline *hd = arg;

    pthread_mutex_lock(&hd->mu);
    while (!hd->stop) {
        int64_t now = cm_now_ms();
        unsigned cut = 0;
        for (conn_entry *e = hd->head; e != NULL; e = e->next) {
            if (e->in_request || e->cut || now - e->waiting_since_ms < hd->timeout_ms)
                continue;
            /* Under the mutex: the CLOSED notification, which MHD sends
             * before it closes the descriptor, cannot remove the entry
             * meanwhile, so fd is still this connection's. */
            if (shutdown(e->fd, SHUT_RDWR) == 0 || errno == ENOTCONN)
                cut++;
            e->cut = 1;
        }
        if (cut > 0)
            log_event_line(LOG_WARN, LOG_EV_HTTPD, "closed %u connection(s) whose request headers took longer than %lld s",
                           cut, (long long)(hd->timeout_ms / 1000));
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += SCAN_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        /* A timed wait, so that header_deadline_stop wakes it at once. */
        (void)pthread_cond_timedwait(&hd->wake, &hd->mu, &until);
    }
    pthread_mutex_unlock(&hd->mu);
    return NULL;
}

int header_deadline_start(unsigned timeout_s, header_deadline **out)
{
    pthread_condattr_t ca;

    *out = NULL;
    if (timeout_s == 0)
        return 0;
    header_deadline *hd = calloc(1, sizeof *hd);
    if (hd == NULL)
        return -1;
    hd->timeout_ms = (int64_t)timeout_s * 1000;
    /* The watchdog's timed wait runs on the monotonic clock, like the deadlines. */
    if (pthread_condattr_init(&ca) != 0) {
        free(hd);
        return -1;
    }
    int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(&hd->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        free(hd);
        return -1;
    }
    if (pthread_mutex_init(&hd->mu, NULL) != 0) {
        pthread_cond_destroy(&hd->wake);
        free(hd);
        return -1;
    }
    if (pthread_create(&hd->thread, NULL, watchdog, hd) != 0) {
        pthread_mutex_destroy(&hd->mu);
        pthread_cond_destroy(&hd->wake);
        free(hd);
        return -1;
    }
    *out = hd;
    return 0;
}

void header_deadline_stop(header_deadline *hd)
{
    if (hd == NULL)
        return;
    pthread_mutex_lock(&hd->mu);
    hd->stop = 1;
    pthread_cond_signal(&hd->wake);
    pthread_mutex_unlock(&hd->mu);
    pthread_join(hd->thread, NULL);
    /* MHD_stop_daemon closed every connection (CLOSED notifications), so
     * this finds nothing in practice; it frees whatever is left anyway. */
    while (hd->head != NULL) {
        conn_entry *e = hd->head;
        hd->head = e->next;
        free(e);
    }
    pthread_mutex_destroy(&hd->mu);
    pthread_cond_destroy(&hd->wake);
    free(hd);
}

void header_deadline_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                            enum MHD_ConnectionNotificationCode code)
{
    header_deadline *hd = cls;

    if (hd == NULL)
        return;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        conn_entry *e = ci != NULL ? calloc(1, sizeof *e) : NULL;
        /* No entry (no memory): this connection simply has no deadline
         * beyond MHD's idle timeout. */
        *socket_context = e;
        if (e == NULL)
            return;
        e->hd = hd;
        e->fd = ci->connect_fd;
        e->waiting_since_ms = cm_now_ms();
        pthread_mutex_lock(&hd->mu);
        e->next = hd->head;
        if (hd->head != NULL)
            hd->head->prev = e;
        hd->head = e;
        pthread_mutex_unlock(&hd->mu);
        return;
    }
    conn_entry *e = *socket_context;
    *socket_context = NULL;
    if (e == NULL)
        return;
    pthread_mutex_lock(&hd->mu);
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        hd->head = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    pthread_mutex_unlock(&hd->mu);
    free(e);
}

/* The entry of conn, or NULL (deadline off, or no memory at accept). */
static conn_entry *entry_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

static void set_in_request(struct MHD_Connection *conn, int in_request)
{
    conn_entry *e = entry_of(conn);

    if (e == NULL)
        return;
    pthread_mutex_lock(&e->hd->mu);
    e->in_request = in_request;
    e->waiting_since_ms = cm_now_ms();
    pthread_mutex_unlock(&e->hd->mu);
}

void header_deadline_request_begins(struct MHD_Connection *conn)
{
    set_in_request(conn, 1);
}

void header_deadline_request_ends(struct MHD_Connection *conn)
{
    set_in_request(conn, 0);
}
