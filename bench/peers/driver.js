#!/usr/bin/env node
// driver.js - dlock-bench's run for a Node peer lock (node-redlock or
// redis-semaphore, --client): the same flags, the same loops, the same JSON
// line (bench/main.c print_json), so that bench/peers.sh can set a peer's
// line beside libdlock's. --workers async workers share this one process;
// each has its own ioredis connection per node, plus one data connection
// to the first node in contended mode.
'use strict';

const Redis = require('ioredis');
const { parseArgs, UsageError, USAGE } = require('./args');
const { makeLock, isContention } = require('./locks');
const { Samples, mergeSorted, quantile } = require('./samples');

const HOST = '127.0.0.1';
const COUNTER_KEY = 'bench:counter';
const SHARED_KEY = 'bench:lock';
const CONNECT_TIMEOUT_MS = 2000;
const WARM_UP_TRIES = 5;

// Nanoseconds on the monotonic clock, from this process's start (a Number
// stays exact that way; the raw bigint would not fit in 2^53 after 104 days up).
const T_BASE = process.hrtime.bigint();
const nowNs = () => Number(process.hrtime.bigint() - T_BASE);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function die(msg) {
  process.stderr.write(`peer-driver: ${msg}\n`);
  process.exit(1);
}

// A connection at ioredis's defaults but for the connect timeout; every
// error it emits is kept for the diagnostics line (an 'error' event nobody
// listens to would only be printed by ioredis).
async function connect(port, run) {
  const c = new Redis({ host: HOST, port, lazyConnect: true, connectTimeout: CONNECT_TIMEOUT_MS });
  let why = null;
  c.on('error', (err) => {
    why = err;
    run.note(`connection ${HOST}:${port}: ${err.message}`);
  });
  try {
    await c.connect();
  } catch (err) {
    // Otherwise ioredis keeps reconnecting in the background.
    c.disconnect();
    // connect() only says "Connection is closed"; the error event says why.
    throw new Error(`${HOST}:${port}: ${(why || err).message}`);
  }
  return c;
}

// Counts the commands sent on c (lock_rt_per_success); ioredis sends every
// command, scripts included, through sendCommand.
function countCommands(c, w) {
  const send = c.sendCommand.bind(c);
  c.sendCommand = (cmd, stream) => {
    w.lockCmds++;
    return send(cmd, stream);
  };
}

// The counter as an integer (nil = 0); throws on anything else.
function counterValue(reply) {
  if (reply === null) return 0;
  if (!/^-?[0-9]+$/.test(reply)) throw new Error(`counter: not an integer: '${String(reply).slice(0, 40)}'`);
  return Number(reply);
}

// Connections, the lock, and one acquisition + release of the worker's own
// key: every node connected and every script loaded before the clock
// starts, as dlock-bench's warm-up does.
async function setUp(w, run) {
  const cfg = run.cfg;
  w.conns = await Promise.all(cfg.ports.map((p) => connect(p, run)));
  w.conns.forEach((c) => countCommands(c, w));
  if (cfg.mode === 'contended') w.data = await connect(cfg.ports[0], run);
  w.lock = makeLock(cfg.client, w.conns, cfg.ttlMs, (err) => run.note(err.message));
  w.key = cfg.mode === 'contended' ? SHARED_KEY : `bench:lock:${w.id}`;
  let last = null;
  for (let i = 0; i < WARM_UP_TRIES; i++) {
    try {
      const held = await w.lock.acquire(`bench:lock:${w.id}`);
      await w.lock.release(held);
      return;
    } catch (err) {
      // A leftover key from an earlier run is not a reason to stop; a node
      // that keeps failing is.
      if (isContention(err)) return;
      last = err;
      await sleep(20);
    }
  }
  throw new Error(`worker ${w.id}: warm-up: ${last.message}`);
}

// The contended section: GET, hold, SET is deliberately not atomic, so only
// the lock keeps two workers from reading the same value and every overlap
// shows as a lost increment. `inside` (one event loop, so a plain number)
// catches overlaps whose increments happen to interleave harmlessly.
async function section(w, run) {
  if (run.inside++ !== 0) run.overlaps++;
  try {
    const v = counterValue(await w.data.get(COUNTER_KEY));
    if (run.cfg.holdMs > 0) await sleep(run.cfg.holdMs);
    await w.data.set(COUNTER_KEY, String(v + 1));
  } finally {
    // Leave before release: the next holder can only enter after our release.
    run.inside--;
  }
}

async function loop(w, run) {
  const cfg = run.cfg;
  for (;;) {
    const t0 = nowNs();
    if (t0 >= run.endNs) break;
    let held;
    try {
      held = await w.lock.acquire(w.key);
    } catch (err) {
      // A waiter the end cut off is not a failure (dlock-bench caps its wait
      // at the end of the run and does not count it either).
      if (isContention(err) && nowNs() >= run.endNs) break;
      w.failures++;
      if (!isContention(err)) run.note(`acquire: ${err.message}`);
      continue;
    }
    const t1 = nowNs();
    if (t1 >= run.endNs) {
      // Granted after the end, where dlock-bench's capped wait would have
      // given up: not counted, and the section not run.
      await w.lock.release(held).catch(() => {});
      break;
    }
    if (cfg.mode === 'contended') await section(w, run);
    else if (cfg.holdMs > 0) await sleep(cfg.holdMs);
    try {
      await w.lock.release(held);
    } catch (err) {
      w.releaseFailures++;
      run.note(`release: ${err.message}`);
    }
    const t2 = nowNs();
    w.successes++;
    w.acq.add((t1 - t0) / 1000);
    w.cycle.add((t2 - t0) / 1000);
    w.lastEndNs = t2;
  }
}

function ms(us) {
  return us === null ? 'null' : (us / 1000).toFixed(3);
}

// The JSON line: bench/main.c's keys in its order.
function jsonLine(run, t) {
  const cfg = run.cfg;
  const acq = mergeSorted(run.workers.map((w) => w.acq));
  const cycle = mergeSorted(run.workers.map((w) => w.cycle));
  const parts = [
    `"driver":"node","lib":"${cfg.client}","mode":"${cfg.mode}","retry":"default"`,
    `"redis_nodes":${cfg.ports.length},"workers":${cfg.workers},"hold_ms":${cfg.holdMs},"ttl_ms":${cfg.ttlMs}`,
    `"duration_s":${cfg.durationS},"elapsed_s":${t.elapsedS.toFixed(3)}`,
    `"successes":${t.successes},"ops_per_s":${(t.elapsedS > 0 ? t.successes / t.elapsedS : 0).toFixed(1)}`,
    `"acquire_failures":${t.failures},"counter":${t.counter},"violations":${t.violations}`,
    `"acq_p50_ms":${ms(quantile(acq, 0.5))},"acq_p99_ms":${ms(quantile(acq, 0.99))}`,
    `"acq_max_ms":${ms(quantile(acq, 1))}`,
    `"cycle_p50_ms":${ms(quantile(cycle, 0.5))},"cycle_p99_ms":${ms(quantile(cycle, 0.99))}`,
    // Commands on the lock connections over the nodes: one round to every
    // node counts one, as dlock_client_stats counts a round.
    `"lock_rt_per_success":${t.successes === 0 ? 'null' : (t.lockCmds / cfg.ports.length / t.successes).toFixed(3)}`,
    `"per_worker_min":${t.pwMin},"per_worker_max":${t.pwMax}`,
    // Beyond dlock-bench's keys: this process's CPU over the measured loops
    // (without Node's start-up, which is not the peer's cost per lock).
    `"cpu_s":${t.cpuS.toFixed(3)}`,
  ];
  return `{${parts.join(',')}}\n`;
}

async function main() {
  let cfg;
  try {
    cfg = parseArgs(process.argv.slice(2));
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`peer-driver: ${err.message}\n`);
    process.exit(2);
  }
  if (cfg === null) {
    process.stdout.write(USAGE);
    return 0;
  }
  // The one bound on the whole run: connects, the longest wait a peer may
  // still be in at the end (node-redlock: 11 tries of up to 300 ms), exit.
  const limitMs = cfg.durationS * 1000 + Math.max(10 * cfg.ttlMs, 10000) + 30000;
  setTimeout(() => die(`the run did not finish within ${limitMs} ms`), limitMs).unref();

  const notes = new Map();
  const run = {
    cfg, inside: 0, overlaps: 0, startNs: 0, endNs: 0, workers: [],
    note: (what) => notes.set(what, (notes.get(what) || 0) + 1),
  };
  for (let i = 0; i < cfg.workers; i++)
    run.workers.push({ id: i, successes: 0, failures: 0, releaseFailures: 0, lockCmds: 0, lastEndNs: 0,
                       acq: new Samples(), cycle: new Samples(), conns: [], data: null });

  const admin = await connect(cfg.ports[0], run);
  // A leftover counter from an earlier run would read as lost updates.
  if (cfg.mode === 'contended') await admin.del(COUNTER_KEY);
  // allSettled: every worker is connected or has failed before anything is
  // closed, so that no connect is left running behind an early exit.
  const setUps = await Promise.allSettled(run.workers.map((w) => setUp(w, run)));
  const failed = setUps.find((s) => s.status === 'rejected');
  if (failed) die(failed.reason.message);
  const cmds0 = run.workers.map((w) => w.lockCmds);

  // The start gate: every worker set up; the end is fixed from here.
  run.startNs = nowNs();
  run.endNs = run.startNs + Math.round(cfg.durationS * 1e9);
  const cpu0 = process.cpuUsage();
  await Promise.all(run.workers.map((w) => loop(w, run)));
  const cpu = process.cpuUsage(cpu0);

  const t = { successes: 0, failures: 0, lockCmds: 0, pwMin: Infinity, pwMax: 0, counter: 0, violations: 0,
              cpuS: (cpu.user + cpu.system) / 1e6 };
  let lastEnd = run.endNs;
  run.workers.forEach((w, i) => {
    t.successes += w.successes;
    t.failures += w.failures;
    t.lockCmds += w.lockCmds - cmds0[i];
    t.pwMin = Math.min(t.pwMin, w.successes);
    t.pwMax = Math.max(t.pwMax, w.successes);
    lastEnd = Math.max(lastEnd, w.lastEndNs);
  });
  t.elapsedS = (lastEnd - run.startNs) / 1e9;
  if (cfg.mode === 'contended') {
    t.counter = counterValue(await admin.get(COUNTER_KEY));
    // Lost updates and observed overlaps are two views of the same
    // violations; the larger is a lower bound on how many happened.
    t.violations = Math.max(Math.abs(t.counter - t.successes), run.overlaps);
  }
  const releaseFailures = run.workers.reduce((a, w) => a + w.releaseFailures, 0);
  if (releaseFailures > 0)
    process.stderr.write(`peer-driver: ${releaseFailures} releases failed (lock lost, or nodes failing)\n`);
  for (const [what, n] of notes) process.stderr.write(`peer-driver: ${n} x ${what}\n`);

  for (const w of run.workers) {
    for (const c of w.conns) c.disconnect();
    if (w.data) w.data.disconnect();
  }
  admin.disconnect();
  const line = jsonLine(run, t);
  await new Promise((resolve, reject) => process.stdout.write(line, (err) => (err ? reject(err) : resolve())));
  return t.violations > 0 ? 1 : 0;
}

// An error thrown where nothing awaits it (a peer's timer, an event) ends
// the run with its message rather than a hang or a half-written line.
process.on('uncaughtException', (err) => die(`uncaught: ${err.stack || err}`));
process.on('unhandledRejection', (err) => die(`unhandled rejection: ${(err && err.stack) || err}`));

main().then(
  (status) => process.exit(status),
  (err) => die(err.message),
);
