/* strbuf.h - a growable, NUL-terminated text buffer for the page (routes_page.c;
 * /metrics writes through open_memstream instead). */
#ifndef APP_STRBUF_H
#define APP_STRBUF_H

#include <stddef.h>

typedef struct strbuf {
    char *data;  /* NUL-terminated once anything was appended; owned */
    size_t len;  /* bytes used, without the NUL */
    size_t cap;  /* bytes allocated */
    int failed;  /* sticky: an append ran out of memory, the text is incomplete */
} strbuf;

/* Appends; on out-of-memory sets sb->failed and keeps what it had, so a
 * caller checks once at the end instead of after every append. */
void sb_append(strbuf *sb, const char *s, size_t n);
void sb_puts(strbuf *sb, const char *s);
void sb_printf(strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s with & < > " ' replaced by their HTML entities. */
void sb_html_escaped(strbuf *sb, const char *s);
/* Hands the text over (caller frees with free()), or NULL if any append
 * failed (the buffer is then freed). *len gets the length. Resets sb. */
char *sb_take(strbuf *sb, size_t *len);
void sb_free(strbuf *sb);

#endif /* APP_STRBUF_H */
