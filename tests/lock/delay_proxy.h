/* delay_proxy.h - a TCP relay on a free loopback port in front of one
 * redis-server, that holds back a command carrying a given byte pattern
 * for a while: a slow network or a stalled node for exactly one step of a
 * protocol (the fence-sync round, say), on real sockets. */
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
/* How many chunks were held back so far. */
int delay_proxy_held(delay_proxy *p);
/* Stops relaying, closes every socket, joins every thread; NULL ok. */
void delay_proxy_stop(delay_proxy *p);

#endif /* TESTS_DELAY_PROXY_H */
