/* proxy_proto.c - the PROXY protocol's header and the trusted networks
 * (proxy_proto.h). Strict: anything the specification does not allow is
 * PROXY_BAD, never a guess, since the address it yields is believed. */
#include "http/proxy_proto.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char V2_SIG[12] = {'\r', '\n', '\r', '\n', '\0', '\r', '\n', 'Q', 'U', 'I', 'T', '\n'};
static const char V1_SIG[6] = "PROXY ";
#define V1_MAX 107 /* the specification's longest line, CRLF included */

static proxy_status bad(proxy_info *out, const char *why)
{
    out->why = why;
    return PROXY_BAD;
}

static void set_v4(proxy_info *out, const unsigned char addr[4], unsigned port)
{
    struct sockaddr_in *s = (struct sockaddr_in *)&out->src;
    memset(&out->src, 0, sizeof out->src);
    s->sin_family = AF_INET;
    memcpy(&s->sin_addr, addr, 4);
    s->sin_port = htons((uint16_t)port);
    out->srclen = sizeof *s;
}

static void set_v6(proxy_info *out, const unsigned char addr[16], unsigned port)
{
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)&out->src;
    memset(&out->src, 0, sizeof out->src);
    s->sin6_family = AF_INET6;
    memcpy(&s->sin6_addr, addr, 16);
    s->sin6_port = htons((uint16_t)port);
    out->srclen = sizeof *s;
}

static proxy_status parse_v2(const unsigned char *buf, size_t n, proxy_info *out)
{
    if (n < 16)
        return PROXY_INCOMPLETE;
    unsigned ver = buf[12] >> 4, cmd = buf[12] & 0x0f;
    unsigned fam = buf[13] >> 4, proto = buf[13] & 0x0f;
    size_t len = ((size_t)buf[14] << 8) | buf[15];
    if (ver != 2)
        return bad(out, "PROXY v2 header with a version other than 2");
    if (cmd > 1)
        return bad(out, "PROXY v2 header with a command other than LOCAL or PROXY");
    if (fam > 3 || proto > 2)
        return bad(out, "PROXY v2 header with an unknown address family or protocol");
    if (16 + len > PROXY_MAX_HEADER)
        return bad(out, "PROXY v2 header longer than 536 bytes");
    /* The family's addresses must fit in the length it declares (TLVs may follow). */
    size_t need = fam == 1 ? 12 : fam == 2 ? 36 : fam == 3 ? 216 : 0;
    if (len < need)
        return bad(out, "PROXY v2 header too short for its address family");
    if (n < 16 + len)
        return PROXY_INCOMPLETE;
    out->len = 16 + len;
    /* LOCAL (the proxy's own health check), or no address to believe: the
     * connection's own peer stands (the specification says so for both). */
    if (cmd == 0 || fam == 0 || fam == 3) {
        out->local = 1;
        return PROXY_OK;
    }
    /* A TCP connection carries a stream: a datagram address is a lie. */
    if (proto != 1)
        return bad(out, "PROXY v2 header for a protocol other than TCP");
    const unsigned char *a = buf + 16;
    if (fam == 1)
        set_v4(out, a, ((unsigned)a[8] << 8) | a[9]);
    else
        set_v6(out, a, ((unsigned)a[32] << 8) | a[33]);
    return PROXY_OK;
}

/* A decimal port without leading zeros (0 alone is allowed). */
static int v1_port(const char *s, size_t len, unsigned *port)
{
    if (len == 0 || len > 5 || (len > 1 && s[0] == '0'))
        return -1;
    unsigned v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *port = v;
    return 0;
}

static proxy_status parse_v1(const unsigned char *buf, size_t n, proxy_info *out)
{
    size_t lim = n < V1_MAX ? n : V1_MAX, end = 0;
    while (end + 1 < lim && !(buf[end] == '\r' && buf[end + 1] == '\n'))
        end++;
    if (end + 1 >= lim)
        return n < V1_MAX ? PROXY_INCOMPLETE : bad(out, "PROXY v1 line longer than 107 bytes");
    char line[V1_MAX + 1];
    memcpy(line, buf, end);
    line[end] = '\0';
    if (memchr(buf, '\0', end) != NULL)
        return bad(out, "PROXY v1 line with a NUL byte");
    out->len = end + 2;
    /* "PROXY UNKNOWN" may carry anything after it: the peer address stands. */
    if (strncmp(line, "PROXY UNKNOWN", 13) == 0 && (line[13] == '\0' || line[13] == ' ')) {
        out->local = 1;
        return PROXY_OK;
    }
    /* PROXY TCP4|TCP6 SRC DST SPORT DPORT, single spaces. */
    char *f[6];
    size_t nf = 0;
    for (char *p = line; nf < 6;) {
        f[nf++] = p;
        char *sp = strchr(p, ' ');
        if (sp == NULL)
            break;
        *sp = '\0';
        p = sp + 1;
    }
    if (nf != 6 || strchr(f[5], ' ') != NULL)
        return bad(out, "PROXY v1 line without exactly six fields");
    int v6 = strcmp(f[1], "TCP6") == 0;
    if (!v6 && strcmp(f[1], "TCP4") != 0)
        return bad(out, "PROXY v1 line with a protocol other than TCP4, TCP6 or UNKNOWN");
    unsigned char src[16], dst[16];
    unsigned sport, dport;
    if (inet_pton(v6 ? AF_INET6 : AF_INET, f[2], src) != 1 || inet_pton(v6 ? AF_INET6 : AF_INET, f[3], dst) != 1)
        return bad(out, "PROXY v1 line with an address not of its family");
    if (v1_port(f[4], strlen(f[4]), &sport) != 0 || v1_port(f[5], strlen(f[5]), &dport) != 0)
        return bad(out, "PROXY v1 line with a bad port");
    if (v6)
        set_v6(out, src, sport);
    else
        set_v4(out, src, sport);
    return PROXY_OK;
}

proxy_status proxy_parse(const unsigned char *buf, size_t n, proxy_info *out)
{
    memset(out, 0, sizeof *out);
    size_t m2 = n < sizeof V2_SIG ? n : sizeof V2_SIG;
    size_t m1 = n < sizeof V1_SIG ? n : sizeof V1_SIG;
    if (memcmp(buf, V2_SIG, m2) == 0 && n > 0)
        return m2 < sizeof V2_SIG ? PROXY_INCOMPLETE : parse_v2(buf, n, out);
    if (memcmp(buf, V1_SIG, m1) == 0 && n > 0)
        return m1 < sizeof V1_SIG ? PROXY_INCOMPLETE : parse_v1(buf, n, out);
    return n == 0 ? PROXY_INCOMPLETE : PROXY_NONE;
}

int proxy_cidrs_parse(const char *text, proxy_cidr out[PROXY_MAX_CIDRS], size_t *n, char *err, size_t errlen)
{
    *n = 0;
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        char one[64];
        if (len == 0 || len >= sizeof one) {
            snprintf(err, errlen, "--trusted-proxy: expected CIDR[,CIDR...], got '%s'", text);
            return -1;
        }
        if (*n == PROXY_MAX_CIDRS) {
            snprintf(err, errlen, "--trusted-proxy: more than %d networks", PROXY_MAX_CIDRS);
            return -1;
        }
        memcpy(one, p, len);
        one[len] = '\0';
        proxy_cidr *c = &out[*n];
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
    if (rest == 0)
        return 1;
    unsigned char mask = (unsigned char)(0xffu << (8 - rest));
    return (a[whole] & mask) == (b[whole] & mask);
}

int proxy_cidrs_match(const proxy_cidr *list, size_t n, const struct sockaddr *sa)
{
    unsigned char a[16];
    int fam;
    if (sa->sa_family == AF_INET) {
        fam = AF_INET;
        memcpy(a, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        /* An IPv4-mapped peer of a dual-stack listener is its IPv4 address. */
        if (IN6_IS_ADDR_V4MAPPED(a6)) {
            fam = AF_INET;
            memcpy(a, a6->s6_addr + 12, 4);
        } else {
            fam = AF_INET6;
            memcpy(a, a6->s6_addr, 16);
        }
    } else {
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (list[i].family == fam && prefix_equal(a, list[i].addr, list[i].prefix))
            return 1;
    return 0;
}
