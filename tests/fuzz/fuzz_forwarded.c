/* fuzz_forwarded.c - X-Forwarded-For as a trusted proxy passes it on
 * (app/src/http/forwarded.c): any bytes, split into header lines at each
 * newline, are never read past their end. A client found is a real IPv4
 * or IPv6 address outside the trusted networks (127.0.0.0/8 and ::1 here),
 * written in the input. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "fuzz.h"
#include "http/forwarded.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    trusted_cidr list[FORWARDED_MAX_CIDRS];
    size_t n = 0;
    char err[160];
    FUZZ_CHECK(trusted_cidrs_parse("127.0.0.0/8,::1", list, &n, err, sizeof err) == 0 && n == 2);
    char *buf = malloc(size + 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    const char *lines[8];
    size_t nl = 0;
    for (char *p = buf; nl < 8;) {
        lines[nl++] = p;
        char *e = strchr(p, '\n');
        if (e == NULL)
            break;
        *e = '\0';
        p = e + 1;
    }
    struct sockaddr_storage out;
    if (forwarded_client(lines, nl, list, n, &out) == 0) {
        FUZZ_CHECK(out.ss_family == AF_INET || out.ss_family == AF_INET6);
        FUZZ_CHECK(!trusted_cidrs_match(list, n, (const struct sockaddr *)&out));
        char text[INET6_ADDRSTRLEN];
        const void *a = out.ss_family == AF_INET ? (const void *)&((struct sockaddr_in *)&out)->sin_addr
                                                 : (const void *)&((struct sockaddr_in6 *)&out)->sin6_addr;
        FUZZ_CHECK(inet_ntop(out.ss_family, a, text, sizeof text) != NULL);
    }
    /* The CIDR parser on the same bytes, as an operator might mistype them. */
    (void)trusted_cidrs_parse(lines[0], list, &n, err, sizeof err);
    free(buf);
    return 0;
}
