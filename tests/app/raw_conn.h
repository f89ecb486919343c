/* raw_conn.h - raw TCP for the suites that speak bytes no HTTP library
 * would send: a connection from a chosen source address (any 127/8 address
 * is local on loopback), sends, and reading one answer under a deadline. */
#ifndef TESTS_APP_RAW_CONN_H
#define TESTS_APP_RAW_CONN_H

#include <stddef.h>

#include "procs.h"

/* A blocking TCP connection to s from source address src (NULL: any),
 * connected within timeout_ms; -1 (errno set) otherwise. */
int raw_connect(const server_proc *s, const char *src, int timeout_ms);
/* All n bytes, or -1 (peer gone). Never raises SIGPIPE. */
int raw_send_all(int fd, const char *p, size_t n);
/* Reads until the peer closes, one whole answer (its head and the
 * Content-Length it declares) is in, buf is full, or timeout_ms passes;
 * NUL-terminates and returns the bytes read; *closed: the peer closed. */
size_t raw_read_answer(int fd, char *buf, size_t cap, int timeout_ms, int *closed);
/* Everything the peer sends until it closes, buf is full or timeout_ms
 * passes (a second head after the first answer shows); NUL-terminated. */
size_t raw_read_to_close(int fd, char *buf, size_t cap, int timeout_ms);
/* The status of the answer in buf, 0 when it is none. */
int raw_status_of(const char *answer);
/* One request of n bytes on a fresh connection from 127.0.0.1: the
 * answer's status (0 when none came within timeout_ms); answer gets it. */
int raw_exchange(const server_proc *s, const char *req, size_t n, char *answer, size_t cap, int timeout_ms);

/* POST /api/v1/admin/coupon with "Bearer <token>" and a small valid body,
 * on a fresh connection from src, Connection: close: the answer's status
 * (0: none) and the answer in answer[0..cap). */
int raw_admin_post(const server_proc *s, const char *src, const char *token, char *answer, size_t cap);

#endif /* TESTS_APP_RAW_CONN_H */
