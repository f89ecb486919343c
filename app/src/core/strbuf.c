/* strbuf.c - growable text buffer with sticky out-of-memory state. */
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int sb_reserve(strbuf *sb, size_t extra)
{
    if (sb->failed)
        return -1;
    if (extra > (size_t)-1 / 2 - sb->len) {
        sb->failed = 1;
        return -1;
    }
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap)
        return 0;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(sb->data, cap);
    if (p == NULL) {
        sb->failed = 1;
        return -1;
    }
    sb->data = p;
    sb->cap = cap;
    return 0;
}

void sb_append(strbuf *sb, const char *s, size_t n)
{
    if (sb_reserve(sb, n) != 0)
        return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void sb_puts(strbuf *sb, const char *s)
{
    sb_append(sb, s, strlen(s));
}

void sb_printf(strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    char small[256];

    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        sb->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        sb_append(sb, small, (size_t)n);
        return;
    }
    if (sb_reserve(sb, (size_t)n) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

void sb_html_escaped(strbuf *sb, const char *s)
{
    const char *run = s;
    for (; *s != '\0'; s++) {
        const char *ent = NULL;
        switch (*s) {
        case '&': ent = "&amp;"; break;
        case '<': ent = "&lt;"; break;
        case '>': ent = "&gt;"; break;
        case '"': ent = "&quot;"; break;
        case '\'': ent = "&#39;"; break;
        default: break;
        }
        if (ent != NULL) {
            sb_append(sb, run, (size_t)(s - run));
            sb_puts(sb, ent);
            run = s + 1;
        }
    }
    sb_append(sb, run, (size_t)(s - run));
}

char *sb_take(strbuf *sb, size_t *len)
{
    char *out = NULL;
    *len = 0;
    /* An empty buffer still yields a valid (empty) string. */
    if (sb_reserve(sb, 0) == 0) {
        out = sb->data;
        *len = sb->len;
        out[sb->len] = '\0';
        sb->data = NULL;
    }
    sb_free(sb);
    return out;
}

void sb_free(strbuf *sb)
{
    if (sb == NULL)
        return;
    free(sb->data);
    sb->data = NULL;
    sb->len = 0;
    sb->cap = 0;
    sb->failed = 0;
}
