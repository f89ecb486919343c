/* raw_conn.c - raw TCP for the suites (raw_conn.h). */
#include "raw_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

int raw_connect(const server_proc *s, const char *src, int timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET};
    if (src != NULL && (inet_pton(AF_INET, src, &a.sin_addr) != 1 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0))
        goto fail;
    a.sin_port = htons((uint16_t)s->port);
    if (inet_pton(AF_INET, "127.0.0.1", &a.sin_addr) != 1)
        goto fail;
    /* Non-blocking, so that a server whose accept queue is full costs the
     * caller timeout_ms, not the kernel's SYN retries (1 s, 3 s, ...). */
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (errno != EINPROGRESS)
            goto fail;
        struct pollfd p = {fd, POLLOUT, 0};
        int err = 0;
        socklen_t len = sizeof err;
        if (poll(&p, 1, timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            errno = err != 0 ? err : ETIMEDOUT;
            goto fail;
        }
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        goto fail;
    return fd;
fail:;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

int raw_send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Whether buf holds a whole answer: its head, and as many body bytes as
 * its Content-Length says (a head without one: the head is enough). */
static int answer_complete(const char *buf, size_t have)
{
    const char *end = strstr(buf, "\r\n\r\n");
    if (end == NULL)
        return 0;
    size_t head = (size_t)(end - buf) + 4;
    for (const char *l = strstr(buf, "\r\n"); l != NULL && l < end; l = strstr(l + 2, "\r\n")) {
        if (strncasecmp(l + 2, "Content-Length:", 15) == 0)
            return have >= head + strtoul(l + 17, NULL, 10);
    }
    return 1;
}

/* Reads into buf until the peer closes, buf is full, timeout_ms passes,
 * or (whole_answer) one whole answer is in; NUL-terminated. */
static size_t read_until(int fd, char *buf, size_t cap, int timeout_ms, int whole_answer, int *closed)
{
    size_t have = 0;
    int64_t deadline = test_now_ms() + timeout_ms;
    *closed = 0;
    buf[0] = '\0';
    while (have + 1 < cap) {
        int64_t left = deadline - test_now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t r = recv(fd, buf + have, cap - 1 - have, 0);
        if (r <= 0) {
            *closed = 1;
            break;
        }
        have += (size_t)r;
        buf[have] = '\0';
        if (whole_answer && answer_complete(buf, have))
            break;
    }
    buf[have] = '\0';
    return have;
}

size_t raw_read_answer(int fd, char *buf, size_t cap, int timeout_ms, int *closed)
{
    return read_until(fd, buf, cap, timeout_ms, 1, closed);
}

size_t raw_read_to_close(int fd, char *buf, size_t cap, int timeout_ms)
{
    int closed = 0;
    return read_until(fd, buf, cap, timeout_ms, 0, &closed);
}

int raw_status_of(const char *answer)
{
    int status = 0;
    if (sscanf(answer, "HTTP/1.%*d %d", &status) != 1)
        return 0;
    return status;
}

int raw_exchange(const server_proc *s, const char *req, size_t n, char *answer, size_t cap, int timeout_ms)
{
    int64_t t0 = test_now_ms();
    answer[0] = '\0';
    int fd = raw_connect(s, NULL, timeout_ms);
    if (fd < 0)
        return 0;
    int closed = 0;
    int left = timeout_ms - (int)(test_now_ms() - t0);
    if (raw_send_all(fd, req, n) == 0 && left > 0)
        raw_read_answer(fd, answer, cap, left, &closed);
    close(fd);
    return raw_status_of(answer);
}

int raw_admin_post(const server_proc *s, const char *src, const char *token, char *answer, size_t cap)
{
    static const char body[] = "{\"name\":\"g\",\"stock\":1}";
    char req[512];
    int n = snprintf(req, sizeof req,
                     "POST /api/v1/admin/coupon HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     token, sizeof body - 1, body);
    int fd = raw_connect(s, src, 3000), closed = 0;
    answer[0] = '\0';
    if (fd < 0 || n < 0 || (size_t)n >= sizeof req) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    if (raw_send_all(fd, req, (size_t)n) == 0)
        raw_read_answer(fd, answer, cap, 5000, &closed);
    close(fd);
    return raw_status_of(answer);
}
