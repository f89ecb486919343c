/* header_deadline.h - a deadline for a request's headers, which
 * libmicrohttpd 0.9.75 lacks: its connection timeout is an idle timeout,
 * reset by every byte, so a client sending a header byte every few seconds
 * (slowloris) holds a connection for as long as it likes.
 *
 * Each connection is registered when MHD accepts it (NOTIFY_CONNECTION,
 * its socket from MHD_CONNECTION_INFO_CONNECTION_FD). It is "waiting for
 * headers" from then, and again from the end of each answered request (the
 * next request on a keep-alive connection), until the access handler's
 * first call, which comes once the headers are complete. A watchdog thread
 * shuts down (shutdown(2), not close: the descriptor stays MHD's) every
 * connection that waited longer than the deadline; MHD then sees the peer
 * gone and frees the connection itself. The entry is removed in the CLOSED
 * notification, which MHD 0.9.75 sends before it closes the descriptor
 * (daemon.c, MHD_cleanup_connections), under the same mutex as the
 * watchdog's shutdown, so a shutdown never reaches a reused descriptor. */
#ifndef APP_HEADER_DEADLINE_H
#define APP_HEADER_DEADLINE_H

#include <microhttpd.h>

typedef struct header_deadline header_deadline;

/* timeout_s 0: *out NULL and 0 (off; the callbacks below then do nothing).
 * Else the watchdog runs: 0, or -1 (no memory, no thread) with *out NULL. */
int header_deadline_start(unsigned timeout_s, header_deadline **out);
/* Stops the watchdog and frees what is left. After MHD_stop_daemon. NULL ok. */
void header_deadline_stop(header_deadline *hd);

/* MHD_OPTION_NOTIFY_CONNECTION's callback; cls is the header_deadline (or NULL). */
void header_deadline_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                            enum MHD_ConnectionNotificationCode code);
/* The access handler's first call of a request: its headers are complete. */
void header_deadline_request_begins(struct MHD_Connection *conn);
/* MHD_OPTION_NOTIFY_COMPLETED: the connection waits for headers again. */
void header_deadline_request_ends(struct MHD_Connection *conn);

#endif /* APP_HEADER_DEADLINE_H */
