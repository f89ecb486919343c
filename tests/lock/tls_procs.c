/* tls_procs.c - see tls_procs.h. */
#include "tls_procs.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "procs_base.h"

int tls_make_certs(const char *dir)
{
    /* EC keys: made in milliseconds, where RSA keys take a while. */
    static const char script[] =
        "set -e; cd \"$1\"\n"
        "q() { \"$@\" >/dev/null 2>&1 || { echo \"failed: $*\" >&2; exit 1; }; }\n"
        "EC='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'\n"
        "q openssl req -x509 $EC -keyout ca.key -out ca.crt -days 2 -subj /CN=dlock-test-ca\n"
        "q openssl req -x509 $EC -keyout other.key -out other.crt -days 2 -subj /CN=other-ca\n"
        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext\n"
        "for who in server client; do\n"
        "  q openssl req $EC -keyout $who.key -out $who.csr -subj /CN=dlock-test-$who\n"
        "  q openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $who.crt -days 2 -extfile san.ext\n"
        "done\n";
    const char *argv[] = {"/bin/sh", "-c", script, "sh", dir, NULL};
    char *out = NULL;
    int rc = run_command(argv, 60000, &out);

    if (rc != 0)
        fprintf(stderr, "tls_make_certs: openssl failed (exit %d): %s\n", rc,
                out != NULL ? out : "");
    free(out);
    return rc == 0 ? 0 : -1;
}

/* Waits until 127.0.0.1:port takes a TCP connection (bounded, 5 s). */
static int port_up(int port)
{
    for (int i = 0; i < 500; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a;
        int ok;

        if (fd < 0)
            return -1;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
        close(fd);
        if (ok)
            return 0;
        test_sleep_ms(10);
    }
    return -1;
}

/* In a forked child: redis-server ($DLOCK_REDIS_SERVER, else from PATH)
 * with argv, its output to /dev/null; never returns. */
static void exec_redis(const char *const *argv)
{
    const char *server = getenv("DLOCK_REDIS_SERVER");
    int devnull = open("/dev/null", O_WRONLY);

    if (devnull >= 0) {
        dup2(devnull, 1);
        dup2(devnull, 2);
    }
    if (server != NULL && server[0] != '\0')
        execv(server, (char *const *)argv);
    execvp("redis-server", (char *const *)argv);
    _exit(127);
}

int tls_redis_start(tls_redis *r, const char *dir, const char *auth_clients)
{
    char cert[300], key[300], ca[300], port[16], sdir[300];

    memset(r, 0, sizeof(*r));
    r->port = free_loopback_port();
    if (r->port <= 0)
        return -1;
    snprintf(cert, sizeof cert, "%s/server.crt", dir);
    snprintf(key, sizeof key, "%s/server.key", dir);
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    snprintf(port, sizeof port, "%d", r->port);
    snprintf(sdir, sizeof sdir, "%s/srv%d", dir, r->port);
    snprintf(r->addr, sizeof r->addr, "127.0.0.1:%d", r->port);
    if (mkdir(sdir, 0700) != 0) {
        fprintf(stderr, "tls_redis_start: mkdir %s failed\n", sdir);
        return -1;
    }
    r->pid = fork();
    if (r->pid < 0) {
        r->pid = 0;
        fprintf(stderr, "tls_redis_start: fork failed\n");
        return -1;
    }
    if (r->pid == 0) {
        const char *argv[] = {"redis-server", "--port", "0", "--tls-port", port,
                              "--tls-cert-file", cert, "--tls-key-file", key,
                              "--tls-ca-cert-file", ca, "--tls-auth-clients", auth_clients,
                              "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                              "--dir", sdir, "--loglevel", "warning", NULL};
        exec_redis(argv);
    }
    if (port_up(r->port) != 0) {
        fprintf(stderr, "tls_redis_start: redis-server with TLS on port %d did not come up\n",
                r->port);
        tls_redis_stop(r);
        return -1;
    }
    return 0;
}

void tls_redis_stop(tls_redis *r)
{
    if (r->pid <= 0)
        return;
    kill(r->pid, SIGCONT);
    kill(r->pid, SIGTERM);
    for (int i = 0; i < 500; i++) {
        if (waitpid(r->pid, NULL, WNOHANG) == r->pid) {
            r->pid = 0;
            return;
        }
        test_sleep_ms(10);
    }
    kill(r->pid, SIGKILL);
    waitpid(r->pid, NULL, 0);
    r->pid = 0;
}

int tls_sentinel_start(tls_redis *s, const char *dir, const char *master_name, int master_port)
{
    char sdir[300], conf[340];
    FILE *f;

    memset(s, 0, sizeof(*s));
    s->port = free_loopback_port();
    if (s->port <= 0)
        return -1;
    snprintf(s->addr, sizeof s->addr, "127.0.0.1:%d", s->port);
    snprintf(sdir, sizeof sdir, "%s/sentinel%d", dir, s->port);
    snprintf(conf, sizeof conf, "%s/sentinel.conf", sdir);
    if (mkdir(sdir, 0700) != 0 || (f = fopen(conf, "w")) == NULL) {
        fprintf(stderr, "tls_sentinel_start: cannot write %s\n", conf);
        return -1;
    }
    /* Sentinel rewrites its config, so it is a file of its own; the
     * certificate is the servers' (it is for 127.0.0.1 too). */
    fprintf(f,
            "port 0\ntls-port %d\nbind 127.0.0.1\ndir %s\n"
            "tls-cert-file %s/server.crt\ntls-key-file %s/server.key\n"
            "tls-ca-cert-file %s/ca.crt\ntls-replication yes\ntls-auth-clients no\n"
            "sentinel monitor %s 127.0.0.1 %d 1\n"
            "sentinel down-after-milliseconds %s 60000\n",
            s->port, sdir, dir, dir, dir, master_name, master_port, master_name);
    if (fclose(f) != 0) {
        fprintf(stderr, "tls_sentinel_start: cannot write %s\n", conf);
        return -1;
    }
    s->pid = fork();
    if (s->pid < 0) {
        s->pid = 0;
        return -1;
    }
    if (s->pid == 0) {
        const char *argv[] = {"redis-server", conf, "--sentinel", NULL};
        exec_redis(argv);
    }
    if (port_up(s->port) != 0) {
        fprintf(stderr, "tls_sentinel_start: sentinel on TLS port %d did not come up\n", s->port);
        tls_redis_stop(s);
        return -1;
    }
    return 0;
}
