/* addr.c - parsing of node addresses: "host:port", "[v6]:port", "unix:/path"
 * and "sentinel://host:port[,host:port...]/name" (one node: the master the
 * sentinels name, see sentinel.c). */
#include "dlock_internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#define SENTINEL_SCHEME "sentinel://"

/* One TCP "host:port" or "[v6]:port" (item, NUL-terminated) into host and
 * *port; messages name the whole address (whole). */
static int parse_tcp(const char *item, const char *whole, char *host, size_t hostcap, int *port,
                     char *err, size_t errlen)
{
    const char *colon, *h, *port_s;
    size_t host_len;
    long p = 0;

    if (item[0] == '[') {
        const char *close = strchr(item, ']');
        if (close == NULL || close[1] != ':') {
            snprintf(err, errlen, "address \"%s\": expected [ipv6]:port", whole);
            return -1;
        }
        h = item + 1;
        host_len = (size_t)(close - h);
        port_s = close + 2;
    } else {
        colon = strrchr(item, ':');
        if (colon == NULL) {
            snprintf(err, errlen, "address \"%s\": expected host:port or unix:/path", whole);
            return -1;
        }
        h = item;
        host_len = (size_t)(colon - item);
        port_s = colon + 1;
        /* A bare IPv6 address is ambiguous (is the last group the port?). */
        if (memchr(h, ':', host_len) != NULL) {
            snprintf(err, errlen, "address \"%s\": write IPv6 hosts as [addr]:port", whole);
            return -1;
        }
    }
    if (host_len == 0 || host_len >= hostcap) {
        snprintf(err, errlen, "address \"%s\": bad host", whole);
        return -1;
    }
    if (port_s[0] == '\0' || strlen(port_s) > 5) {
        snprintf(err, errlen, "address \"%s\": bad port", whole);
        return -1;
    }
    for (const char *q = port_s; *q != '\0'; q++) {
        if (*q < '0' || *q > '9') {
            snprintf(err, errlen, "address \"%s\": bad port", whole);
            return -1;
        }
        p = p * 10 + (*q - '0');
    }
    if (p < 1 || p > 65535) {
        snprintf(err, errlen, "address \"%s\": port out of range 1..65535", whole);
        return -1;
    }
    memcpy(host, h, host_len);
    host[host_len] = '\0';
    *port = (int)p;
    return 0;
}

/* "sentinel://" already matched: the comma-separated sentinels up to the
 * last '/', then the master name. The last '/' because a name never holds
 * one and the list never does either (no unix sockets for sentinels). */
static int parse_sentinel(const char *s, dlock__addr *out, char *err, size_t errlen)
{
    const char *list = s + strlen(SENTINEL_SCHEME);
    const char *slash = strrchr(list, '/');
    const char *name, *p;

    if (slash == NULL || slash[1] == '\0') {
        snprintf(err, errlen, "address \"%s\": expected sentinel://host:port[,host:port...]/name",
                 s);
        return -1;
    }
    name = slash + 1;
    if (strlen(name) >= sizeof(out->master_name)) {
        snprintf(err, errlen, "address \"%s\": master name longer than %zu bytes", s,
                 sizeof(out->master_name) - 1);
        return -1;
    }
    for (p = name; *p != '\0'; p++) {
        /* The name goes to SENTINEL as one argument, but a space or a
         * control byte in it is a typo, not a name Sentinel could hold
         * (its config file is split on spaces). */
        if ((unsigned char)*p <= ' ' || *p == 0x7f) {
            snprintf(err, errlen, "address \"%s\": master name has a space or control byte", s);
            return -1;
        }
    }
    if (slash == list) {
        snprintf(err, errlen, "address \"%s\": no sentinel before /%s", s, name);
        return -1;
    }
    for (p = list; p < slash;) {
        const char *comma = memchr(p, ',', (size_t)(slash - p));
        const char *end = comma != NULL ? comma : slash;
        char item[DLOCK__ADDR_TEXT_LEN];
        dlock__hostport *hp;

        if (out->n_sentinels == DLOCK__MAX_SENTINELS) {
            snprintf(err, errlen, "address \"%s\": more than %d sentinels", s,
                     DLOCK__MAX_SENTINELS);
            return -1;
        }
        if (end == p) {
            snprintf(err, errlen, "address \"%s\": empty sentinel in the list", s);
            return -1;
        }
        memcpy(item, p, (size_t)(end - p));
        item[end - p] = '\0';
        hp = &out->sentinels[out->n_sentinels];
        if (parse_tcp(item, s, hp->host, sizeof(hp->host), &hp->port, err, errlen) != 0)
            return -1;
        out->n_sentinels++;
        p = comma != NULL ? comma + 1 : slash;
        if (comma != NULL && p == slash) {
            snprintf(err, errlen, "address \"%s\": empty sentinel in the list", s);
            return -1;
        }
    }
    memcpy(out->master_name, name, strlen(name) + 1);
    out->is_sentinel = 1;
    return 0;
}

int dlock__addr_parse(const char *s, dlock__addr *out, char *err, size_t errlen)
{
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
    if (strncmp(s, SENTINEL_SCHEME, strlen(SENTINEL_SCHEME)) == 0)
        return parse_sentinel(s, out, err, errlen);
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
    return parse_tcp(s, s, out->host, sizeof(out->host), &out->port, err, errlen);
}

dlock_err dlock_addr_parse(const char *addr, char *host, size_t hostlen, int *port, char *err, size_t errlen)
{
    dlock__addr parsed;
    char scratch[DLOCK_ERRSTR_LEN];
    const char *h;

    /* The caller may not want the reason: parse into our own buffer then. */
    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    if (dlock__addr_parse(addr, &parsed, err, errlen) != 0)
        return DLOCK_ERR_ARG;
    /* A sentinel node has no fixed host: its name stands in, port -1. */
    h = parsed.is_sentinel ? parsed.master_name : parsed.host;
    if (host != NULL) {
        if (strlen(h) >= hostlen) {
            snprintf(err, errlen, "address \"%s\": host longer than the caller's %zu bytes", addr, hostlen);
            return DLOCK_ERR_ARG;
        }
        memcpy(host, h, strlen(h) + 1);
    }
    if (port != NULL)
        *port = parsed.is_sentinel ? -1 : parsed.is_unix ? 0 : parsed.port;
    return DLOCK_OK;
}

dlock_err dlock_addr_check(const char *addr, char *err, size_t errlen)
{
    return dlock_addr_parse(addr, NULL, 0, NULL, err, errlen);
}

size_t dlock_addr_span(const char *list)
{
    const char *from = list, *comma;

    if (list == NULL)
        return 0;
    /* A sentinel address's own commas separate its sentinels: it ends at
     * the first comma after the '/' that starts its master name. */
    if (strncmp(list, SENTINEL_SCHEME, strlen(SENTINEL_SCHEME)) == 0) {
        const char *slash = strchr(list + strlen(SENTINEL_SCHEME), '/');
        /* Without its name the rest is its list: one address, which the
         * parse then refuses for the missing name, naming all of it. */
        if (slash == NULL)
            return strlen(list);
        from = slash;
    }
    comma = strchr(from, ',');
    return comma != NULL ? (size_t)(comma - list) : strlen(list);
}
