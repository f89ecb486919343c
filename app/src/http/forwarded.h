/* forwarded.h - who the client is behind a proxy: the --trusted-proxy
 * networks (CIDR[,CIDR...]), and the client address a trusted proxy names
 * in X-Forwarded-For (HAProxy's `option forwardfor` appends the address of
 * the peer it accepted). Pure: no I/O, no allocation (fuzzed alone).
 *
 * The header is believed only from a peer inside a trusted network, and
 * only its entries appended by trusted proxies: read from the right, the
 * first entry that is not itself a trusted proxy is the client. Anything
 * to its left was written by the client and proves nothing. */
#ifndef APP_FORWARDED_H
#define APP_FORWARDED_H

#include <stddef.h>
#include <sys/socket.h>

#define FORWARDED_MAX_CIDRS 16

/* One trusted network: the family's address bytes and a prefix length. */
typedef struct trusted_cidr {
    int family; /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    unsigned prefix;
} trusted_cidr;

/* "CIDR[,CIDR...]" (a bare address is /32 or /128) into out[0..*n), at most
 * FORWARDED_MAX_CIDRS; 0, or -1 with a one-line reason in err. */
int trusted_cidrs_parse(const char *text, trusted_cidr out[FORWARDED_MAX_CIDRS], size_t *n, char *err,
                        size_t errlen);
/* 1 when sa (IPv4, IPv6, or IPv4-mapped IPv6) lies in one of list[0..n). */
int trusted_cidrs_match(const trusted_cidr *list, size_t n, const struct sockaddr *sa);

/* The client named by the X-Forwarded-For values[0..nvalues) (in the order
 * the header lines came; each a comma-separated list of addresses), for a
 * request from a trusted peer. Returns 0 with *out set (port 0), or -1
 * when no entry qualifies (no header, a malformed entry where the client
 * should be, or only trusted proxies); the peer's own address then stands. */
int forwarded_client(const char *const *values, size_t nvalues, const trusted_cidr *list, size_t n,
                     struct sockaddr_storage *out);

#endif /* APP_FORWARDED_H */
