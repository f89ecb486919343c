/* routes_page.c - GET /: the coupon table rendered on the server (so it shows
 * without JavaScript), plus a small script that refreshes it every 2 s. */
#include "http/routes.h"

#include <stdlib.h>

#include "http/reply.h"
#include "core/strbuf.h"

static const char PAGE_HEAD[] =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<title>Coupons</title>\n<style>\n"
    "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
    "th,td{border:1px solid #999;padding:.3em .8em;text-align:right}"
    "td.name,th.name{text-align:left}.sold{color:#a00}\n"
    "</style>\n</head>\n<body>\n<h1>Coupons</h1>\n"
    "<table id=\"coupons\">\n<thead><tr><th>ID</th><th class=\"name\">Name</th><th>Total</th>"
    "<th>Stock</th><th>Issued</th></tr></thead>\n<tbody>\n";

/* The refresh builds cells with textContent, never innerHTML, so a coupon
 * name can never become markup (the server side escapes for the same reason). */
static const char PAGE_TAIL[] =
    "</tbody>\n</table>\n<p id=\"status\"></p>\n<script>\n"
    "function cell(tr,v,cls){var td=document.createElement('td');td.textContent=String(v);"
    "if(cls)td.className=cls;tr.appendChild(td);}\n"
    "function refresh(){fetch('/api/v1/coupon').then(function(r){return r.json();}).then(function(j){\n"
    " if(!j||j.code!==0||!Array.isArray(j.data))return;\n"
    " var tb=document.querySelector('#coupons tbody');var rows=document.createDocumentFragment();\n"
    " j.data.forEach(function(c){var tr=document.createElement('tr');if(c.stock===0)tr.className='sold';"
    "cell(tr,c.coupon_id);cell(tr,c.name,'name');cell(tr,c.total);cell(tr,c.stock);cell(tr,c.issued);"
    "rows.appendChild(tr);});\n"
    " tb.replaceChildren(rows);document.getElementById('status').textContent='updated '+new Date().toLocaleTimeString();\n"
    "}).catch(function(){document.getElementById('status').textContent='refresh failed';});}\n"
    "setInterval(refresh,2000);\n</script>\n</body>\n</html>\n";

int route_page(request *rq)
{
    int ret = MHD_NO;
    db_coupon *list = NULL;
    size_t n = 0, len = 0;
    strbuf sb = {0};

    db_status st = db_list_coupons(rq->w->db, &list, &n);
    if (st != DB_OK) {
        ret = reply_db_error(rq, st);
        goto out;
    }
    sb_puts(&sb, PAGE_HEAD);
    for (size_t i = 0; i < n; i++) {
        const db_coupon *c = &list[i];
        sb_printf(&sb, "<tr%s><td>%lld</td><td class=\"name\">", c->stock == 0 ? " class=\"sold\"" : "",
                  (long long)c->id);
        sb_html_escaped(&sb, c->name);
        sb_printf(&sb, "</td><td>%lld</td><td>%lld</td><td>%lld</td></tr>\n", (long long)c->total,
                  (long long)c->stock, (long long)c->issued);
    }
    sb_puts(&sb, PAGE_TAIL);
    char *html = sb_take(&sb, &len);
    if (html == NULL) {
        ret = reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "out of memory");
        goto out;
    }
    ret = reply_text(rq, MHD_HTTP_OK, "text/html; charset=utf-8", html, len);
out:
    sb_free(&sb);
    free(list);
    return ret;
}
