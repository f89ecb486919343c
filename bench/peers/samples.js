// samples.js - latency samples in whole microseconds and their nearest-rank
// quantiles, the definition common/'s histogram uses (hist.c bucket_at), on
// the exact samples instead of buckets.
'use strict';

class Samples {
  constructor() {
    this.buf = new Float64Array(1024);
    this.n = 0;
  }

  // us: a duration in microseconds, floored as dlock-bench floors ns / 1000.
  add(us) {
    if (this.n === this.buf.length) {
      const bigger = new Float64Array(this.buf.length * 2);
      bigger.set(this.buf);
      this.buf = bigger;
    }
    this.buf[this.n++] = Math.floor(us);
  }
}

// Every worker's samples in one sorted array.
function mergeSorted(list) {
  let total = 0;
  for (const s of list) total += s.n;
  const all = new Float64Array(total);
  let at = 0;
  for (const s of list) {
    all.set(s.buf.subarray(0, s.n), at);
    at += s.n;
  }
  // A typed array sorts numerically (a plain array would sort as strings).
  return all.sort();
}

// The ceil(q*n)-th smallest (1-based) of sorted, or null when there is none.
function quantile(sorted, q) {
  if (sorted.length === 0) return null;
  if (q >= 1) return sorted[sorted.length - 1];
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[rank - 1];
}

module.exports = { Samples, mergeSorted, quantile };
