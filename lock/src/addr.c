/* addr.c - parsing of node addresses: "host:port", "[v6]:port", "unix:/path". */
#include "dlock_internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/un.h>

int dlock__addr_parse(const char *s, dlock__addr *out, char *err, size_t errlen)
{
    const char *colon, *host, *port_s;
    size_t host_len;
    long port = 0;

    memset(out, 0, sizeof(*out));
    if (s == NULL || s[0] == '\0') {
        snprintf(err, errlen, "empty address");
        return -1;
    }
    if (strlen(s) >= sizeof(out->text)) {
        snprintf(err, errlen, "address too long (%zu bytes)", strlen(s));
        return -1;
    }
    memcpy(out->text, s, strlen(s) + 1);
    if (strncmp(s, "unix:", 5) == 0) {
        const char *path = s + 5;
        struct sockaddr_un sun;
        if (path[0] == '\0') {
            snprintf(err, errlen, "address \"%s\": empty unix socket path", s);
            return -1;
        }
        /* sun_path is fixed-size: a longer path would be truncated by connect. */
        if (strlen(path) >= sizeof(sun.sun_path)) {
            snprintf(err, errlen, "address \"%s\": unix socket path longer than %zu bytes", s,
                     sizeof(sun.sun_path) - 1);
            return -1;
        }
        out->is_unix = 1;
        memcpy(out->host, path, strlen(path) + 1);
        return 0;
    }
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL || close[1] != ':') {
            snprintf(err, errlen, "address \"%s\": expected [ipv6]:port", s);
            return -1;
        }
        host = s + 1;
        host_len = (size_t)(close - host);
        port_s = close + 2;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL) {
            snprintf(err, errlen, "address \"%s\": expected host:port or unix:/path", s);
            return -1;
        }
        host = s;
        host_len = (size_t)(colon - s);
        port_s = colon + 1;
        /* A bare IPv6 address is ambiguous (is the last group the port?). */
        if (memchr(host, ':', host_len) != NULL) {
            snprintf(err, errlen, "address \"%s\": write IPv6 hosts as [addr]:port", s);
            return -1;
        }
    }
    if (host_len == 0 || host_len >= sizeof(out->host)) {
        snprintf(err, errlen, "address \"%s\": bad host", s);
        return -1;
    }
    if (port_s[0] == '\0' || strlen(port_s) > 5) {
        snprintf(err, errlen, "address \"%s\": bad port", s);
        return -1;
    }
    for (const char *p = port_s; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            snprintf(err, errlen, "address \"%s\": bad port", s);
            return -1;
        }
        port = port * 10 + (*p - '0');
    }
    if (port < 1 || port > 65535) {
        snprintf(err, errlen, "address \"%s\": port out of range 1..65535", s);
        return -1;
    }
    memcpy(out->host, host, host_len);
    out->host[host_len] = '\0';
    out->port = (int)port;
    return 0;
}

dlock_err dlock_addr_parse(const char *addr, char *host, size_t hostlen, int *port, char *err, size_t errlen)
{
    dlock__addr parsed;
    char scratch[DLOCK_ERRSTR_LEN];

    /* The caller may not want the reason: parse into our own buffer then. */
    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    if (dlock__addr_parse(addr, &parsed, err, errlen) != 0)
        return DLOCK_ERR_ARG;
    if (host != NULL) {
        if (strlen(parsed.host) >= hostlen) {
            snprintf(err, errlen, "address \"%s\": host longer than the caller's %zu bytes", addr, hostlen);
            return DLOCK_ERR_ARG;
        }
        memcpy(host, parsed.host, strlen(parsed.host) + 1);
    }
    if (port != NULL)
        *port = parsed.is_unix ? 0 : parsed.port;
    return DLOCK_OK;
}

dlock_err dlock_addr_check(const char *addr, char *err, size_t errlen)
{
    return dlock_addr_parse(addr, NULL, 0, NULL, err, errlen);
}
