/* docs_util.h - what the docs_* suites share: where the tree and the build
 * are, reading a file, running a documented command, reading its table. */
#ifndef TESTS_DOCS_UTIL_H
#define TESTS_DOCS_UTIL_H

#include <stddef.h>

/* $DLOCK_SOURCE_DIR and $DLOCK_BINARY_DIR/bin (asserts both are set). */
const char *docs_src(void);
const char *docs_bin(void);

/* path = the source tree's rel (asserts it fits). */
void docs_path(char *path, size_t len, const char *rel);

/* Runs argv (argv[0] relative to the source tree when it has no leading
 * '/'), at most timeout_s; returns the exit status, *out = stdout+stderr. */
int docs_run(const char *const *argv, int timeout_s, char **out);

/* The n lines of text right after the first line that starts with header,
 * each into rows[i] (without its newline); asserts all n are there. */
void docs_rows_after(const char *text, const char *header, char rows[][512], size_t n);

/* How many lines of text start with prefix. */
size_t docs_count_lines(const char *text, const char *prefix);

/* How many running processes have a command line (its words joined by
 * spaces) that contains needle: what a script left behind. */
size_t docs_count_procs(const char *needle);

/* 1 when bench/peers/node_modules is there (bench/peers.sh --setup installed
 * the peer drivers' packages from npm), 0 when it is not; with
 * DLOCK_TEST_PEERS=1 its absence fails the test instead. */
int docs_peers_installed(void);

/* Reads path into a malloc'd NUL-terminated string (the caller frees it), or NULL. */
char *docs_read_text(const char *path);

#endif /* TESTS_DOCS_UTIL_H */
