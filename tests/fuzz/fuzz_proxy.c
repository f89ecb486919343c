/* fuzz_proxy.c - the PROXY protocol header (app/src/http/proxy_proto.c) on
 * any bytes a peer sends, and the --trusted-proxy list parser on any text:
 * never reads past the input, and what it decides is consistent: a header
 * taken lies within the input and PROXY_MAX_HEADER, carries an IPv4 or
 * IPv6 address unless it is LOCAL, and is self-delimiting (the bytes after
 * it do not change it); every prefix of a taken header is incomplete,
 * never refused (a header arriving in pieces); a refusal says why. */
#include <netinet/in.h>
#include <string.h>

#include "fuzz.h"
#include "http/proxy_proto.h"

static void check_header(const unsigned char *buf, size_t n)
{
    proxy_info pi;
    proxy_status st = proxy_parse(buf, n, &pi);
    FUZZ_CHECK(st == PROXY_INCOMPLETE || st == PROXY_OK || st == PROXY_BAD || st == PROXY_NONE);
    if (st == PROXY_BAD)
        FUZZ_CHECK(pi.why != NULL && pi.why[0] != '\0');
    if (st != PROXY_OK)
        return;
    FUZZ_CHECK(pi.len >= 8 && pi.len <= n && pi.len <= PROXY_MAX_HEADER);
    if (!pi.local)
        FUZZ_CHECK((pi.src.ss_family == AF_INET && pi.srclen == sizeof(struct sockaddr_in)) ||
                   (pi.src.ss_family == AF_INET6 && pi.srclen == sizeof(struct sockaddr_in6)));
    /* The header alone reads the same as with what follows it. */
    proxy_info alone;
    FUZZ_CHECK(proxy_parse(buf, pi.len, &alone) == PROXY_OK && alone.len == pi.len && alone.local == pi.local &&
               memcmp(&alone.src, &pi.src, sizeof pi.src) == 0);
    for (size_t cut = 0; cut < pi.len; cut += 3) {
        proxy_info part;
        FUZZ_CHECK(proxy_parse(buf, cut, &part) == PROXY_INCOMPLETE);
    }
}

static void check_cidrs(const uint8_t *data, size_t size)
{
    char text[256];
    size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    proxy_cidr list[PROXY_MAX_CIDRS];
    size_t count = 99;
    char err[160];
    if (proxy_cidrs_parse(text, list, &count, err, sizeof err) != 0) {
        FUZZ_CHECK(memchr(err, '\0', sizeof err) != NULL && err[0] != '\0');
        return;
    }
    FUZZ_CHECK(count >= 1 && count <= PROXY_MAX_CIDRS);
    for (size_t i = 0; i < count; i++) {
        FUZZ_CHECK(list[i].family == AF_INET || list[i].family == AF_INET6);
        FUZZ_CHECK(list[i].prefix <= (list[i].family == AF_INET ? 32u : 128u));
        /* A network's own address lies in it. */
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof ss);
        if (list[i].family == AF_INET) {
            struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
            s4->sin_family = AF_INET;
            memcpy(&s4->sin_addr, list[i].addr, 4);
        } else {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
            s6->sin6_family = AF_INET6;
            memcpy(&s6->sin6_addr, list[i].addr, 16);
        }
        FUZZ_CHECK(proxy_cidrs_match(list, count, (struct sockaddr *)&ss) == 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy: ASan catches any read one past the input. */
    unsigned char *buf = malloc(size > 0 ? size : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    check_header(buf, size);
    free(buf);
    check_cidrs(data, size);
    return 0;
}
