/* fuzz_resp.c - libdlock on whatever bytes a broken or hostile "Redis"
 * answers. The harness listens on a unix socket, answers every command the
 * library sends with the fuzz input (RESP or not) and closes. It drives the
 * public API through it: connect, ping, acquire, extend, release, and the
 * same for a set of three (dlock_acquire_multi). No crash,
 * no leak, no hang, and every outcome a code of the enum. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "dlock.h"
#include "fuzz.h"

#define MAX_REPLY 4096

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t reply[MAX_REPLY];
static size_t reply_len;
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static char addr[sizeof sock_path + 8];
static int listen_fd = -1;

/* Answers one connection: reads what the client sent (briefly), writes the
 * current input, and closes, so the client sees the bytes, then EOF. */
static void serve(int fd)
{
    uint8_t buf[MAX_REPLY], in[8192];
    size_t n;

    pthread_mutex_lock(&mu);
    n = reply_len;
    memcpy(buf, reply, n);
    pthread_mutex_unlock(&mu);
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 20) > 0)
        (void)recv(fd, in, sizeof in, MSG_DONTWAIT);
    (void)send(fd, buf, n, MSG_NOSIGNAL);
    (void)shutdown(fd, SHUT_WR);
    if (poll(&p, 1, 20) > 0)
        (void)recv(fd, in, sizeof in, MSG_DONTWAIT);
    close(fd);
}

static void *server_main(void *arg)
{
    (void)arg;
    for (;;) {
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return NULL;
        }
        serve(fd);
    }
}

/* Once per process: the listener and its thread (they live as long as the
 * fuzzer; the socket file goes at exit). */
static void unlink_socket(void)
{
    unlink(sock_path);
}

static int setup(void)
{
    static int done = 0;
    if (done)
        return 0;
    snprintf(sock_path, sizeof sock_path, "/tmp/dlock-fuzz-%ld.sock", (long)getpid());
    snprintf(addr, sizeof addr, "unix:%s", sock_path);
    unlink(sock_path);
    listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(listen_fd, 64) != 0) {
        perror("fuzz_resp: listen");
        abort();
    }
    atexit(unlink_socket);
    pthread_t th;
    if (pthread_create(&th, NULL, server_main, NULL) != 0 || pthread_detach(th) != 0)
        abort();
    done = 1;
    return 0;
}

static void check_code(dlock_err rc)
{
    FUZZ_CHECK(rc >= DLOCK_OK && rc <= DLOCK_ERR_FENCE_SYNC);
    FUZZ_CHECK(dlock_strerror(rc) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    pthread_mutex_lock(&mu);
    reply_len = size < MAX_REPLY ? size : MAX_REPLY;
    memcpy(reply, data, reply_len);
    pthread_mutex_unlock(&mu);

    const char *addrs[] = {addr};
    dlock_options o;
    dlock_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = 1;
    /* Short: every call ends by EOF or these, so an input cannot hang the run. */
    o.connect_timeout_ms = 50;
    o.command_timeout_ms = 30;
    dlock_client *c = NULL;
    char err[DLOCK_ERRSTR_LEN];
    dlock_err rc = dlock_client_new(&o, &c, err, sizeof err);
    check_code(rc);
    if (rc != DLOCK_OK) {
        FUZZ_CHECK(c == NULL);
        return 0;
    }
    size_t up = 0;
    check_code(dlock_ping(c, &up));
    FUZZ_CHECK(up <= 1);
    dlock_lock *l = NULL;
    rc = dlock_try_acquire(c, "fuzz", 1000, &l);
    check_code(rc);
    FUZZ_CHECK((rc == DLOCK_OK) == (l != NULL));
    if (l != NULL) {
        check_code(dlock_extend(c, l, 1000));
        check_code(dlock_release(c, l));
        dlock_lock_free(l);
    }
    /* A set of resources: its replies are arrays of fences, parsed by
     * multi.c; any shape must be refused cleanly. */
    const char *set[3] = {"fa", "fb", "fc"};
    l = NULL;
    rc = dlock_acquire_multi(c, set, 3, 1000, 0, &l);
    check_code(rc);
    FUZZ_CHECK((rc == DLOCK_OK) == (l != NULL));
    if (l != NULL) {
        FUZZ_CHECK(dlock_lock_count(l) == 3);
        check_code(dlock_extend(c, l, 1000));
        check_code(dlock_release(c, l));
        dlock_lock_free(l);
    }
    char buf[DLOCK_ERRSTR_LEN];
    FUZZ_CHECK(dlock_client_errstr(c, buf, sizeof buf) != NULL);
    dlock_client_free(c);
    return 0;
}
