/* conn_cap.h - the per-client connection cap (--max-connections-per-ip),
 * kept by the connection notifications (conn_watch.c) instead of
 * libmicrohttpd's own per-IP limit, for two reasons. First, a client is
 * counted by peer.h's key (an IPv6 client by its /64, where libmicrohttpd
 * counts every address apart). Second, a --trusted-proxy peer is not
 * capped at all, since every client behind it shares its address. The
 * proxy bounds each of them by the address it knows (docs/deployment.md);
 * a cap on the proxy itself would refuse its health checks along with its
 * clients.
 *
 * Thread-safe: one mutex over a table allocated once at start. */
#ifndef APP_CONN_CAP_H
#define APP_CONN_CAP_H

#include <stddef.h>
#include <sys/socket.h>

#include "http/peer.h"

/* per_client 0: no cap. max_connections bounds the clients counted at once
 * (the table's size). 0, or -1 with errbuf set. */
int conn_cap_start(unsigned per_client, unsigned max_connections, char *errbuf, size_t errlen);
void conn_cap_stop(void);
/* A connection from peer starts. Returns:
 *    1 when it was counted under key (give it back with conn_cap_leave at
 *      its close);
 *    0 when it is not counted (no cap, a trusted proxy, an unknown family);
 *   -1 when its client is at the cap: nothing counted, the caller closes
 *      it. */
int conn_cap_enter(const struct sockaddr *peer, unsigned char key[PEER_KEY_LEN]);
void conn_cap_leave(const unsigned char key[PEER_KEY_LEN]);
/* Connections refused since the last call (for the sweeper's log line). */
unsigned conn_cap_refused_take(void);

#endif /* APP_CONN_CAP_H */
