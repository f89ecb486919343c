/* fuzz_addr.c - libdlock's address parser on arbitrary text: every form
 * dlock.h lists (host[:port], [v6][:port], redis://user:password@host,
 * unix:, sentinel://) and anything else. No crash, no overrun, a verdict
 * that the three public parsers agree on, a reason for every refusal, and
 * never the password of a redis:// URL in a message or in what is shown. */
#include <string.h>

#include "dlock.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[1024], host[300], user[300], pw[300], err[DLOCK_ERRSTR_LEN], shown[600];
    int port = -7;
    dlock_err rc, rc2, rc3;

    if (size >= sizeof text)
        size = sizeof text - 1;
    memcpy(text, data, size);
    text[size] = '\0'; /* the parsers take C strings: stop at the first NUL */
    err[0] = '\0';
    rc = dlock_addr_parse(text, host, sizeof host, &port, err, sizeof err);
    FUZZ_CHECK(rc == DLOCK_OK || rc == DLOCK_ERR_ARG);
    FUZZ_CHECK(rc == DLOCK_OK || err[0] != '\0');
    if (rc == DLOCK_OK)
        FUZZ_CHECK(port >= -1 && port <= 65535 && strlen(host) < sizeof host);
    rc2 = dlock_addr_check(text, NULL, 0);
    rc3 = dlock_addr_credentials(text, user, sizeof user, pw, sizeof pw, err, sizeof err);
    FUZZ_CHECK(rc2 == rc);
    FUZZ_CHECK(rc3 == rc || (rc3 == DLOCK_ERR_ARG && rc == DLOCK_OK)); /* short buffers */
    dlock_addr_shown(text, shown, sizeof shown);
    /* An address with a password is shown with the password as ***. */
    if (rc3 == DLOCK_OK && pw[0] != '\0')
        FUZZ_CHECK(strstr(shown, ":***@") != NULL);
    FUZZ_CHECK(dlock_addr_span(text) <= size);
    return 0;
}
