/* accept.h - the accept front: coupon-server accepts its connections
 * itself, and libmicrohttpd only ever sees whole, screened requests.
 *
 * libmicrohttpd 0.9.75 answers a malformed request with its own HTML page
 * before any callback runs, and holds one of its slots for a connection
 * from its accept, whatever the peer sends or does not send. So one
 * thread (an epoll loop) accepts on the server's listen socket and, for
 * each connection, peeks (MSG_PEEK: the bytes stay in the socket) until
 * the request head and its body are complete, screens them
 * (head_parse.h), and answers anything malformed itself in the contract's
 * JSON. A whole, valid request is read off the socket and relayed: written
 * to the connection's UNIX socketpair, whose other end libmicrohttpd got
 * (MHD_add_connection, with the client's address) at the connection's
 * first request; the answer comes back on it, whole at the end its
 * Content-Length gives (no body for HEAD, 204, 304), and goes out to the
 * client. libmicrohttpd keeps the pair alive but reads only what the front
 * writes: one screened request, the next only after its answer. So every
 * request on a kept-alive connection is screened, not only the first. A
 * pair idle PAIR_IDLE_MS is closed (the next request gets a new one), so
 * libmicrohttpd holds a slot for a client that keeps asking, not for an
 * idle one. Every answer to a socket handed over whole (below) says
 * "Connection: close" (reply.c).
 *
 * What a client controls is bounded while the front holds it:
 *   head      within --header-timeout-s of the accept or the previous
 *             answer (0: only the next);
 *   request   head and body within --request-timeout-s of the same;
 *   body      at least --min-body-rate bytes/s after a 1 s grace;
 *   answer    read by the client within --conn-timeout-s;
 *   slots     at most --max-connections held by the front, at most
 *             --max-connections-per-ip from one address (a new one past
 *             that cap is closed at once); when the front is full, an idle
 *             kept-alive connection is closed to make room, oldest first,
 *             else the oldest waiting connection of the address that holds
 *             the most (the idle and the slow are the old ones, and a
 *             normal client, whose request is whole within milliseconds,
 *             holds one); a connection whose request is being served is
 *             never closed for room.
 * A deadline closes the connection without an answer. A body larger than
 * what the front may peek (FRONT_BODY_PEEK_MAX, only when --max-body-bytes
 * is raised past it) is not relayed: the socket itself is handed over after
 * the head, and libmicrohttpd reads the body under its idle timeout only
 * and closes after its answer (docs/reliability.md). */
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
/* Stops accepting (the listen socket is closed) and closes the connections
 * waiting for a request; the requests with libmicrohttpd are still relayed
 * and their answers sent (each closes its connection). NULL ok. */
void front_quiesce(front *f);
/* Whether answers are still being relayed or sent. NULL: 0. */
int front_busy(front *f);
/* Closes every connection the front still holds, joins the thread. NULL ok. */
void front_stop(front *f);

#endif /* APP_ACCEPT_H */
