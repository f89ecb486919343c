/* addr.c - parsing of node addresses: "host[:port]", "[v6][:port]",
 * "redis://[[user]:password@]host[:port][/0]" (rediss:// the same over
 * TLS), "unix:/path" and
 * "sentinel://host:port[,host:port...]/name" (one node: the master the
 * sentinels name, see sentinel.c). */
#include "dlock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>

#define SENTINEL_SCHEME "sentinel://"
#define REDIS_SCHEME "redis://"
#define REDISS_SCHEME "rediss://" /* TLS (tls.c) */
/* Redis's own default port: "localhost" means "localhost:6379", as it does
 * to redis-cli and every client library. */
#define REDIS_DEFAULT_PORT 6379

/* One TCP "host[:port]" or "[v6][:port]" (item, NUL-terminated) into host
 * and *port (defport when none is written); messages name the whole
 * address (whole). */
static int parse_tcp(const char *item, const char *whole, int defport, char *host,
                     size_t hostcap, int *port, char *err, size_t errlen)
{
    const char *colon, *h, *port_s;
    size_t host_len;
    long p = 0;

    if (item[0] == '[') {
        const char *close = strchr(item, ']');
        if (close == NULL) {
            snprintf(err, errlen, "address \"%s\": expected [ipv6] or [ipv6]:port", whole);
            return -1;
        }
        h = item + 1;
        host_len = (size_t)(close - h);
        port_s = close + 2;
        if (close[1] == '\0') {
            port_s = NULL; /* "[v6]": the default port */
        } else if (close[1] != ':') {
            snprintf(err, errlen, "address \"%s\": expected [ipv6] or [ipv6]:port", whole);
            return -1;
        }
    } else {
        colon = strchr(item, ':');
        h = item;
        host_len = colon != NULL ? (size_t)(colon - item) : strlen(item);
        port_s = colon != NULL ? colon + 1 : NULL;
        /* A bare IPv6 address is ambiguous (is the last group the port?);
         * two colons around anything else are no address at all, most
         * likely a misspelt URL ("redis:/h:6379"). */
        if (colon != NULL && strchr(colon + 1, ':') != NULL) {
            if (strspn(item, "0123456789abcdefABCDEF:.") == strlen(item))
                snprintf(err, errlen, "address \"%s\": write IPv6 hosts as [addr] or [addr]:port", whole);
            else
                snprintf(err, errlen, "address \"%s\": not host:port (a URL is written redis://host:port)",
                         whole);
            return -1;
        }
    }
    if (host_len == 0 || host_len >= hostcap) {
        snprintf(err, errlen, "address \"%s\": bad host (%s)", whole,
                 host_len == 0 ? "none given" : "too long");
        return -1;
    }
    /* What a host can hold: a name's letters, digits, '-', '.', '_'; an
     * IPv6 literal's hex digits, ':' and '.', and a zone after '%'. Any
     * other byte is a typo, refused here rather than at connect. */
    const char *allowed = item[0] == '[' ? "0123456789abcdefABCDEF:.%" : "-._";
    int zone = 0;
    for (size_t k = 0; k < host_len; k++) {
        unsigned char ch = (unsigned char)h[k];
        zone |= item[0] == '[' && ch == '%';
        if ((ch < 0x80 && strchr(allowed, ch) != NULL && ch != '\0') ||
            ((item[0] != '[' || zone) && ((ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z'))))
            continue;
        if (ch > ' ' && ch < 0x7f)
            snprintf(err, errlen, "address \"%s\": bad character '%c' in host", whole, ch);
        else
            snprintf(err, errlen, "address \"%s\": bad character (byte 0x%02x) in host", whole, ch);
        return -1;
    }
    if (port_s == NULL) {
        memcpy(host, h, host_len);
        host[host_len] = '\0';
        *port = defport;
        return 0;
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
        /* A sentinel's own default port, as in redis-cli and sentinel.conf. */
        if (parse_tcp(item, s, 26379, hp->host, sizeof(hp->host), &hp->port, err, errlen) != 0)
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

/* %XX escapes of a URL's user-info part, from [from, to) into out[cap].
 * 0, or -1 on a bad escape, a NUL byte or an overlong result. */
static int unescape(const char *from, const char *to, char *out, size_t cap)
{
    size_t n = 0;

    for (const char *p = from; p < to; p++) {
        unsigned v = (unsigned char)*p;

        if (*p == '%') {
            char hex[3];
            char *end;

            if (to - p < 3)
                return -1;
            hex[0] = p[1];
            hex[1] = p[2];
            hex[2] = '\0';
            v = (unsigned)strtoul(hex, &end, 16);
            if (end != hex + 2 || v == 0)
                return -1;
            p += 2;
        }
        if (n + 1 >= cap)
            return -1;
        out[n++] = (char)v;
    }
    out[n] = '\0';
    return 0;
}

/* "redis://" already matched: [[user]:password@]host[:port][/0]. The text
 * kept for messages hides the password (out->text). */
static int parse_url(const char *s, dlock__addr *out, char *err, size_t errlen)
{
    /* rediss:// is the same URL over TLS: one letter longer. */
    const char *scheme = out->tls ? REDISS_SCHEME : REDIS_SCHEME;
    const char *rest = s + strlen(scheme);
    /* The last '@': a host never holds one, a password may (unescaped). */
    const char *at = strrchr(rest, '@');
    const char *hp = at != NULL ? at + 1 : rest;
    const char *end = hp + strcspn(hp, "/?#");
    char item[DLOCK__ADDR_TEXT_LEN];

    if (at != NULL) {
        const char *colon = memchr(rest, ':', (size_t)(at - rest));

        snprintf(out->text, sizeof(out->text), "%s%.*s***@%s", scheme,
                 colon != NULL ? (int)(colon - rest + 1) : 0, rest, hp);
        if (colon == NULL) {
            snprintf(err, errlen, "address \"%s\": a user without a password; write "
                     "redis://user:password@host or redis://:password@host", out->text);
            return -1;
        }
        if (unescape(rest, colon, out->user, sizeof(out->user)) != 0 ||
            unescape(colon + 1, at, out->password, sizeof(out->password)) != 0) {
            snprintf(err, errlen, "address \"%s\": bad %%XX escape, or user (%zu) or password "
                     "(%zu bytes) too long", out->text, sizeof(out->user) - 1,
                     sizeof(out->password) - 1);
            return -1;
        }
        if (out->password[0] == '\0') {
            snprintf(err, errlen, "address \"%s\": empty password", out->text);
            return -1;
        }
        out->has_auth = 1;
    }
    if (*end == '?' || *end == '#' || (*end == '/' && strcmp(end, "/") != 0 && strcmp(end, "/0") != 0)) {
        /* Locks live in database 0 on every node (SELECT is never sent);
         * silently ignoring "/3" would put them where the user did not look. */
        snprintf(err, errlen, "address \"%s\": only redis[s]://host[:port] with an optional /0 is "
                 "taken (libdlock uses database 0, and no URL options)", out->text);
        return -1;
    }
    if ((size_t)(end - hp) >= sizeof(item)) {
        snprintf(err, errlen, "address \"%s\": too long", out->text);
        return -1;
    }
    memcpy(item, hp, (size_t)(end - hp));
    item[end - hp] = '\0';
    return parse_tcp(item, out->text, REDIS_DEFAULT_PORT, out->host, sizeof(out->host),
                     &out->port, err, errlen);
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
    /* Schemes are case-insensitive (RFC 3986): REDIS:// is redis://. */
    if (strncasecmp(s, SENTINEL_SCHEME, strlen(SENTINEL_SCHEME)) == 0)
        return parse_sentinel(s, out, err, errlen);
    if (strncasecmp(s, REDIS_SCHEME, strlen(REDIS_SCHEME)) == 0)
        return parse_url(s, out, err, errlen);
    if (strncasecmp(s, REDISS_SCHEME, strlen(REDISS_SCHEME)) == 0) {
        out->tls = 1;
        if (parse_url(s, out, err, errlen) != 0)
            return -1;
        /* Well-formed, but this build cannot speak it: say how to build. */
        if (!dlock__tls_built()) {
            snprintf(err, errlen, "address \"%s\": TLS is not in this build of libdlock (its "
                     "hiredis has no TLS); rebuild with -DDLOCK_HIREDIS=bundled, or auto with a "
                     "system hiredis >= 1.0 with hiredis_ssl (docs/building.md)", out->text);
            return -1;
        }
        return 0;
    }
    /* A list given as one address ("h1:p1,h2:p2") is several nodes in one
     * entry: say so, rather than whatever its second colon makes of it. */
    if (strchr(s, ',') != NULL) {
        snprintf(err, errlen, "address \"%s\": a comma-separated list in one entry; give one "
                 "address per entry (dlock_addr_span splits a list)", s);
        return -1;
    }
    if (strstr(s, "://") != NULL) {
        /* Not a host: a URL of a scheme we do not speak. The text may
         * hold a password: not repeated. */
        snprintf(err, errlen, "address \"%.*s...\": %s", (int)(strstr(s, "://") - s + 3), s,
                 "unknown scheme; use host[:port], redis://, rediss://, unix: or sentinel://");
        return -1;
    }
    if (strncasecmp(s, "unix:", 5) == 0) {
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
    return parse_tcp(s, s, REDIS_DEFAULT_PORT, out->host, sizeof(out->host), &out->port, err,
                     errlen);
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

dlock_err dlock_addr_credentials(const char *addr, char *user, size_t userlen, char *password,
                                 size_t passlen, char *err, size_t errlen)
{
    dlock__addr parsed;
    char scratch[DLOCK_ERRSTR_LEN];
    dlock_err rc = DLOCK_ERR_ARG;

    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    if (user != NULL && userlen > 0)
        user[0] = '\0';
    if (password != NULL && passlen > 0)
        password[0] = '\0';
    if (user == NULL || password == NULL || userlen == 0 || passlen == 0) {
        snprintf(err, errlen, "user and password buffers are required");
        goto out;
    }
    if (dlock__addr_parse(addr, &parsed, err, errlen) != 0)
        goto out;
    if (strlen(parsed.user) >= userlen || strlen(parsed.password) >= passlen) {
        snprintf(err, errlen, "address \"%s\": credentials longer than the caller's buffers",
                 parsed.text);
        goto out;
    }
    memcpy(user, parsed.user, strlen(parsed.user) + 1);
    memcpy(password, parsed.password, strlen(parsed.password) + 1);
    rc = DLOCK_OK;
out:
    /* The parse copied the password to the stack: leave no copy behind. */
    memset(&parsed, 0, sizeof(parsed));
    return rc;
}

const char *dlock_addr_shown(const char *addr, char *out, size_t outlen)
{
    dlock__addr parsed;
    char why[DLOCK_ERRSTR_LEN];

    if (out == NULL || outlen == 0)
        return "";
    /* A bad address is shown as nothing of it: it may hold a password the
     * parse could not find. */
    if (dlock__addr_parse(addr, &parsed, why, sizeof(why)) != 0)
        snprintf(out, outlen, "(bad address)");
    else
        snprintf(out, outlen, "%s", parsed.text);
    memset(&parsed, 0, sizeof(parsed));
    return out;
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
    if (strncasecmp(list, SENTINEL_SCHEME, strlen(SENTINEL_SCHEME)) == 0) {
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
