/* delay_proxy.h - a TCP relay on a free loopback port in front of one
 * redis-server, that holds back a command carrying a given byte pattern
 * for a while. That is a slow network or a stalled node for exactly one
 * step of a protocol (the fence-sync round, say), on real sockets. It can
 * also hold back every command until the client's next (a node always a
 * little late). */
#ifndef TESTS_DELAY_PROXY_H
#define TESTS_DELAY_PROXY_H

#include <stddef.h>

typedef struct delay_proxy delay_proxy;

/* Starts relaying 127.0.0.1:<port> (see delay_proxy_port) to
 * 127.0.0.1:upstream_port; NULL on failure (why on stderr). */
delay_proxy *delay_proxy_start(int upstream_port);
int delay_proxy_port(const delay_proxy *p);
/* From now on a client-to-server chunk containing pattern[0..len) waits
 * delay_ms before it is forwarded (once per arming; len 0 disarms). */
void delay_proxy_arm(delay_proxy *p, const char *pattern, size_t len, int delay_ms);
/* From now on every client-to-server chunk waits until the client sends
 * its next one on that connection, or max_ms passed (0: off). That is a
 * node that runs each command just after the client stopped waiting for
 * its answer, and before the client's next command there: slower than a
 * round's grace, never so slow that replies pile up. */
void delay_proxy_lag(delay_proxy *p, int max_ms);
/* How many chunks were held back so far (by delay_proxy_arm). */
int delay_proxy_held(delay_proxy *p);
/* Stops relaying, closes every socket, joins every thread; NULL ok. */
void delay_proxy_stop(delay_proxy *p);

#endif /* TESTS_DELAY_PROXY_H */
