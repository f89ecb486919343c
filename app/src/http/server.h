/* server.h - the libmicrohttpd daemon: start on the configured address, and
 * the graceful stop (stop accepting, drain requests in flight, stop). */
#ifndef APP_SERVER_H
#define APP_SERVER_H

#include <stddef.h>

#include "http/request.h"

typedef struct server server;

/* Binds and starts serving with cfg->threads pool threads. *port_out gets
 * the bound port (the real one when 0 was asked). On failure *out is NULL
 * and errbuf says why. The app must outlive the server. */
int server_start(app *a, server **out, int *port_out, char *errbuf, size_t errlen);
/* Graceful stop: closes the listening socket, waits (up to the configured
 * grace) for requests in flight to finish, then stops every thread. NULL ok. */
void server_stop(server *s);

#endif /* APP_SERVER_H */
