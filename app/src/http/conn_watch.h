/* conn_watch.h - deadlines on what a client controls, kept through
 * libmicrohttpd's own hooks: each connection is stamped when it starts
 * (MHD_OPTION_NOTIFY_CONNECTION) and again after every answer
 * (MHD_OPTION_NOTIFY_COMPLETED), and a sweeper thread shutdown()s a
 * connection past its deadline, which libmicrohttpd then sees as closed:
 *
 *   head  whole within --header-timeout-s of the accept or the previous
 *         answer (libmicrohttpd's own timeout is an idle one, reset by
 *         every byte, so a head dripped a byte at a time never ends);
 *   body  at least --min-body-rate bytes/s after a 1 s grace from the
 *         head's end (measured in the upload callback, and by the sweeper
 *         for a body that stopped coming), and the whole request within
 *         --request-timeout-s.
 *   send  while the client owes acknowledgements of answer bytes, at
 *         least --min-send-rate bytes/s acknowledged over every 2 s
 *         (the kernel's counts: whatever the connection is doing, a
 *         client that stops reading is reset within 2-4 s).
 * A request being served has no deadline here: its answer takes as long
 * as the claim's own deadlines (--lock-wait, --db-busy-ms). The per-client
 * connection cap is kept here too, at each start and close (conn_cap.h).
 * Every cut is counted and logged, once a second at most.
 *
 * Thread safety: every call may come from any libmicrohttpd thread; the
 * sweeper runs on its own. The list is guarded by one mutex, which the
 * close notification takes too: the sweeper shuts a descriptor down only
 * while libmicrohttpd has not closed it, so never one reused meanwhile. */
#ifndef APP_CONN_WATCH_H
#define APP_CONN_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "core/config.h"

typedef struct watched watched;

/* Starts the sweeper; 0, or -1 with errbuf set. */
int conn_watch_start(const app_config *cfg, char *errbuf, size_t errlen);
/* Joins the sweeper (after the daemon stopped: no connection is left). */
void conn_watch_stop(void);

/* MHD_OPTION_NOTIFY_CONNECTION: a record per connection from its start
 * (in *socket_context), unlinked and freed at its close. */
void conn_watch_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);
/* The record of conn, NULL when it has none (out of memory at its start). */
watched *conn_watch_of(struct MHD_Connection *conn);
/* The head is whole; body_expected: a body follows (its rate is watched). */
void conn_watch_head_done(watched *w, int body_expected);
/* n more body bytes came: 0, or -1 when the body is slower than
 * --min-body-rate (the caller closes the connection). */
int conn_watch_body(watched *w, size_t n);
/* The request is whole: served from here, no deadline until its answer. */
void conn_watch_serving(watched *w);
/* The answer went out (or the request ended): the next head's clock starts. */
void conn_watch_next(watched *w);

#endif /* APP_CONN_WATCH_H */
