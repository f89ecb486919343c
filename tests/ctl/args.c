/* args.c - dlockctl's command line: every bad one exits 2 with a message
 * naming what is wrong, before any network call (no Redis runs here: the
 * default address 127.0.0.1:6379 must not even be tried). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_util.h"

TestSuite(ctl_args);

/* Runs dlockctl with the arguments; asserts exit 2 and that the output
 * names `needle`. */
#define EXPECT_USAGE(needle, ...)                                                                  \
    do {                                                                                           \
        char *out_ = NULL;                                                                         \
        int rc_ = ctl_run(&out_, __VA_ARGS__, NULL);                                               \
        cr_expect_eq(rc_, 2, "exit %d, output: %s", rc_, out_ ? out_ : "");                        \
        cr_expect(out_ != NULL && strstr(out_, needle) != NULL, "no '%s' in: %s", needle,           \
                  out_ ? out_ : "");                                                               \
        free(out_);                                                                                \
    } while (0)

Test(ctl_args, no_command)
{
    char *out = NULL;
    int rc = ctl_run(&out, NULL);
    cr_expect_eq(rc, 2);
    cr_expect(out != NULL && strstr(out, "missing command") != NULL, "%s", out ? out : "");
    free(out);
}

Test(ctl_args, unknown_command_and_option)
{
    EXPECT_USAGE("unknown command 'lsit'", "lsit");
    EXPECT_USAGE("unknown option '--colour'", "list", "--colour");
}

Test(ctl_args, bad_addresses_use_libdlock_rules)
{
    EXPECT_USAGE("--redis: address \"fe80::1\": write IPv6 hosts as [addr]", "--redis", "fe80::1",
                 "ping");
    /* TLS files with no TLS node, and TLS to a unix socket, are refused
     * before any connection (in every build). */
    EXPECT_USAGE("--tls-cert given, but no node uses TLS", "--redis", "127.0.0.1:6379",
                 "--tls-cert", "c.pem", "--tls-key", "k.pem", "ping");
    EXPECT_USAGE("is a unix socket: Redis speaks TLS on TCP ports only", "--redis",
                 "unix:/tmp/r.sock", "--tls-ca", "ca.pem", "ping");
    EXPECT_USAGE("--redis", "--redis", "127.0.0.1:99999", "ping");
    /* A byte no host holds is refused at once, and a misspelt URL is not
     * called an IPv6 mistake (exit 2, no connection tried). */
    EXPECT_USAGE("bad character ';' in host", "--redis", "127.0.0;1:6379", "ping");
    EXPECT_USAGE("a URL is written redis://host:port", "--redis", "redis:/127.0.0.1:6379", "ping");
    EXPECT_USAGE("--redis", "--redis", "127.0.0.1:6379,", "ping");
    EXPECT_USAGE("empty unix socket path", "--redis", "unix:", "ping");
    EXPECT_USAGE("--redis needs a value", "ping", "--redis");
    /* dlockctl talks to fixed nodes: a sentinel:// address is refused, whole. */
    EXPECT_USAGE("\"sentinel://127.0.0.1:1,127.0.0.1:2/m\": give the master's host:port", "--redis",
                 "sentinel://127.0.0.1:1,127.0.0.1:2/m", "ping");
}

Test(ctl_args, operands_are_checked)
{
    EXPECT_USAGE("show needs exactly one RESOURCE", "show");
    EXPECT_USAGE("show needs exactly one RESOURCE", "show", "a", "b");
    EXPECT_USAGE("ping takes no operand", "ping", "extra");
    EXPECT_USAGE("list takes no operand", "list", "app:");
    EXPECT_USAGE("longer than", "show", "--prefix",
                 "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
                 "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
                 "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
                 "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
                 "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
                 "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
                 "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp",
                 "r");
}

Test(ctl_args, release_needs_force)
{
    EXPECT_USAGE("add --force", "release", "orders:42");
    EXPECT_USAGE("--force only applies to release", "show", "orders:42", "--force");
}

Test(ctl_args, fence_needs_a_positive_raise)
{
    EXPECT_USAGE("fence needs --raise N", "fence", "orders:42");
    EXPECT_USAGE("--raise: '0' is not", "fence", "orders:42", "--raise", "0");
    EXPECT_USAGE("--raise: '-5' is not", "fence", "orders:42", "--raise", "-5");
    EXPECT_USAGE("--raise: 'ten' is not", "fence", "orders:42", "--raise", "ten");
    /* Above 2^53 the raise script's Lua numbers could round: refused. */
    EXPECT_USAGE("--raise: '9007199254740993' is not", "fence", "r", "--raise", "9007199254740993");
    EXPECT_USAGE("--raise only applies to fence", "release", "r", "--force", "--raise", "3");
}

Test(ctl_args, timeout_and_user)
{
    EXPECT_USAGE("--timeout-ms: '0' is not", "ping", "--timeout-ms", "0");
    EXPECT_USAGE("--timeout-ms: '5s' is not", "ping", "--timeout-ms=5s");
    EXPECT_USAGE("--user needs --password", "ping", "--user", "ops");
}

Test(ctl_args, help_and_version)
{
    char *out = NULL;
    char want[32];
    cr_expect_eq(ctl_run(&out, "--help", NULL), 0);
    cr_expect(out != NULL && strstr(out, "usage: dlockctl") != NULL &&
              strstr(out, "release RESOURCE --force") != NULL &&
              strstr(out, "--timeout-ms MS") != NULL, "%s", out ? out : "");
    free(out);
    out = NULL;
    cr_expect_eq(ctl_run(&out, "show", "-h", NULL), 0);
    cr_expect(out != NULL && strstr(out, "usage: dlockctl") != NULL);
    free(out);
    out = NULL;
    snprintf(want, sizeof want, "dlockctl %d.%d.%d", DLOCK_VERSION_MAJOR, DLOCK_VERSION_MINOR,
             DLOCK_VERSION_PATCH);
    cr_expect_eq(ctl_run(&out, "--version", NULL), 0);
    cr_expect(out != NULL && strstr(out, want) != NULL, "%s", out ? out : "");
    free(out);
}
