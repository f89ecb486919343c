/* server.h - the libmicrohttpd daemon: start on the configured address, and
 * the graceful stop (stop accepting, drain requests in flight, stop). */
#ifndef APP_SERVER_H
#define APP_SERVER_H

#include <stddef.h>

#include "http/request.h"

typedef struct server server;

#define SERVER_ERR_BIND (-2) /* the address cannot be bound (in use, not local): a usage error, exit 2 */

/* Binds and starts serving with cfg->threads pool threads. *port_out gets
 * the bound port (the real one when 0 was asked). 0, or on failure -1 (or
 * SERVER_ERR_BIND) with *out NULL and errbuf saying why. The app must
 * outlive the server. */
int server_start(app *a, server **out, int *port_out, char *errbuf, size_t errlen);
/* Graceful stop: closes the listening socket, waits (up to the configured
 * grace) for requests in flight to finish, then stops every thread. NULL ok. */
void server_stop(server *s);

#endif /* APP_SERVER_H */
