/* stock_view.h - the sold-out fast path's knowledge of each coupon's stock,
 * kept in this process so that a claim does not pay a store round trip
 * (db_peek_stock) before the lock.
 *
 * Fed for free by what the claims learn (the stock left after a section, an
 * atomic claim or a bundle, and a coupon's creation). A peek only when
 * nothing fresh is known, and then one per coupon at a time: the requests
 * that ask meanwhile wait for its answer (single flight).
 *
 * What it may answer, and why (docs/stock-view.md):
 *   - sold out: stock 0 is final when this process's claims and bundles can
 *     only lower a stock (atomic-sql; a lock strategy fenced on the read and
 *     the write, --fence full), because nothing in the contract raises one
 *     (no restock, no delete; ids are never reused). Otherwise (none, the
 *     seeds' recipes, --fence off|write, which can write back a stale
 *     higher stock) a 0 is trusted only while fresh (--stock-view-ms).
 *   - not found: never from what is stored. A coupon can appear at any time
 *     (POST /api/v1/admin/coupon here or on another server), so "not found"
 *     comes only from a peek that started after the request arrived.
 *   - anything else: go on to the strategy. A stale positive is harmless:
 *     the strategy re-checks the stock inside its transaction.
 *
 * Memory: a fixed table of STOCK_VIEW_SETS x STOCK_VIEW_WAYS entries
 * (set-associative; a new coupon replaces its set's least recently used
 * entry that has no peek in flight); nothing is allocated. Thread-safe:
 * one mutex per stripe of sets. */
#ifndef APP_STOCK_VIEW_H
#define APP_STOCK_VIEW_H

#include <stdint.h>

#include "coupon_db.h"

#define STOCK_VIEW_SETS 1024
#define STOCK_VIEW_WAYS 4

typedef enum stock_answer {
    STOCK_GO_ON = 0,    /* in stock as far as is known, or the peek failed: the strategy decides */
    STOCK_SOLD_OUT = 1, /* 409 / 1003 before the lock */
    STOCK_NOT_FOUND = 2 /* 404 / 1002 before the lock */
} stock_answer;

/* Once at start-up, before any thread.
 *   fresh_ms: how long what is known of a coupon spares a peek (0: no
 *     view, every question peeks);
 *   monotone: nonzero when no claim or bundle of this process can raise a
 *     stock (see above);
 *   peek_ms: the longest one peek may take (the store's statement bound),
 *     which bounds how long a request waits for another's.
 * 0, or -1 if the clock cannot be set up. */
int stock_view_setup(int fresh_ms, int monotone, int peek_ms);

/* The fast path's question for coupon_id, on an HTTP thread; db is that
 * thread's store, used for the peek when this request leads one. */
stock_answer stock_view_ask(db_store *db, int64_t coupon_id);

/* The stock of coupon_id as a committed claim, bundle or creation left it
 * (or a read that found it 0). Any thread. */
void stock_view_learn(int64_t coupon_id, int64_t stock);

#endif /* APP_STOCK_VIEW_H */
