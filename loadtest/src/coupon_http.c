/* coupon_http.c - the audit's server side: read one coupon with
 * GET /api/v1/coupon/<id> and check the reply's shape. */
#include "loadtest.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define REPLY_CAP (1u << 20) /* a coupon object is tiny; a larger reply is not our server */

typedef struct grow_buf {
    char *data;
    size_t len;
    size_t cap;
    int overflow;
} grow_buf;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    grow_buf *b = userdata;
    size_t n = size * nmemb;
    if (b->len + n > REPLY_CAP) {
        b->overflow = 1;
        return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        char *p;
        while (cap < b->len + n + 1)
            cap *= 2;
        p = realloc(b->data, cap);
        if (p == NULL)
            return 0;
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

static int get_int(json_t *obj, const char *key, int64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v))
        return -1;
    *out = (int64_t)json_integer_value(v);
    return 0;
}

int lt_coupon_http_read(const char *base_url, int64_t coupon_id, long timeout_ms, lt_coupon_view *view)
{
    int rc = -1;
    CURL *curl = NULL;
    grow_buf buf = {0};
    json_t *root = NULL;
    json_error_t jerr;
    char url[512];
    char curl_err[CURL_ERROR_SIZE] = "";
    long status = 0;
    CURLcode cc;
    json_t *code, *data;
    const char *msg;

    memset(view, 0, sizeof *view);
    snprintf(view->source, sizeof view->source, "%s", base_url);
    snprintf(url, sizeof url, "%s/api/v1/coupon/%" PRId64, base_url, coupon_id);

    curl = curl_easy_init();
    if (curl == NULL) {
        snprintf(view->err, sizeof view->err, "out of memory (curl_easy_init)");
        goto out;
    }
    if (curl_easy_setopt(curl, CURLOPT_URL, url) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_PROXY, "") != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_err) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data) != CURLE_OK ||
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &buf) != CURLE_OK) {
        snprintf(view->err, sizeof view->err, "curl_easy_setopt failed");
        goto out;
    }
    cc = curl_easy_perform(curl);
    if (cc != CURLE_OK) {
        if (buf.overflow)
            snprintf(view->err, sizeof view->err, "cannot read %s: reply larger than %u bytes", url,
                     REPLY_CAP);
        else
            snprintf(view->err, sizeof view->err, "cannot reach %s: %s", base_url,
                     curl_err[0] ? curl_err : curl_easy_strerror(cc));
        goto out;
    }
    if (curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK)
        status = 0;
    root = json_loadb(buf.data ? buf.data : "", buf.len, 0, &jerr);
    if (!json_is_object(root)) {
        snprintf(view->err, sizeof view->err, "%s: HTTP %ld, reply is not a JSON object (%s)", url,
                 status, root == NULL ? jerr.text : "not an object");
        goto out;
    }
    code = json_object_get(root, "code");
    msg = json_string_value(json_object_get(root, "msg"));
    if (!json_is_integer(code)) {
        snprintf(view->err, sizeof view->err, "%s: HTTP %ld, reply has no integer \"code\"", url, status);
        goto out;
    }
    if (json_integer_value(code) == 1002) {
        view->not_found = 1;
        snprintf(view->err, sizeof view->err, "coupon %" PRId64 " does not exist on %s", coupon_id,
                 base_url);
        goto out;
    }
    if (json_integer_value(code) != 0 || status != 200) {
        snprintf(view->err, sizeof view->err, "%s: HTTP %ld, code %" JSON_INTEGER_FORMAT ": %s", url,
                 status, json_integer_value(code), msg ? msg : "(no msg)");
        goto out;
    }
    data = json_object_get(root, "data");
    if (!json_is_object(data) || get_int(data, "total", &view->total) != 0 ||
        get_int(data, "stock", &view->stock) != 0 || get_int(data, "issued", &view->issued) != 0 ||
        get_int(data, "per_user_limit", &view->per_user_limit) != 0) {
        snprintf(view->err, sizeof view->err,
                 "%s: reply lacks data.total/stock/issued/per_user_limit integers", url);
        goto out;
    }
    view->ok = 1;
    rc = 0;
out:
    json_decref(root);
    free(buf.data);
    curl_easy_cleanup(curl);
    return rc;
}
