/* peer.h - who a connection's client is: the --trusted-proxy networks (set
 * once at start), the client a trusted proxy names in X-Forwarded-For, and
 * the key every per-client limit counts by (the connection cap,
 * conn_cap.h; the admin back-off, admin_guard.h). The key is an IPv4
 * address whole, or an IPv6 address by its /64. One host is handed a whole
 * /64 (SLAAC, most providers) and could otherwise pose as 2^64 clients. */
#ifndef APP_PEER_H
#define APP_PEER_H

#include <stddef.h>
#include <sys/socket.h>

#include <microhttpd.h>

/* The family byte, then 4 (IPv4) or 8 (an IPv6 /64) address bytes, zero-padded. */
#define PEER_KEY_LEN 9

/* --trusted-proxy "CIDR[,CIDR...]" (NULL: none): 0, or -1 with a one-line
 * reason in err. Called once, before the server starts. */
int peer_trust(const char *cidrs, char *err, size_t errlen);
/* 1 when sa lies in a --trusted-proxy network. */
int peer_is_trusted(const struct sockaddr *sa);
/* The client of conn: its peer, or, from a trusted peer, the client that
 * X-Forwarded-For names (forwarded.h), written to *buf. NULL if unknown. */
const struct sockaddr *peer_client(struct MHD_Connection *conn, struct sockaddr_storage *buf);
/* sa's key; 0, or -1 (key all zero) for a family other than IPv4 and IPv6.
 * An IPv4-mapped IPv6 address is its IPv4 address: a dual-stack listener
 * must not give one client two keys. */
int peer_key(const struct sockaddr *sa, unsigned char key[PEER_KEY_LEN]);

#endif /* APP_PEER_H */
