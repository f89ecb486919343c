/* tls.c - dlockctl's TLS: the nodes verified as libdlock verifies them
 * (the certificate against the CAs, the node's host name or IP in it, SNI
 * for a name), on blocking connections bounded by --timeout-ms. Built on
 * the hiredis libdlock was built with (hiredis_ssl); without it, refused. */
#include "ctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DLOCK_HAVE_TLS

#include <arpa/inet.h>
#include <errno.h>
#include <hiredis/hiredis_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

static const char *reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;

    return r != NULL ? r : "unknown error";
}

int ctl_tls_new(const ctl_opts *o, void **out, char *err, size_t errlen)
{
    SSL_CTX *ctx;

    *out = NULL;
    if ((o->tls_cert != NULL) != (o->tls_key != NULL)) {
        snprintf(err, errlen, "--tls-cert and --tls-key go together");
        return -1;
    }
    ERR_clear_error();
    ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        snprintf(err, errlen, "TLS: %s", reason());
        return -1;
    }
    SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
        (o->tls_ca != NULL ? SSL_CTX_load_verify_locations(ctx, o->tls_ca, NULL)
                           : SSL_CTX_set_default_verify_paths(ctx)) != 1) {
        snprintf(err, errlen, "--tls-ca %s: %s", o->tls_ca != NULL ? o->tls_ca : "(system CAs)",
                 reason());
        SSL_CTX_free(ctx);
        return -1;
    }
    if (o->tls_cert != NULL &&
        (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert) != 1 ||
         SSL_CTX_use_PrivateKey_file(ctx, o->tls_key, SSL_FILETYPE_PEM) != 1 ||
         SSL_CTX_check_private_key(ctx) != 1)) {
        snprintf(err, errlen, "--tls-cert %s / --tls-key %s: %s", o->tls_cert, o->tls_key,
                 reason());
        SSL_CTX_free(ctx);
        return -1;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    *out = ctx;
    return 0;
}

void ctl_tls_free(void *tls)
{
    if (tls != NULL)
        SSL_CTX_free(tls);
}

int ctl_tls_start(void *tls, redisContext *ctx, const char *host, char *err, size_t errlen)
{
    unsigned char ip[sizeof(struct in6_addr)];
    int is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
    SSL *ssl;
    long v;

    ERR_clear_error();
    ssl = SSL_new(tls);
    if (ssl == NULL) {
        snprintf(err, errlen, "TLS: %s", reason());
        return -1;
    }
    /* SNI is for names only (RFC 6066); the check is for either. */
    if ((!is_ip && SSL_set_tlsext_host_name(ssl, host) != 1) ||
        (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
               : SSL_set1_host(ssl, host)) != 1) {
        snprintf(err, errlen, "TLS: cannot check for '%s': %s", host, reason());
        SSL_free(ssl);
        return -1;
    }
    if (redisInitiateSSL(ctx, ssl) == REDIS_OK)
        return 0; /* ctx owns ssl now */
    v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK)
        snprintf(err, errlen, "TLS handshake: certificate verify failed: %s",
                 X509_verify_cert_error_string(v));
    else
        snprintf(err, errlen, "TLS handshake: %s", ctx->errstr);
    SSL_free(ssl); /* not taken by hiredis on failure */
    return -1;
}

#else /* !DLOCK_HAVE_TLS */

int ctl_tls_new(const ctl_opts *o, void **out, char *err, size_t errlen)
{
    (void)o;
    *out = NULL;
    snprintf(err, errlen, "TLS (rediss:// or --tls-*) is not in this build: libdlock's hiredis "
             "has no TLS; rebuild with -DDLOCK_HIREDIS=bundled (docs/building.md)");
    return -1;
}

void ctl_tls_free(void *tls)
{
    (void)tls;
}

int ctl_tls_start(void *tls, redisContext *ctx, const char *host, char *err, size_t errlen)
{
    (void)tls;
    (void)ctx;
    (void)host;
    snprintf(err, errlen, "TLS is not in this build");
    return -1;
}

#endif
