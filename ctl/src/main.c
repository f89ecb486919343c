/* main.c - dlockctl's command line: options anywhere around the subcommand,
 * parsed by common's table-driven parser; then the subcommand runs. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "ctl.h"

#define OPT(field) offsetof(ctl_opts, field)

static const cm_option OPTIONS[] = {
    {.name = "redis", .kind = CM_ARG_STRING, .offset = OPT(redis), .metavar = "ADDR[,ADDR...]",
     .help = "the lock's Redis masters, as the applications' --redis:\n"
             "host:port, [v6]:port, redis://[[user]:password@]host:port,\n"
             "rediss:// (TLS) or unix:/path (default 127.0.0.1:6379)"},
    {.name = "password", .kind = CM_ARG_STRING, .offset = OPT(password), .metavar = "PW",
     .help = "AUTH password (or $DLOCKCTL_PASSWORD, which ps does not show)"},
    {.name = "user", .kind = CM_ARG_STRING, .offset = OPT(user), .metavar = "NAME",
     .help = "ACL user for AUTH (with --password)"},
    {.name = "prefix", .kind = CM_ARG_STRING, .offset = OPT(prefix), .metavar = "P",
     .help = "the applications' key prefix (libdlock's key_prefix; default none)"},
    {.name = "timeout-ms", .kind = CM_ARG_INT, .offset = OPT(timeout_ms), .lo = 1, .hi = 60000,
     .metavar = "MS", .help = "connect and command timeout per node (default 500)"},
    {.name = "tls-ca", .kind = CM_ARG_STRING, .offset = OPT(tls_ca), .metavar = "FILE",
     .help = "PEM file of the CAs that sign the nodes' certificates;\n"
             "given, every node is reached over TLS (rediss:// nodes\n"
             "are TLS anyway, verified by the system's CAs without it)"},
    {.name = "tls-cert", .kind = CM_ARG_STRING, .offset = OPT(tls_cert), .metavar = "FILE",
     .help = "client certificate (PEM), with --tls-key"},
    {.name = "tls-key", .kind = CM_ARG_STRING, .offset = OPT(tls_key), .metavar = "FILE",
     .help = "the private key (PEM) of --tls-cert"},
    {.name = "json", .kind = CM_ARG_NONE, .offset = OPT(json), .help = "print JSON"},
    {.name = "force", .kind = CM_ARG_NONE, .offset = OPT(force),
     .help = "release: yes, delete a lock someone may still hold"},
    {.name = "raise", .kind = CM_ARG_U64, .offset = OPT(raise), .ulo = 1,
     .uhi = CTL_FENCE_RAISE_MAX, .metavar = "N",
     .help = "fence: raise the counter to N (never lowers it)"},
    {.name = "version", .kind = CM_ARG_HELP, .offset = OPT(version), .help = "print the version"},
    {.name = "help", .short_name = 'h', .kind = CM_ARG_HELP, .offset = OPT(help),
     .help = "this text"},
};

static const cm_args_spec SPEC = {
    .opts = OPTIONS,
    .n_opts = sizeof(OPTIONS) / sizeof(OPTIONS[0]),
    .usage = "usage: dlockctl [options] COMMAND [ARGS]\n"
             "\n"
             "Inspect and repair libdlock's locks in Redis.\n"
             "\n"
             "commands:\n"
             "  list                       every lock under --prefix: holder token, PTTL, fence, per node\n"
             "  show RESOURCE              one resource on every node, and whether a quorum holds it\n"
             "  release RESOURCE --force   delete the lock on every node (the holder may still run!)\n"
             "  fence RESOURCE --raise N   raise the fence counter to N on every node (never lowers)\n"
             "  ping                       every node's round-trip time; exit 1 without a quorum\n"
             "\n"
             "options:\n",
    .epilogue = "\nexit status: 0 done, 1 Redis refused or fewer than a quorum of nodes answered,\n"
                "2 bad command line.\n",
    .help_column = 32,
};

typedef int (*ctl_cmd_fn)(const ctl_opts *, ctl_nodes *, int, char **);

static const struct {
    const char *name;
    ctl_cmd_fn run;
} COMMANDS[] = {
    {"list", ctl_cmd_list},       {"show", ctl_cmd_show}, {"release", ctl_cmd_release},
    {"fence", ctl_cmd_fence},     {"ping", ctl_cmd_ping},
};

int ctl_usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("dlockctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (see dlockctl --help)\n", stderr);
    return CTL_EXIT_USAGE;
}

/* Does argv word `arg` name an option that takes its value from the next
 * word? ("--name VALUE" or "-x VALUE", not "--name=VALUE" and not a flag.)
 * Unknown options answer no: cm_args_parse reports them. */
static int takes_next_word(const char *arg)
{
    for (size_t i = 0; i < SPEC.n_opts; i++) {
        const cm_option *o = &SPEC.opts[i];
        int named = (arg[1] == '-' && strcmp(arg + 2, o->name) == 0) ||
                    (arg[1] != '-' && o->short_name != 0 && arg[1] == o->short_name &&
                     arg[2] == '\0');
        if (named)
            return o->kind != CM_ARG_NONE && o->kind != CM_ARG_HELP;
    }
    return 0;
}

/* Splits argv into the options (to opt_argv, with argv[0] in front, for
 * cm_args_parse) and the operands (to words), keeping their order, so that
 * options may come before or after the subcommand. Everything after "--"
 * is an operand. */
static void split_argv(int argc, char **argv, char **opt_argv, int *n_opt, char **words,
                       int *n_words)
{
    int only_words = 0;

    *n_opt = 0;
    *n_words = 0;
    opt_argv[(*n_opt)++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_words || a[0] != '-' || a[1] == '\0') {
            words[(*n_words)++] = argv[i];
        } else if (strcmp(a, "--") == 0) {
            only_words = 1;
        } else {
            opt_argv[(*n_opt)++] = argv[i];
            if (takes_next_word(a) && i + 1 < argc)
                opt_argv[(*n_opt)++] = argv[++i];
        }
    }
}

int main(int argc, char **argv)
{
    ctl_opts o = {.redis = "127.0.0.1:6379", .prefix = "", .timeout_ms = 500};
    char **opt_argv = calloc((size_t)argc + 1, sizeof(char *));
    char **words = calloc((size_t)argc + 1, sizeof(char *));
    int n_opt, n_words, rc = CTL_EXIT_USAGE;
    char err[512];
    ctl_nodes ns;
    ctl_cmd_fn run = NULL;

    if (opt_argv == NULL || words == NULL) {
        fprintf(stderr, "dlockctl: out of memory\n");
        rc = CTL_EXIT_FAIL;
        goto out;
    }
    split_argv(argc, argv, opt_argv, &n_opt, words, &n_words);
    switch (cm_args_parse(&SPEC, n_opt, opt_argv, &o, err, sizeof(err))) {
    case 1:
        if (o.version) {
            printf("dlockctl %d.%d.%d (libdlock)\n", DLOCK_VERSION_MAJOR, DLOCK_VERSION_MINOR,
                   DLOCK_VERSION_PATCH);
            rc = fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
        } else {
            rc = cm_args_usage(stdout, &SPEC) == 0 ? CTL_EXIT_OK : CTL_EXIT_FAIL;
        }
        goto out;
    case 0:
        break;
    default:
        rc = ctl_usage_error("%s", err);
        goto out;
    }
    if (n_words == 0) {
        rc = ctl_usage_error("missing command (list, show, release, fence or ping)");
        goto out;
    }
    for (size_t i = 0; i < sizeof(COMMANDS) / sizeof(COMMANDS[0]); i++)
        if (strcmp(words[0], COMMANDS[i].name) == 0)
            run = COMMANDS[i].run;
    if (run == NULL) {
        rc = ctl_usage_error("unknown command '%s' (list, show, release, fence or ping)", words[0]);
        goto out;
    }
    /* Options that belong to one command are refused elsewhere: a --raise
     * given to release must not pass silently. */
    if (o.force && run != ctl_cmd_release) {
        rc = ctl_usage_error("--force only applies to release");
        goto out;
    }
    if (o.raise != 0 && run != ctl_cmd_fence) {
        rc = ctl_usage_error("--raise only applies to fence");
        goto out;
    }
    if (o.password == NULL)
        o.password = getenv("DLOCKCTL_PASSWORD");
    if (o.user != NULL && o.password == NULL) {
        rc = ctl_usage_error("--user needs --password (or $DLOCKCTL_PASSWORD)");
        goto out;
    }
    if (ctl_nodes_parse(&o, &ns, err, sizeof(err)) != 0) {
        rc = ctl_usage_error("%s", err);
        goto out;
    }
    /* Each command checks its operands before it connects. */
    rc = run(&o, &ns, n_words - 1, words + 1);
    ctl_nodes_close(&ns);
out:
    free(opt_argv);
    free(words);
    return rc;
}
