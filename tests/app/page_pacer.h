/* page_pacer.h - a loopback HTTP relay between headless Chromium and
 * coupon-server for the page suite, which runs a hook before every
 * GET /metrics it forwards.
 *
 * Why: the page samples /metrics once a (virtual) second and shows the
 * rate between two samples. Chromium's --virtual-time-budget runs those
 * seconds in a fraction of a real one, and its clock stands still while a
 * fetch is pending. So claims made by a thread of their own land between
 * two samples only if the scheduler is kind (on a loaded machine it was
 * not: app_page failed). A claim made by the hook, before the relay
 * forwards the request, lands between the previous sample and this one by
 * construction, however fast or slow the machine is. */
#ifndef TESTS_APP_PAGE_PACER_H
#define TESTS_APP_PAGE_PACER_H

#include <stddef.h>

typedef struct page_pacer page_pacer;

/* Called with user before each GET /metrics is forwarded, one call at a
 * time, on a relay thread (so it must not use Criterion's asserts). */
typedef void (*page_pacer_hook)(void *user);

/* Listens on a free 127.0.0.1 port and relays every request, one per
 * connection, to upstream ("http://127.0.0.1:<port>", no trailing slash):
 * the status, Content-Type and body come back; other headers do not (the
 * page needs none of them). url gets "http://127.0.0.1:<port>". 0 and *out
 * on success; -1 with why on stderr. */
int page_pacer_start(const char *upstream, page_pacer_hook hook, void *user, page_pacer **out, char *url,
                     size_t url_len);

/* Stops listening, ends every connection, joins every thread, frees. NULL
 * is a no-op. */
void page_pacer_stop(page_pacer *p);

#endif /* TESTS_APP_PAGE_PACER_H */
