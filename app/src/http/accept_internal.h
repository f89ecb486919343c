/* accept_internal.h - what the accept front's two files share (accept.c:
 * the loop, the slots, the screen and the deadlines; accept_relay.c: the
 * relay of a screened request to libmicrohttpd and of its answer back).
 * Everything here runs on the front's one thread. */
#ifndef APP_ACCEPT_INTERNAL_H
#define APP_ACCEPT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "http/accept.h"
#include "http/proxy_proto.h"

/* A refused request's answer, or the last answer of a connection that is
 * not kept alive, has this long to be read, while whatever the client
 * still sends is read and dropped (closing with unread bytes would reset
 * the connection, and the client could lose the answer). */
#define LINGER_MS 2000
#define ADDR_BUCKETS 1024
/* The largest answer the relay buffers (the page and the coupon list are
 * far below); a larger one closes the connection. */
#define ANSWER_MAX (64u * 1024 * 1024)
/* A connection's socketpair to libmicrohttpd outlives its answer and
 * carries the connection's next (screened) request; idle this long (up to
 * a sweep more), it is closed and the next request gets a new one. Short:
 * an idle pair holds one of libmicrohttpd's slots (its pool splits
 * --max-connections among its threads, the pair going to the thread of
 * its descriptor number), and a client that asks again at once (a load,
 * a page's requests) is the one that gains from it. */
#define PAIR_IDLE_MS 100

/* Where a connection is in its request's life. */
typedef enum conn_state {
    C_READING = 0, /* waiting for a whole request (peeked, not read) */
    C_RELAYING,    /* its request is with libmicrohttpd, the answer is being read back */
    C_SENDING      /* the answer is going out to the client */
} conn_state;

struct fconn;

/* One client address, how many connections the front holds from it, and
 * those connections, oldest first. */
typedef struct addr_count {
    struct addr_count *next;
    unsigned char key[16]; /* the IPv4 (first 4 bytes) or IPv6 address */
    unsigned count;
    struct fconn *oldest, *newest;
} addr_count;

typedef struct fconn {
    struct fconn *prev, *next;   /* the front's list, oldest accept first */
    struct fconn *aprev, *anext; /* its address's list, likewise */
    int fd;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    addr_count *ac;
    /* From a --trusted-proxy network: its first bytes must be a PROXY
     * header (proxy_proto.h), whose client address replaces addr. */
    int proxy_pending;
    int64_t accepted_ms;
    int64_t head_ms;    /* when its head was whole, 0 before */
    size_t body_seen;   /* body bytes in the socket at the last look */
    int continue_sent;  /* "100 Continue" went out */
    int64_t linger_until_ms; /* answered: closed at EOF or then; 0 before */
    int gone;                /* closed or handed over: freed after the batch */
    conn_state state;
    int64_t state_ms;   /* when the state began */
    int served;         /* answers relayed on this connection */
    int keep_alive;     /* the client may send another request after this answer */
    int pair_fd;        /* the front's end of the socketpair to libmicrohttpd; else -1 */
    int head_request;   /* the request with libmicrohttpd is a HEAD: its answer has no body */
    size_t ans_off;     /* where the answer's final head starts in out (after any 1xx) */
    char *out;          /* the answer read back from libmicrohttpd, then sent from out_off */
    size_t out_len, out_cap, out_off;
} fconn;

struct front {
    app *app;
    struct MHD_Daemon *daemon;
    int listen_fd, epfd, wake_fd;
    pthread_t thread;
    int stop;    /* written once by front_stop, then the wake */
    int quiesce; /* written once by front_quiesce, then the wake */
    int quiesced; /* the loop has stopped accepting (its own) */
    int relaying; /* connections relaying or sending an answer (read by front_busy) */
    fconn *oldest, *newest;
    /* Closed or handed over during this turn of the loop: an event for one
     * of them may still be in the batch epoll_wait returned (a connection
     * closed to make room, say), so they are freed after the batch. */
    fconn *gone;
    unsigned held;
    int64_t accept_paused_until_ms;
    char *scratch; /* the peek buffer, the thread's alone */
    size_t scratch_cap, body_cap;
    addr_count *buckets[ADDR_BUCKETS];
    proxy_cidr trusted[PROXY_MAX_CIDRS]; /* --trusted-proxy */
    size_t n_trusted;
    /* What the sweeps closed since the last log line. */
    unsigned cut_head, cut_request, cut_rate, evicted, refused_ip, refused_proxy;
    int64_t logged_ms;
};

/* accept.c */
/* Closes c (its socketpair too); c is freed after the loop's batch. */
void front_conn_close(front *f, fconn *c);
/* Reads and drops what fd holds; 1 when the peer has closed its side. */
int front_drain(int fd);
/* Looks at what c has sent so far, and answers, relays or waits. */
void front_conn_look(front *f, fconn *c, uint32_t events);

/* accept_relay.c */
/* Reads the screened request (len bytes) off c and relays it. */
void relay_start(front *f, fconn *c, int keep_alive, size_t len);
/* The socketpair of c is readable: more of the answer, or its end. */
void relay_pair_event(front *f, fconn *c);
/* c's client socket is writable again: the rest of the answer. */
void relay_client_send(front *f, fconn *c);
/* Closes c's socketpair (when it has one). */
void relay_pair_close(front *f, fconn *c);
/* Closes c's socketpair when it has been idle too long (PAIR_IDLE_MS). */
void relay_pair_idle(front *f, fconn *c, int64_t now);

#endif /* APP_ACCEPT_INTERNAL_H */
