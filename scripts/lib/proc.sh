# scripts/lib/proc.sh - the processes a script starts itself and stops by
# PID only, never by name: starting one in its own session, asking whether
# it still runs, stopping it within a bound. Sourced by scripts/lib/sale.sh
# (demo, trial, chaos, hosts, bundles and the sale benches) and by
# bench/lib/redis_nodes.sh (run-bench.sh, peers.sh, sick-minority.sh).
# The caller may define say (verbose notes); nothing else is needed.
# shellcheck shell=bash

# Running, and not a zombie. `kill -0` also succeeds on a zombie: a process
# that has exited stays in /proc in state Z until its parent reaps it. So a
# loop that waits with `kill -0` for a stopped server to go would wait out
# its whole bound, and one that watches a starting server would not see it
# die. The state is the field after the command, which may hold spaces and
# parentheses: hence everything after the last ") ".
proc_alive() { # pid
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  [ "${stat%% *}" != Z ]
}

# Stops one process this script started, by its PID: SIGCONT first (a
# paused one, SIGSTOPped by a fault, takes no SIGTERM until resumed), then
# SIGTERM, up to 5 s for it to finish, then SIGKILL; reaps it when it is our
# child. Returns 0 whether or not it was still running.
stop_pid() { # pid
  local pid="$1" i
  kill -CONT "$pid" 2>/dev/null || true
  if kill -TERM "$pid" 2>/dev/null; then
    for ((i = 0; i < 100; i++)); do
      proc_alive "$pid" || break
      sleep 0.05
    done
    if proc_alive "$pid"; then
      if declare -F say >/dev/null; then say "pid $pid ignored SIGTERM for 5 s; killing it"; fi
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
}

# Starts a background process in its own session: a Ctrl-C at the terminal
# then reaches the script (and a load tester, which stops and still audits)
# but not the servers, which must stay up for that audit; the script's EXIT
# trap stops them afterwards. setsid does not fork here (a background job
# of a script is no group leader), so $! is the command's own PID.
spawn() { # command [args...]
  if command -v setsid >/dev/null; then
    setsid "$@" &
  else
    "$@" &
  fi
}

# Something accepts connections on the loopback port (bash's /dev/tcp, no
# extra tools).
port_in_use() { # port
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
