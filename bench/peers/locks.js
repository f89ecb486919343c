// locks.js - one worker's lock, whichever peer it is: acquire(key) resolves
// to a held lock or rejects when the peer gave up; release(held) gives it
// back. Each peer is used as its README shows, at its defaults except the
// TTL (and, for redis-semaphore, the wait, which dlock-bench bounds by the
// TTL too).
'use strict';

const Redlock = require('redlock').default;
const { ResourceLockedError, ExecutionError } = require('redlock');
const { Mutex, RedlockMutex, TimeoutError } = require('redis-semaphore');

// Whether err is the peer saying "the lock is taken" (a counted acquire
// failure) rather than something going wrong (also counted, and named on stderr).
function isContention(err) {
  return err instanceof ExecutionError || err instanceof ResourceLockedError || err instanceof TimeoutError;
}

// conns: this worker's lock connections, one per node. onError(err) hears
// every error that is not contention.
function nodeRedlock(conns, ttlMs, onError) {
  // Defaults: retryCount 10, retryDelay 200, retryJitter 100, driftFactor 0.01.
  const redlock = new Redlock(conns);
  // Redlock emits every vote against (ResourceLockedError) as an 'error'
  // event; without a listener the first busy lock would throw.
  redlock.on('error', (err) => {
    if (!(err instanceof ResourceLockedError)) onError(err);
  });
  return {
    acquire: (key) => redlock.acquire([key], ttlMs),
    release: (lock) => lock.release(),
  };
}

function redisSemaphore(conns, ttlMs) {
  const opts = { lockTimeout: ttlMs, acquireTimeout: ttlMs };
  return {
    // A new mutex per acquisition: each holder has its own identifier, as
    // each libdlock acquisition has its own token.
    acquire: async (key) => {
      const m = conns.length === 1 ? new Mutex(conns[0], key, opts) : new RedlockMutex(conns, key, opts);
      await m.acquire();
      return m;
    },
    release: (m) => m.release(),
  };
}

// No lock at all: the same section unguarded, so that a run shows what the
// counter and overlap checks report when mutual exclusion is missing.
function noLock() {
  return {
    acquire: async () => ({}),
    release: async () => {},
  };
}

function makeLock(client, conns, ttlMs, onError) {
  switch (client) {
    case 'node-redlock': return nodeRedlock(conns, ttlMs, onError);
    case 'redis-semaphore': return redisSemaphore(conns, ttlMs);
    case 'none': return noLock();
    default: throw new Error(`unknown client '${client}'`);
  }
}

module.exports = { makeLock, isContention };
