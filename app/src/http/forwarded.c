/* forwarded.c - trusted proxies and the client they name (forwarded.h). */
#include "http/forwarded.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int trusted_cidrs_parse(const char *text, trusted_cidr out[FORWARDED_MAX_CIDRS], size_t *n, char *err,
                        size_t errlen)
{
    *n = 0;
    for (const char *p = text;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        char one[64];
        if (len == 0 || len >= sizeof one) {
            snprintf(err, errlen, "--trusted-proxy: expected CIDR[,CIDR...], got '%s'", text);
            return -1;
        }
        if (*n == FORWARDED_MAX_CIDRS) {
            snprintf(err, errlen, "--trusted-proxy: more than %d networks", FORWARDED_MAX_CIDRS);
            return -1;
        }
        memcpy(one, p, len);
        one[len] = '\0';
        trusted_cidr *c = &out[*n];
        memset(c, 0, sizeof *c);
        char *slash = strchr(one, '/');
        if (slash != NULL)
            *slash = '\0';
        c->family = strchr(one, ':') != NULL ? AF_INET6 : AF_INET;
        unsigned max = c->family == AF_INET6 ? 128 : 32;
        c->prefix = max;
        if (inet_pton(c->family, one, c->addr) != 1) {
            snprintf(err, errlen, "--trusted-proxy: '%s' is not an IPv4 or IPv6 address", one);
            return -1;
        }
        if (slash != NULL) {
            char *end = NULL;
            unsigned long v = strtoul(slash + 1, &end, 10);
            if (slash[1] < '0' || slash[1] > '9' || *end != '\0' || v > max) {
                snprintf(err, errlen, "--trusted-proxy: '%s' has a bad prefix length (0..%u)", slash + 1, max);
                return -1;
            }
            c->prefix = (unsigned)v;
        }
        (*n)++;
        if (comma == NULL)
            return 0;
        p = comma + 1;
    }
}

static int prefix_equal(const unsigned char *a, const unsigned char *b, unsigned bits)
{
    size_t whole = bits / 8;
    if (memcmp(a, b, whole) != 0)
        return 0;
    unsigned rest = bits % 8;
    unsigned char mask = (unsigned char)(0xffu << (8 - rest));
    return rest == 0 || (a[whole] & mask) == (b[whole] & mask);
}

int trusted_cidrs_match(const trusted_cidr *list, size_t n, const struct sockaddr *sa)
{
    unsigned char a[16];
    int fam;
    if (sa->sa_family == AF_INET) {
        fam = AF_INET;
        memcpy(a, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        /* An IPv4-mapped peer of a dual-stack listener is its IPv4 address. */
        fam = IN6_IS_ADDR_V4MAPPED(a6) ? AF_INET : AF_INET6;
        memcpy(a, fam == AF_INET ? a6->s6_addr + 12 : a6->s6_addr, fam == AF_INET ? 4 : 16);
    } else {
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (list[i].family == fam && prefix_equal(a, list[i].addr, list[i].prefix))
            return 1;
    return 0;
}

/* One list entry [p, p+len), blanks trimmed, as an address into out;
 * 0, or -1 when it is not a plain IPv4 or IPv6 address. */
static int parse_entry(const char *p, size_t len, struct sockaddr_storage *out)
{
    char one[INET6_ADDRSTRLEN];
    while (len > 0 && (*p == ' ' || *p == '\t'))
        p++, len--;
    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
        len--;
    if (len == 0 || len >= sizeof one)
        return -1;
    memcpy(one, p, len);
    one[len] = '\0';
    memset(out, 0, sizeof *out);
    struct sockaddr_in *v4 = (struct sockaddr_in *)out;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET, one, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, one, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        return 0;
    }
    return -1;
}

int forwarded_client(const char *const *values, size_t nvalues, const trusted_cidr *list, size_t n,
                     struct sockaddr_storage *out)
{
    /* Right to left over the lines, and over each line's entries. */
    for (size_t v = nvalues; v-- > 0;) {
        const char *s = values[v];
        size_t end = strlen(s);
        while (end > 0) {
            size_t start = end;
            while (start > 0 && s[start - 1] != ',')
                start--;
            struct sockaddr_storage a;
            /* A malformed entry where the client should be: the proxy
             * chain is not what --trusted-proxy says; believe nothing. */
            if (parse_entry(s + start, end - start, &a) != 0)
                return -1;
            if (!trusted_cidrs_match(list, n, (const struct sockaddr *)&a)) {
                *out = a;
                return 0;
            }
            end = start > 0 ? start - 1 : 0;
        }
    }
    return -1;
}
