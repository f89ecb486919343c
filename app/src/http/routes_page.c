/* routes_page.c - GET /: the page a person watches during a flash sale.
 *
 * The server renders the coupon table (so the page shows stock without
 * JavaScript, and never comes up blank); an inline script then polls, once a
 * second, the same public endpoints any client has:
 *   GET /api/v1/coupon  per coupon stock and issued;
 *   GET /metrics        claims/s and 503s/s over the last minute, computed
 *                       here from the counters, drawn as an inline SVG chart,
 *                       and the fence refusals (code 1010) so far;
 *   GET /healthz        the database and the lock nodes up.
 * Each part says "unavailable" on its own when its endpoint fails.
 *
 * Everything is inline (no external script, style or font) and nothing uses
 * an inline event-handler attribute, so the page runs under the HTML
 * Content-Security-Policy of reply.c (inline script and style, fetches to
 * this server only), and under a stricter one too. Data goes into
 * the DOM only through textContent and setAttribute of numbers, never
 * innerHTML: coupon names come from admins. Attributes are single-quoted so
 * this file needs no escaped quotes. */
#include "http/routes.h"

#include <stdio.h>
#include <stdlib.h>

#include "http/reply.h"

static const char PAGE_HEAD[] =
    "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
    "<meta name='viewport' content='width=device-width, initial-scale=1'>\n"
    "<title>Flash sale - coupon-server</title>\n<style>\n"
    "body{font-family:system-ui,sans-serif;margin:1em 1.5em;color:#111;background:#fff}\n"
    "h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.05em;margin:.7em 0 .3em}\n"
    "#last-poll{color:#555}header p{margin:0}\n"
    "main{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:0 2em}\n"
    "#sec-coupons{grid-column:1/3}\n"
    "table{border-collapse:collapse;width:100%}caption{text-align:left;color:#555;padding-bottom:.3em}\n"
    "th,td{border-bottom:1px solid #ccc;padding:.25em .6em;text-align:right}\n"
    "td.name,th.name{text-align:left;overflow-wrap:anywhere}tr.sold td.stock{color:#a00;font-weight:bold}\n"
    "progress{width:8em}\n"
    "dl{display:grid;grid-template-columns:max-content auto;gap:.15em 1em;margin:.3em 0}\n"
    "dt{color:#444}dd{margin:0;font-weight:bold;font-variant-numeric:tabular-nums}\n"
    "[data-state=unavailable],[data-state=down]{color:#a00}[data-state=ok]{color:#060}[data-state=degraded]{color:#a50}\n"
    "svg{width:100%;max-width:600px;height:auto;display:block}\n"
    ".grid{stroke:#ddd;stroke-width:1}.axis{font-size:11px;fill:#555}\n"
    "#line-ok{fill:none;stroke:#06c;stroke-width:2}\n"
    "#line-503{fill:none;stroke:#c00;stroke-width:2;stroke-dasharray:5 3}\n"
    ".key-ok{color:#06c}.key-503{color:#c00}\n"
    ".dot{display:inline-block;width:.9em;height:.9em;border-radius:50%;margin-right:.25em;"
    "background:#c00}.dot.up{background:#0a0}\n"
    "figure{margin:0}figcaption{color:#444;font-size:.9em}\n"
    "/* Read by screen readers, not shown: the list below shows the same numbers. */\n"
    ".sr-only{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%);white-space:nowrap}\n"
    "</style>\n</head>\n<body>\n"
    "<header>\n<h1>Flash sale</h1>\n"
    "<p><span id='status' role='status'>Loading live numbers&hellip;</span> <span id='last-poll'></span></p>\n"
    "<noscript><p>Live numbers need JavaScript; the table shows the coupons as they were when "
    "this page was loaded.</p></noscript>\n</header>\n<main>\n"
    "<section id='sec-coupons' aria-labelledby='h-coupons'>\n<h2 id='h-coupons'>Coupons</h2>\n"
    "<table id='coupons'>\n<caption>Stock left and coupons issued, per coupon</caption>\n"
    "<thead><tr><th scope='col'>ID</th><th scope='col' class='name'>Name</th>"
    "<th scope='col'>Stock</th><th scope='col'>Issued</th><th scope='col'>Total</th>"
    "<th scope='col'>Sold</th></tr></thead>\n<tbody>\n";

/* The chart's frame: a 600x160 view box, the plot inside the margins the
 * script uses too (left 44 for the axis labels, bottom 18 for the times). */
static const char PAGE_MIDDLE[] =
    "</tbody>\n</table>\n</section>\n"
    "<section id='sec-rates' aria-labelledby='h-rates'>\n"
    "<h2 id='h-rates'>Claims per second, last minute</h2>\n<figure>\n"
    "<svg id='chart' viewBox='0 0 600 160' role='img' aria-labelledby='chart-title' "
    "aria-describedby='chart-summary'>\n"
    "<title id='chart-title'>Claims per second and 503 answers per second over the last minute</title>\n"
    "<line class='grid' x1='44' y1='8' x2='592' y2='8'/>"
    "<line class='grid' x1='44' y1='75' x2='592' y2='75'/>"
    "<line class='grid' x1='44' y1='142' x2='592' y2='142'/>\n"
    "<text class='axis' id='y-max' x='40' y='12' text-anchor='end'>1</text>"
    "<text class='axis' id='y-mid' x='40' y='79' text-anchor='end'>0.5</text>"
    "<text class='axis' x='40' y='146' text-anchor='end'>0</text>\n"
    "<text class='axis' x='44' y='157'>-60 s</text>"
    "<text class='axis' x='318' y='157' text-anchor='middle'>-30 s</text>"
    "<text class='axis' x='592' y='157' text-anchor='end'>now</text>\n"
    "<polyline id='line-ok' points=''/>\n<polyline id='line-503' points=''/>\n</svg>\n"
    "<figcaption><span class='key-ok'>&#9472;&#9472; claims accepted/s</span>, "
    "<span class='key-503'>- - 503 answers/s</span> (this server, sampled every second). "
    "<span id='chart-summary' class='sr-only'>No samples yet.</span></figcaption>\n</figure>\n"
    "<dl id='rates'>\n"
    "<dt>Claims accepted/s</dt><dd id='rate-ok' data-state='unavailable'>unavailable</dd>\n"
    "<dt>503 answers/s</dt><dd id='rate-503' data-state='unavailable'>unavailable</dd>\n"
    "<dt>Peak claims/s (last minute)</dt><dd id='peak-ok' data-state='unavailable'>unavailable</dd>\n"
    "<dt>Peak 503 answers/s (last minute)</dt><dd id='peak-503' data-state='unavailable'>unavailable</dd>\n"
    "<dt>Claims accepted (total)</dt><dd id='total-ok' data-state='unavailable'>unavailable</dd>\n"
    "<dt>503 answers (total)</dt><dd id='total-503' data-state='unavailable'>unavailable</dd>\n"
    "</dl>\n</section>\n"
    "<section id='sec-health' aria-labelledby='h-health'>\n<h2 id='h-health'>Lock nodes</h2>\n"
    "<p id='node-dots' aria-hidden='true'></p>\n<dl id='health'>\n"
    "<dt>Lock nodes up</dt><dd id='nodes-up' data-state='unavailable'>unavailable</dd>\n"
    "<dt>Lock service</dt><dd id='lock-state' data-state='unavailable'>unavailable</dd>\n"
    "<dt>Database</dt><dd id='db-state' data-state='unavailable'>unavailable</dd>\n"
    "<dt>Strategy</dt><dd id='strategy'>unavailable</dd>\n</dl>\n"
    "<h2 id='h-fence'>Fence refusals</h2>\n<dl aria-labelledby='h-fence'>\n"
    "<dt>Claims refused by the fence (1010)</dt>"
    "<dd id='fence-total' data-state='unavailable'>unavailable</dd>\n</dl>\n"
    "<p>A refusal means a lock's lease ran out inside the critical section and the store "
    "turned the late write away: nothing was oversold.</p>\n</section>\n</main>\n";

/* The script: ES2020 (Chromium, Firefox and Safari of 2020 on), no libraries. Counters are sampled with the time of
 * the browser's clock; a rate is the difference of two samples over the time
 * between them, so a slow or missed poll widens the interval instead of
 * faking a spike. */
static const char PAGE_SCRIPT[] =
    "<script>\n'use strict';\n"
    "const CLAIM_ROUTE = '/api/v1/coupon/add';\n"
    "const WINDOW_S = 60, POLL_MS = 1000, TIMEOUT_MS = 2500;\n"
    "/* The chart's plot area inside the 600x160 view box (matches the grid lines). */\n"
    "const PX0 = 44, PX1 = 592, PY0 = 8, PY1 = 142;\n"
    "let last = null;   /* the previous counter sample {t, ok, s503} */\n"
    "let points = [];   /* rates between samples {t, ok, s503}, the last WINDOW_S seconds */\n"
    "const $ = (id) => document.getElementById(id);\n"
    "/* Writes only changes: the status line is a live region, announced when its\n"
    "   text changes, which must not be every second. */\n"
    "function show(id, text, state) {\n"
    "  const el = $(id);\n"
    "  if (el.textContent !== text) el.textContent = text;\n"
    "  if (state !== undefined) el.setAttribute('data-state', state);\n"
    "}\n"
    "/* fetch has no timeout of its own: a hung server must show as unavailable,\n"
    "   not keep the page waiting forever. */\n"
    "async function getOk(path) {\n"
    "  const ac = new AbortController();\n"
    "  const timer = setTimeout(() => ac.abort(), TIMEOUT_MS);\n"
    "  try {\n"
    "    return await fetch(path, {signal: ac.signal, cache: 'no-store'});\n"
    "  } finally {\n"
    "    clearTimeout(timer);\n"
    "  }\n"
    "}\n"
    "/* Prometheus text lines 'name{k=\"v\",...} value' into [{name, labels, value}].\n"
    "   The value is after the last space: label values here hold no spaces. */\n"
    "function parseMetrics(text) {\n"
    "  const out = [];\n"
    "  for (const line of text.split('\\n')) {\n"
    "    if (line === '' || line[0] === '#') continue;\n"
    "    const sp = line.lastIndexOf(' ');\n"
    "    const key = line.slice(0, sp), brace = key.indexOf('{');\n"
    "    const labels = {};\n"
    "    if (brace >= 0)\n"
    "      for (const m of key.slice(brace).matchAll(/([a-zA-Z0-9_]+)=\"([^\"]*)\"/g)) labels[m[1]] = m[2];\n"
    "    out.push({name: brace >= 0 ? key.slice(0, brace) : key, labels, value: Number(line.slice(sp + 1))});\n"
    "  }\n"
    "  return out;\n"
    "}\n"
    "/* The sum of the series of family name whose labels include want; null when\n"
    "   the family is absent (the server renders zero request counts not at all). */\n"
    "function total(series, name, want) {\n"
    "  let sum = null;\n"
    "  for (const s of series) {\n"
    "    if (s.name !== name) continue;\n"
    "    if (sum === null) sum = 0;\n"
    "    if (Object.keys(want).every((k) => s.labels[k] === want[k])) sum += s.value;\n"
    "  }\n"
    "  return sum;\n"
    "}\n"
    "const rate = (v) => v.toFixed(1);\n"
    "const peak = (k) => Math.max(0, ...points.map((p) => p[k]));\n"
    "async function pollMetrics(now) {\n"
    "  let sample = null, fence = null;\n"
    "  try {\n"
    "    const r = await getOk('/metrics');\n"
    "    if (!r.ok) throw new Error('HTTP ' + r.status);\n"
    "    const series = parseMetrics(await r.text());\n"
    "    const ok = total(series, 'coupon_claims_total', {result: 'ok'});\n"
    "    fence = total(series, 'coupon_claims_total', {result: 'stale_fence'});\n"
    "    /* No 503 yet is no series yet: the family (other routes) may be there or not. */\n"
    "    const s503 = total(series, 'coupon_http_requests_total', {route: CLAIM_ROUTE, status: '503'}) || 0;\n"
    "    if (ok !== null && Number.isFinite(ok) && Number.isFinite(s503)) sample = {t: now, ok, s503};\n"
    "  } catch (e) { /* shown as unavailable below */ }\n"
    "  if (sample === null) {\n"
    "    for (const id of ['rate-ok', 'rate-503', 'peak-ok', 'peak-503', 'total-ok', 'total-503', 'fence-total'])\n"
    "      show(id, 'unavailable', 'unavailable');\n"
    "    last = null;\n"
    "    return false;\n"
    "  }\n"
    "  show('total-ok', String(sample.ok), 'ok');\n"
    "  show('total-503', String(sample.s503), 'ok');\n"
    "  show('fence-total', fence === null ? 'unavailable' : String(fence), fence === null ? 'unavailable' : 'ok');\n"
    "  /* A counter that went down means the server restarted: start over. */\n"
    "  if (last !== null && sample.t > last.t && sample.ok >= last.ok && sample.s503 >= last.s503) {\n"
    "    const dt = (sample.t - last.t) / 1000;\n"
    "    points.push({t: sample.t, ok: (sample.ok - last.ok) / dt, s503: (sample.s503 - last.s503) / dt});\n"
    "  }\n"
    "  last = sample;\n"
    "  points = points.filter((p) => now - p.t <= WINDOW_S * 1000);\n"
    "  const p = points[points.length - 1];\n"
    "  show('rate-ok', p ? rate(p.ok) : 'measuring', 'ok');\n"
    "  show('rate-503', p ? rate(p.s503) : 'measuring', 'ok');\n"
    "  show('peak-ok', p ? rate(peak('ok')) : 'measuring', 'ok');\n"
    "  show('peak-503', p ? rate(peak('s503')) : 'measuring', 'ok');\n"
    "  return true;\n"
    "}\n"
    "/* 1, 2, 5 times a power of ten: round axis labels. */\n"
    "function niceMax(v) {\n"
    "  const p = Math.pow(10, Math.floor(Math.log10(Math.max(v, 1))));\n"
    "  return [1, 2, 5, 10].map((m) => m * p).find((m) => m >= v);\n"
    "}\n"
    "function drawChart(now) {\n"
    "  const top = niceMax(Math.max(1, ...points.map((p) => Math.max(p.ok, p.s503))));\n"
    "  const x = (t) => (PX1 - (PX1 - PX0) * (now - t) / (WINDOW_S * 1000)).toFixed(1);\n"
    "  const y = (v) => (PY1 - (PY1 - PY0) * v / top).toFixed(1);\n"
    "  $('line-ok').setAttribute('points', points.map((p) => x(p.t) + ',' + y(p.ok)).join(' '));\n"
    "  $('line-503').setAttribute('points', points.map((p) => x(p.t) + ',' + y(p.s503)).join(' '));\n"
    "  $('y-max').textContent = String(top);\n"
    "  $('y-mid').textContent = String(top / 2);\n"
    "  const p = points[points.length - 1];\n"
    "  $('chart-summary').textContent = p\n"
    "    ? 'Last minute: claims peaked at ' + rate(peak('ok')) + '/s and 503 answers at ' + rate(peak('s503')) +\n"
    "      '/s; now ' + rate(p.ok) + ' claims/s and ' + rate(p.s503) + ' 503 answers/s.'\n"
    "    : (last ? 'Measuring: a rate needs two samples.' : 'Rates unavailable: /metrics did not answer.');\n"
    "}\n"
    "async function pollHealth() {\n"
    "  try {\n"
    "    const r = await getOk('/healthz');\n"
    "    const d = (await r.json()).data;\n"
    "    /* A 503 still carries data saying which part is down. */\n"
    "    if (!d || typeof d.nodes_up !== 'number' || typeof d.nodes !== 'number') throw new Error('no data');\n"
    "    const used = d.lock !== 'unused';\n"
    "    show('nodes-up', used ? d.nodes_up + ' of ' + d.nodes + ' up' : 'no lock nodes used',\n"
    "         !used || d.nodes_up === d.nodes ? 'ok' : d.lock === 'down' ? 'down' : 'degraded');\n"
    "    show('lock-state', String(d.lock), d.lock === 'down' ? 'down' : 'ok');\n"
    "    show('db-state', String(d.db), d.db === 'ok' ? 'ok' : 'down');\n"
    "    show('strategy', String(d.strategy));\n"
    "    const dots = document.createDocumentFragment();\n"
    "    for (let i = 0; used && i < d.nodes && i < 64; i++) {\n"
    "      const dot = document.createElement('span');\n"
    "      dot.className = i < d.nodes_up ? 'dot up' : 'dot';\n"
    "      dots.appendChild(dot);\n"
    "    }\n"
    "    $('node-dots').replaceChildren(dots);\n"
    "    return true;\n"
    "  } catch (e) {\n"
    "    for (const id of ['nodes-up', 'lock-state', 'db-state']) show(id, 'unavailable', 'unavailable');\n"
    "    show('strategy', 'unavailable');\n"
    "    $('node-dots').replaceChildren();\n"
    "    return false;\n"
    "  }\n"
    "}\n"
    "function cell(tr, cls, text) {\n"
    "  const td = document.createElement('td');\n"
    "  td.className = cls;\n"
    "  td.textContent = text;\n"
    "  tr.appendChild(td);\n"
    "  return td;\n"
    "}\n"
    "/* On failure the last table stays (it is still the latest known state);\n"
    "   the status line says it is not live. */\n"
    "async function pollCoupons() {\n"
    "  try {\n"
    "    const r = await getOk('/api/v1/coupon');\n"
    "    const j = await r.json();\n"
    "    if (!r.ok || !j || j.code !== 0 || !Array.isArray(j.data)) throw new Error('bad reply');\n"
    "    const rows = document.createDocumentFragment();\n"
    "    for (const c of j.data) {\n"
    "      const tr = document.createElement('tr');\n"
    "      if (c.stock === 0) tr.className = 'sold';\n"
    "      cell(tr, 'id', String(c.coupon_id));\n"
    "      cell(tr, 'name', String(c.name));\n"
    "      cell(tr, 'stock', String(c.stock));\n"
    "      cell(tr, 'issued', String(c.issued));\n"
    "      cell(tr, 'total', String(c.total));\n"
    "      const bar = document.createElement('progress');\n"
    "      bar.max = Math.max(1, Number(c.total));\n"
    "      bar.value = Number(c.issued);\n"
    "      bar.setAttribute('aria-label', 'coupon ' + c.coupon_id + ' sold');\n"
    "      cell(tr, 'bar', '').appendChild(bar);\n"
    "      rows.appendChild(tr);\n"
    "    }\n"
    "    const tb = $('coupons').tBodies[0];\n"
    "    tb.replaceChildren(rows);\n"
    "    tb.setAttribute('data-source', 'live');\n"
    "    return true;\n"
    "  } catch (e) {\n"
    "    return false;\n"
    "  }\n"
    "}\n"
    "/* One poll at a time: the next starts a second after this one ends, so a\n"
    "   slow server is never sent a growing pile of requests. */\n"
    "async function tick() {\n"
    "  try {\n"
    "    const now = performance.now();\n"
    "    const [c, m, h] = await Promise.all([pollCoupons(), pollMetrics(now), pollHealth()]);\n"
    "    drawChart(now);\n"
    "    const down = [c ? '' : 'coupons', m ? '' : 'metrics', h ? '' : 'health'].filter(Boolean);\n"
    "    show('status', down.length ? 'Unavailable: ' + down.join(', ') + '.' : 'Live.',\n"
    "         down.length ? 'unavailable' : 'ok');\n"
    "    show('last-poll', 'Last poll ' + new Date().toLocaleTimeString() + '.');\n"
    "  } finally {\n"
    "    /* Whatever failed above, the page keeps polling. */\n"
    "    setTimeout(tick, POLL_MS);\n"
    "  }\n"
    "}\n"
    "tick();\n"
    "</script>\n</body>\n</html>\n";

/* Writes s with & < > " ' replaced by their HTML entities: coupon names come
 * from admins and must show as text, never as markup. */
static void put_html_escaped(FILE *f, const char *s)
{
    for (; *s != '\0'; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f); break;
        }
    }
}

int route_page(request *rq)
{
    db_coupon *list = NULL;
    size_t n = 0, len = 0;
    char *html = NULL;
    /* open_memstream: the page grows in one malloc'd buffer that the stream
     * owns until fclose, then we do; a write error is seen once, at the end. */
    FILE *f = open_memstream(&html, &len);
    if (f == NULL)
        return reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "out of memory");

    fputs(PAGE_HEAD, f);
    /* A failing store still gets the page: the health part then says what
     * is down, and the script fills the table once the store answers. */
    if (db_list_coupons(rq->w->db, &list, &n) != DB_OK) {
        n = 0;
        fputs("<tr><td colspan='6' class='name'>Coupons unavailable: the database did not "
              "answer.</td></tr>\n",
              f);
    }
    for (size_t i = 0; i < n; i++) {
        const db_coupon *c = &list[i];
        fprintf(f, "<tr%s><td class='id'>%lld</td><td class='name'>", c->stock == 0 ? " class='sold'" : "",
                (long long)c->id);
        put_html_escaped(f, c->name);
        fprintf(f,
                "</td><td class='stock'>%lld</td><td class='issued'>%lld</td><td class='total'>%lld</td>"
                "<td class='bar'><progress max='%lld' value='%lld' aria-label='coupon %lld sold'>"
                "</progress></td></tr>\n",
                (long long)c->stock, (long long)c->issued, (long long)c->total,
                (long long)(c->total > 0 ? c->total : 1), (long long)c->issued, (long long)c->id);
    }
    fputs(PAGE_MIDDLE, f);
    fputs(PAGE_SCRIPT, f);
    int failed = ferror(f);
    free(list);
    /* fclose publishes html and len; from here html is ours (free it, or hand
     * it to reply_text, which takes it on every path). */
    if (fclose(f) != 0 || failed) {
        free(html);
        return reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "out of memory");
    }
    return reply_text(rq, MHD_HTTP_OK, "text/html; charset=utf-8", html, len);
}
