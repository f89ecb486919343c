/* proxy_proto.h - the PROXY protocol (HAProxy's, versions 2 and 1) that a
 * trusted proxy in front sends at the start of each connection: who the
 * client is. Pure: bytes in, a verdict out, nothing kept; and the list of
 * trusted networks (--trusted-proxy CIDR[,CIDR...]) the front checks the
 * peer against before it believes one.
 *
 * Reference: https://www.haproxy.org/download/2.8/doc/proxy-protocol.txt */
#ifndef APP_PROXY_PROTO_H
#define APP_PROXY_PROTO_H

#include <stddef.h>
#include <sys/socket.h>

/* The longest header taken: a v1 line is at most 107 bytes, a v2 header
 * 16 + its addresses (216 at most, UNIX) + TLVs; more is refused rather
 * than waited for (the front peeks at most its scratch buffer). */
#define PROXY_MAX_HEADER 536
#define PROXY_MAX_CIDRS 16

typedef enum proxy_status {
    PROXY_INCOMPLETE = 0, /* a prefix of a header: wait for more */
    PROXY_OK = 1,         /* a whole header, out->len bytes */
    PROXY_BAD = 2,        /* a header, but malformed: out->why says how */
    PROXY_NONE = 3        /* the bytes do not start with a PROXY header */
} proxy_status;

typedef struct proxy_info {
    size_t len;   /* PROXY_OK: the header's bytes, to consume before the request */
    int local;    /* PROXY_OK: no client address in it (v2 LOCAL, an UNSPEC or UNIX
                   * family, v1 UNKNOWN): the connection's own peer address stands */
    struct sockaddr_storage src; /* PROXY_OK and !local: the client's address and port */
    socklen_t srclen;
    const char *why; /* PROXY_BAD: a static reason */
} proxy_info;

/* Reads a PROXY header (v2 binary or v1 text) at the start of buf[0..n). */
proxy_status proxy_parse(const unsigned char *buf, size_t n, proxy_info *out);

/* One trusted network: the family's address bytes and a prefix length. */
typedef struct proxy_cidr {
    int family; /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    unsigned prefix;
} proxy_cidr;

/* "CIDR[,CIDR...]" (a bare address is /32 or /128) into out[0..*n), at most
 * PROXY_MAX_CIDRS; 0, or -1 with a one-line reason in err. */
int proxy_cidrs_parse(const char *text, proxy_cidr out[PROXY_MAX_CIDRS], size_t *n, char *err, size_t errlen);
/* 1 when sa (IPv4, IPv6, or IPv4-mapped IPv6) lies in one of list[0..n). */
int proxy_cidrs_match(const proxy_cidr *list, size_t n, const struct sockaddr *sa);

#endif /* APP_PROXY_PROTO_H */
