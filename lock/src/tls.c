/* tls.c - TLS for libdlock's connections: the client's SSL context, made
 * once from the options, and TLS started on a connected hiredis context
 * (round connections, blocking ones, the async client's). hiredis_ssl
 * carries the bytes; the handshake is driven here, so that a non-blocking
 * one never blocks, and every failure says what it was: unknown CA, name
 * mismatch, a plaintext port, a refused client certificate. */
#include "dlock_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DLOCK_HAVE_TLS

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>

#include <hiredis/hiredis_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#if OPENSSL_VERSION_NUMBER < 0x10100000L
#error "libdlock's TLS needs OpenSSL 1.1.0 or newer (it initialises itself)"
#endif

struct dlock__tls {
    SSL_CTX *ctx;
    char *server_name; /* owned, or NULL: each connection's own host */
    int insecure;
};

int dlock__tls_built(void)
{
    return 1;
}

/* OpenSSL's reason for the last error of this thread, or fallback. */
static const char *ossl_reason(const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;

    return r != NULL ? r : fallback;
}

static int set(const char *s)
{
    return s != NULL && s[0] != '\0';
}

int dlock__tls_new(const dlock_options *o, dlock__tls **out, char *err, size_t errlen)
{
    dlock__tls *t;

    *out = NULL;
    if (set(o->tls_cert_file) != set(o->tls_key_file)) {
        snprintf(err, errlen, "TLS: tls_cert_file and tls_key_file go together (got only %s)",
                 set(o->tls_cert_file) ? "the certificate" : "the key");
        return -1;
    }
    t = calloc(1, sizeof(*t));
    if (t == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    t->insecure = o->tls_insecure_skip_verify != 0;
    if (set(o->tls_server_name) && (t->server_name = strdup(o->tls_server_name)) == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    ERR_clear_error();
    t->ctx = SSL_CTX_new(TLS_client_method());
    if (t->ctx == NULL) {
        snprintf(err, errlen, "TLS: cannot make an SSL context: %s", ossl_reason("unknown"));
        goto fail;
    }
    /* TLS 1.2 is the oldest Redis accepts by default; older ones are broken. */
    if (SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION) != 1) {
        snprintf(err, errlen, "TLS: cannot require TLS 1.2: %s", ossl_reason("unknown"));
        goto fail;
    }
    /* hiredis retries a write with the same bytes from a buffer that may
     * have moved (sds grows by realloc). */
    SSL_CTX_set_mode(t->ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (set(o->tls_ca_file) || set(o->tls_ca_dir)) {
        if (SSL_CTX_load_verify_locations(t->ctx, set(o->tls_ca_file) ? o->tls_ca_file : NULL,
                                          set(o->tls_ca_dir) ? o->tls_ca_dir : NULL) != 1) {
            snprintf(err, errlen, "TLS: cannot load the CAs of %s%s%s: %s",
                     set(o->tls_ca_file) ? o->tls_ca_file : "",
                     set(o->tls_ca_file) && set(o->tls_ca_dir) ? " and " : "",
                     set(o->tls_ca_dir) ? o->tls_ca_dir : "", ossl_reason("unreadable"));
            goto fail;
        }
    } else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
        snprintf(err, errlen, "TLS: cannot load the system's CAs: %s", ossl_reason("unknown"));
        goto fail;
    }
    if (set(o->tls_cert_file)) {
        if (SSL_CTX_use_certificate_chain_file(t->ctx, o->tls_cert_file) != 1) {
            snprintf(err, errlen, "TLS: cannot load the client certificate %s: %s",
                     o->tls_cert_file, ossl_reason("unreadable"));
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(t->ctx, o->tls_key_file, SSL_FILETYPE_PEM) != 1) {
            snprintf(err, errlen, "TLS: cannot load the client key %s: %s", o->tls_key_file,
                     ossl_reason("unreadable"));
            goto fail;
        }
        if (SSL_CTX_check_private_key(t->ctx) != 1) {
            snprintf(err, errlen, "TLS: the key %s does not match the certificate %s",
                     o->tls_key_file, o->tls_cert_file);
            goto fail;
        }
    }
    SSL_CTX_set_verify(t->ctx, t->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    *out = t;
    return 0;
fail:
    dlock__tls_free(t);
    return -1;
}

void dlock__tls_free(dlock__tls *t)
{
    if (t == NULL)
        return;
    if (t->ctx != NULL)
        SSL_CTX_free(t->ctx);
    free(t->server_name);
    free(t);
}

/* Why a handshake step failed (rv its SSL_get_error code), into detail. */
static void describe(SSL *ssl, int rv, int saved_errno, char *detail)
{
    long v = SSL_get_verify_result(ssl);
    unsigned long e = ERR_peek_last_error();

    if (v != X509_V_OK && rv == SSL_ERROR_SSL) {
        const char *hint = "";

        switch (v) {
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
        case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
            hint = " (unknown CA: give the server's CA with tls_ca_file)";
            break;
        case X509_V_ERR_HOSTNAME_MISMATCH:
        case X509_V_ERR_IP_ADDRESS_MISMATCH:
            hint = " (name mismatch: the certificate is not for this host; see tls_server_name)";
            break;
        default:
            break;
        }
        dlock__detailf(detail, "TLS handshake: certificate verify failed: %s%s",
                       X509_verify_cert_error_string(v), hint);
    } else if (rv == SSL_ERROR_SSL && e != 0) {
        const char *r = ERR_reason_error_string(e);

        /* A plaintext Redis answers a ClientHello with an error line, which
         * OpenSSL reads as a record of an unknown version. */
        dlock__detailf(detail, "TLS handshake: %s%s", r != NULL ? r : "failed",
                       ERR_GET_REASON(e) == SSL_R_WRONG_VERSION_NUMBER
                           ? " (not a TLS port? plaintext nodes are redis://)"
                           : "");
    } else if (rv == SSL_ERROR_ZERO_RETURN || (rv == SSL_ERROR_SYSCALL && saved_errno == 0)) {
        dlock__detailf(detail, "TLS handshake: the server closed the connection");
    } else if (rv == SSL_ERROR_SYSCALL) {
        dlock__detailf(detail, "TLS handshake: %s", strerror(saved_errno));
    } else {
        dlock__detailf(detail, "TLS handshake failed (OpenSSL error %d)", rv);
    }
}

/* ---- better errors on an established connection ----
 * hiredis_ssl says only strerror(errno) when a read or write fails. After
 * a TLS alert it is "Success" or the like: a server that refused our
 * client certificate (TLS 1.3 says so after the handshake, on the first
 * read) would read as nothing. The connection's function table is
 * replaced by a copy whose read and write call hiredis's and then put
 * OpenSSL's reason into errstr. One copy for the process: every TLS
 * context of this hiredis has the same table. */
static pthread_mutex_t funcs_mu = PTHREAD_MUTEX_INITIALIZER;
static const redisContextFuncs *ssl_funcs; /* hiredis's own, once seen */
static redisContextFuncs wrapped_funcs;

static void reason_into(redisContext *c)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;

    /* EOF too: OpenSSL may end a read at a fatal alert with 0, which
     * hiredis takes for the server closing the connection. */
    if ((c->err == REDIS_ERR_IO || c->err == REDIS_ERR_EOF) && r != NULL) {
        snprintf(c->errstr, sizeof(c->errstr), "TLS: %s%s", r,
                 strstr(r, "certificate required") != NULL
                     ? " (the server wants a client certificate: tls_cert_file)"
                     : "");
    }
}

static ssize_t wrapped_read(redisContext *c, char *buf, size_t cap)
{
    ssize_t n;

    ERR_clear_error();
    n = ssl_funcs->read(c, buf, cap);
    if (n < 0)
        reason_into(c);
    return n;
}

static ssize_t wrapped_write(redisContext *c)
{
    ssize_t n;

    ERR_clear_error();
    n = ssl_funcs->write(c);
    if (n < 0)
        reason_into(c);
    return n;
}

static void wrap_funcs(redisContext *ctx)
{
    pthread_mutex_lock(&funcs_mu);
    if (ssl_funcs == NULL) {
        ssl_funcs = ctx->funcs;
        wrapped_funcs = *ctx->funcs;
        wrapped_funcs.read = wrapped_read;
        wrapped_funcs.write = wrapped_write;
    }
    /* Only a table we know: another would not be hiredis_ssl's. */
    if (ctx->funcs == ssl_funcs)
        ctx->funcs = &wrapped_funcs;
    pthread_mutex_unlock(&funcs_mu);
}

/* Whether s is an IP address (checked as one, and never sent as SNI,
 * which RFC 6066 reserves for host names). */
static int is_ip(const char *s)
{
    unsigned char buf[sizeof(struct in6_addr)];

    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

int dlock__tls_start(const dlock__tls *t, redisContext *ctx, const char *host,
                     struct ssl_st **ssl_out, char *detail)
{
    const char *name = t->server_name != NULL ? t->server_name : host;
    SSL *ssl;
    int ip = is_ip(name);

    if (ssl_out != NULL)
        *ssl_out = NULL;
    ERR_clear_error();
    ssl = SSL_new(t->ctx);
    if (ssl == NULL) {
        dlock__detailf(detail, "TLS: cannot start: %s", ossl_reason("out of memory"));
        return -1;
    }
    if ((!ip && SSL_set_tlsext_host_name(ssl, name) != 1) ||
        (!t->insecure &&
         (ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name)
             : SSL_set1_host(ssl, name)) != 1)) {
        dlock__detailf(detail, "TLS: cannot check for the name '%.60s': %s", name,
                       ossl_reason("bad name"));
        SSL_free(ssl);
        return -1;
    }
    errno = 0;
    if (redisInitiateSSL(ctx, ssl) != REDIS_OK) {
        /* hiredis took no ownership: its first step failed (a blocking
         * context's whole handshake). Why, from the SSL state. */
        int saved = errno;
        describe(ssl, SSL_get_error(ssl, -1), saved, detail);
        SSL_free(ssl);
        return -1;
    }
    wrap_funcs(ctx);
    if (ssl_out != NULL)
        *ssl_out = ssl;
    return 0;
}

int dlock__tls_step(struct ssl_st *ssl, short *events, char *detail)
{
    int rv, e;

    ERR_clear_error();
    errno = 0;
    rv = SSL_do_handshake(ssl);
    if (rv == 1)
        return 1;
    e = SSL_get_error(ssl, rv);
    if (e == SSL_ERROR_WANT_READ) {
        *events = POLLIN;
        return 0;
    }
    if (e == SSL_ERROR_WANT_WRITE) {
        *events = POLLOUT;
        return 0;
    }
    describe(ssl, e, errno, detail);
    return -1;
}

#else /* !DLOCK_HAVE_TLS */

/* A build without TLS (the system's hiredis 0.14, chosen): every TLS node
 * is refused by dlock_client_new through dlock__tls_new, so the rest is
 * never reached. */
struct dlock__tls {
    int unused;
};

int dlock__tls_built(void)
{
    return 0;
}

int dlock__tls_new(const dlock_options *o, dlock__tls **out, char *err, size_t errlen)
{
    (void)o;
    *out = NULL;
    snprintf(err, errlen, "TLS (rediss:// or tls) is not in this build of libdlock: it was "
             "built with a hiredis without TLS; rebuild with -DDLOCK_HIREDIS=bundled (or "
             "auto, with a system hiredis >= 1.0 and hiredis_ssl) and OpenSSL (libssl-dev)");
    return -1;
}

void dlock__tls_free(dlock__tls *t)
{
    free(t);
}

int dlock__tls_start(const dlock__tls *t, redisContext *ctx, const char *host,
                     struct ssl_st **ssl_out, char *detail)
{
    (void)t;
    (void)ctx;
    (void)host;
    if (ssl_out != NULL)
        *ssl_out = NULL;
    dlock__detailf(detail, "TLS is not in this build of libdlock");
    return -1;
}

int dlock__tls_step(struct ssl_st *ssl, short *events, char *detail)
{
    (void)ssl;
    (void)events;
    dlock__detailf(detail, "TLS is not in this build of libdlock");
    return -1;
}

#endif /* DLOCK_HAVE_TLS */
