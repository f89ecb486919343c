/* accept.h - the accept front: coupon-server accepts its connections
 * itself, and libmicrohttpd only ever sees whole, screened requests.
 *
 * libmicrohttpd 0.9.75 answers a malformed request with its own HTML page
 * before any callback runs, and holds one of its slots for a connection
 * from its accept, whatever the peer sends or does not send. So one
 * thread (an epoll loop) accepts on the server's listen socket and, for
 * each connection, peeks (MSG_PEEK: the bytes stay in the socket) until
 * the request head and its body are complete, screens them
 * (head_parse.h), answers anything malformed itself in the contract's
 * JSON, and hands the untouched socket to libmicrohttpd
 * (MHD_add_connection) only when the request is whole and valid. Every
 * answer closes the connection (reply.c), so every request on it passed
 * the screen: libmicrohttpd cannot hand a kept-alive connection back for
 * the next request, and letting it parse that request itself would skip
 * the screen and the deadlines below.
 *
 * What a client controls is bounded while the front holds it:
 *   head      within --header-timeout-s of the accept (0: only the next);
 *   request   head and body within --request-timeout-s of the accept;
 *   body      at least --min-body-rate bytes/s after a 1 s grace;
 *   slots     at most --max-connections held by the front, at most
 *             --max-connections-per-ip from one address (a new one past
 *             that cap is closed at once); when the front is full, the
 *             oldest connection of the address that holds the most is
 *             closed to make room (the idle and the slow are the old ones,
 *             and a normal client, whose request is whole within
 *             milliseconds, holds one).
 * A deadline closes the connection without an answer. A body larger than
 * what the front may peek (FRONT_BODY_PEEK_MAX, only when --max-body-bytes
 * is raised past it) is handed over after its head and read by
 * libmicrohttpd under its idle timeout only (docs/reliability.md). */
#ifndef APP_ACCEPT_H
#define APP_ACCEPT_H

#include <microhttpd.h>

#include "app.h"

/* The largest body the front waits for before the hand-over. */
#define FRONT_BODY_PEEK_MAX (64 * 1024)

typedef struct front front;

/* Starts the front's thread on listen_fd (listening, non-blocking; the
 * front owns it from here on every path), handing requests to daemon.
 * 0, or -1 with errbuf set and *out NULL. */
int front_start(app *a, int listen_fd, struct MHD_Daemon *daemon, front **out, char *errbuf, size_t errlen);
/* Stops accepting (closes the listen socket), closes every connection the
 * front still holds (none has reached a handler), joins the thread. NULL ok. */
void front_stop(front *f);

#endif /* APP_ACCEPT_H */
