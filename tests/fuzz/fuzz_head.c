/* fuzz_head.c - the accept front's screen (app/src/http/head_parse.c) on
 * any bytes a client sends: never reads past the buffer, and what it
 * decides is consistent: a whole head lies within the input and the
 * limit, declares at most one framing, and a refusal carries a status
 * and code of the contract with a message. The same input is also cut at
 * every length a few bytes apart (a head arriving in pieces): a prefix of
 * an accepted head is never refused for what is in it (NUL, bare CR/LF
 * and the like are refused as soon as they arrive, not later). */
#include <string.h>

#include "fuzz.h"
#include "http/head_parse.h"

static void check_one(const char *buf, size_t n, size_t max_head, size_t max_body)
{
    head_info h;
    head_status st = head_parse(buf, n, max_head, max_body, &h);
    FUZZ_CHECK(st == HEAD_INCOMPLETE || st == HEAD_OK || st == HEAD_BAD);
    if (st == HEAD_OK) {
        FUZZ_CHECK(h.head_len >= 4 && h.head_len <= n && h.head_len <= max_head);
        FUZZ_CHECK(memcmp(buf + h.head_len - 4, "\r\n\r\n", 4) == 0);
        FUZZ_CHECK(memchr(buf, '\0', h.head_len) == NULL);
        FUZZ_CHECK(!(h.chunked && h.content_length >= 0));
        FUZZ_CHECK(h.content_length < 0 || (size_t)h.content_length <= max_body);
        FUZZ_CHECK(h.target_off + h.target_len <= h.head_len);
        if (h.chunked) {
            size_t used = 0;
            chunk_status cs = chunked_scan(buf + h.head_len, n - h.head_len, max_body, &used);
            FUZZ_CHECK(cs >= CHUNK_INCOMPLETE && cs <= CHUNK_TOO_LARGE);
            FUZZ_CHECK(cs != CHUNK_DONE || (used >= 5 && used <= n - h.head_len));
        }
    } else if (st == HEAD_BAD) {
        FUZZ_CHECK(h.status == 400 || h.status == 413 || h.status == 414 || h.status == 431 || h.status == 505);
        FUZZ_CHECK(h.code == 1001 || h.code == 1009);
        FUZZ_CHECK(h.msg[0] != '\0' && memchr(h.msg, '\0', sizeof h.msg) != NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy: ASan catches any read one past the input. */
    char *buf = malloc(size > 0 ? size : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    check_one(buf, size, 8192, 16384);
    check_one(buf, size, 256, 16); /* the smallest limits: the size paths */
    /* Prefixes: an accepted whole head was never refused while incomplete. */
    head_info whole;
    if (head_parse(buf, size, 8192, 16384, &whole) == HEAD_OK) {
        for (size_t cut = 0; cut < whole.head_len; cut += 7) {
            head_info h;
            FUZZ_CHECK(head_parse(buf, cut, 8192, 16384, &h) == HEAD_INCOMPLETE);
        }
    }
    /* chunked_scan alone, on the raw bytes. */
    size_t used = 0;
    chunk_status cs = chunked_scan(buf, size, 64, &used);
    FUZZ_CHECK(cs != CHUNK_DONE || used <= size);
    free(buf);
    return 0;
}
