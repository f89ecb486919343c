/* peer.c - the trusted proxies, the client behind them and the per-client
 * key (peer.h). */
#include "http/peer.h"

#include <netinet/in.h>
#include <string.h>
#include <strings.h>

#include "http/forwarded.h"

/* Written once by peer_trust before any connection, then only read. */
static trusted_cidr trusted[FORWARDED_MAX_CIDRS];
static size_t n_trusted;

int peer_trust(const char *cidrs, char *err, size_t errlen)
{
    return cidrs == NULL ? 0 : trusted_cidrs_parse(cidrs, trusted, &n_trusted, err, errlen);
}

int peer_is_trusted(const struct sockaddr *sa)
{
    return sa != NULL && n_trusted > 0 && trusted_cidrs_match(trusted, n_trusted, sa);
}

typedef struct xff_values {
    const char *v[16]; /* more lines than this: the last 16 count (the right end) */
    size_t n;
} xff_values;

static enum MHD_Result collect_xff(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    xff_values *x = cls;
    (void)kind;
    if (key == NULL || value == NULL || strcasecmp(key, "X-Forwarded-For") != 0)
        return MHD_YES;
    if (x->n == sizeof x->v / sizeof x->v[0]) {
        memmove(x->v, x->v + 1, sizeof x->v - sizeof x->v[0]);
        x->n--;
    }
    x->v[x->n++] = value;
    return MHD_YES;
}

const struct sockaddr *peer_client(struct MHD_Connection *conn, struct sockaddr_storage *buf)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *peer = ci != NULL ? ci->client_addr : NULL;
    xff_values x = {.n = 0};
    if (!peer_is_trusted(peer))
        return peer;
    (void)MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_xff, &x);
    return forwarded_client(x.v, x.n, trusted, n_trusted, buf) == 0 ? (const struct sockaddr *)buf : peer;
}

int peer_key(const struct sockaddr *sa, unsigned char key[PEER_KEY_LEN])
{
    memset(key, 0, PEER_KEY_LEN);
    if (sa == NULL)
        return -1;
    if (sa->sa_family == AF_INET) {
        key[0] = 4;
        memcpy(key + 1, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family != AF_INET6)
        return -1;
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a6)) {
        key[0] = 4;
        memcpy(key + 1, a6->s6_addr + 12, 4);
    } else {
        key[0] = 6;
        memcpy(key + 1, a6->s6_addr, 8);
    }
    return 0;
}
