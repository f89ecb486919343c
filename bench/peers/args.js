// args.js - the peer driver's command line: dlock-bench's flags (bench/args.c)
// plus --client, the same ranges and checks, and its usage text.
'use strict';

const CLIENTS = ['node-redlock', 'redis-semaphore', 'none'];
const MODES = ['uncontended', 'contended'];
// bench/bench.h's limits, so that a row dlock-bench refuses is refused here too.
const MAX_WORKERS = 1024;
const MAX_DURATION_S = 86400;
const MAX_MS = 3600000;
const MAX_NODES = 16;

const USAGE = `usage: node driver.js --client node-redlock|redis-semaphore|none --ports P[,P...]
                      [--workers N] [--duration S] [--hold MS]
                      [--mode uncontended|contended] [--ttl MS]
       node driver.js -h|--help

  --client    node-redlock: redlock 5.0.0-beta.2 at its defaults (retryCount 10,
              retryDelay 200, retryJitter 100, driftFactor 0.01);
              redis-semaphore: 5.8.0, Mutex on one node, RedlockMutex on several,
              lockTimeout = acquireTimeout = --ttl, defaults otherwise;
              none: no lock at all (shows that the counter check catches overlaps)
  --ports     Redis ports on 127.0.0.1; one = single instance, several = Redlock
  --workers   async workers in this one process, each with its own connection
              per node (1..${MAX_WORKERS}, default 1)
  --duration  seconds to run (> 0, default 5)
  --hold      ms spent inside the lock per cycle (default 0)
  --mode      uncontended: worker i locks bench:lock:<i>;
              contended: all workers fight for bench:lock and increment
              bench:counter with a non-atomic GET/SET inside it (counter must
              equal successes)
  --ttl       lock TTL in ms (default 2000); must be larger than --hold

Prints one JSON line with dlock-bench's keys. Exit 0: run done, no violation;
1: violations or Redis error; 2: usage error.
`;

class UsageError extends Error {}

// An integer in lo..hi written in plain decimal ("08" and "1e3" are refused,
// as common/'s cm_parse_int refuses them).
function intIn(name, s, lo, hi) {
  if (!/^-?(0|[1-9][0-9]*)$/.test(s)) throw new UsageError(`--${name}: '${s}' is not an integer`);
  const v = Number(s);
  if (v < lo || v > hi) throw new UsageError(`--${name}: ${v} is not in ${lo}..${hi}`);
  return v;
}

function parsePorts(s) {
  // split, not a regex match: "6400,,6401" must be an error, not two ports.
  const ports = s.split(',').map((p) => {
    if (!/^[1-9][0-9]*$/.test(p) || Number(p) > 65535)
      throw new UsageError(`--ports: '${p}' is not an integer in 1..65535`);
    return Number(p);
  });
  if (ports.length > MAX_NODES) throw new UsageError(`--ports: at most ${MAX_NODES} ports`);
  // The same node twice would count one vote twice: a fake quorum.
  const seen = new Set();
  for (const p of ports) {
    if (seen.has(p)) throw new UsageError(`--ports: port ${p} given twice`);
    seen.add(p);
  }
  return ports;
}

function oneOf(name, s, list) {
  if (!list.includes(s)) throw new UsageError(`--${name}: expected ${list.join(', ')}, got '${s}'`);
  return s;
}

// argv without node and the script. Returns the config, or null after --help;
// throws UsageError.
function parseArgs(argv) {
  const cfg = { client: null, ports: null, workers: 1, durationS: 5, holdMs: 0, mode: 'uncontended', ttlMs: 2000 };
  for (let i = 0; i < argv.length; i++) {
    let flag = argv[i];
    let value = null;
    if (flag === '-h' || flag === '--help') return null;
    const eq = flag.indexOf('=');
    if (flag.startsWith('--') && eq > 0) {
      value = flag.slice(eq + 1);
      flag = flag.slice(0, eq);
    }
    if (!flag.startsWith('--')) throw new UsageError(`unexpected argument '${flag}'`);
    if (value === null) {
      if (i + 1 >= argv.length) throw new UsageError(`${flag} needs a value`);
      value = argv[++i];
    }
    switch (flag) {
      case '--client': cfg.client = oneOf('client', value, CLIENTS); break;
      case '--ports': cfg.ports = parsePorts(value); break;
      case '--workers': cfg.workers = intIn('workers', value, 1, MAX_WORKERS); break;
      case '--duration': {
        const d = Number(value);
        if (value.trim() === '' || !Number.isFinite(d) || d <= 0 || d > MAX_DURATION_S)
          throw new UsageError(`--duration: '${value}' is not a number in (0, ${MAX_DURATION_S}]`);
        cfg.durationS = d;
        break;
      }
      case '--hold': cfg.holdMs = intIn('hold', value, 0, MAX_MS); break;
      case '--mode': cfg.mode = oneOf('mode', value, MODES); break;
      case '--ttl': cfg.ttlMs = intIn('ttl', value, 1, MAX_MS); break;
      default: throw new UsageError(`unknown option ${flag}`);
    }
  }
  if (cfg.client === null) throw new UsageError('--client is required');
  if (cfg.ports === null) throw new UsageError('--ports is required');
  // A hold as long as the TTL lets the lock expire while the holder is still
  // inside: the run would measure an unsafe configuration (as dlock-bench says).
  if (cfg.holdMs >= cfg.ttlMs)
    throw new UsageError(`--ttl (${cfg.ttlMs} ms) must be larger than --hold (${cfg.holdMs} ms)`);
  return cfg;
}

module.exports = { parseArgs, UsageError, USAGE };
