# bench/lib/measure.sh - what the end-to-end bench scripts measure alike:
# their integer options, the CPU time of their processes, and the servers'
# per-stage counters. Sourced after the script defines die(); the stage
# totals go into the caller's associative arrays stage_s and stage_n, and
# scrape_stages reads the caller's server_urls.

need_int() { # name value min max
  if ! [[ "$2" =~ ^[0-9]+$ ]] || [ "$2" -lt "$3" ] || [ "$2" -gt "$4" ]; then
    die "$1: '$2' is not an integer in $3..$4"
  fi
}

cpu_ticks() { # pids... -> their utime + stime so far, in clock ticks
  local pid stat sum=0 f
  for pid in "$@"; do
    stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
    # Fields after the command (which may hold spaces): state is field 3, utime 14, stime 15.
    read -r -a f <<<"${stat##*) }"
    sum=$((sum + f[11] + f[12]))
  done
  echo "$sum"
}

# Adds every server's stage counters (and lock retries, as "retries") to
# the totals of key: stage_s[key:stage] seconds, stage_n[key:stage] passes.
scrape_stages() { # key
  local url text k val
  for url in "${server_urls[@]}"; do
    text="$(curl -sS -m 10 --noproxy '*' "$url/metrics")" || die "cannot read $url/metrics"
    while read -r k val; do
      case "$k" in
        s:*) stage_s["$1:${k#s:}"]="$(awk -v a="${stage_s["$1:${k#s:}"]:-0}" -v b="$val" 'BEGIN{printf "%.6f", a + b}')" ;;
        n:*) stage_n["$1:${k#n:}"]=$(( ${stage_n["$1:${k#n:}"]:-0} + val )) ;;
      esac
    done < <(printf '%s\n' "$text" | awk '
      /^coupon_claim_stage_seconds_total\{/ { match($0, /stage="[a-z_]+"/); print "s:" substr($0, RSTART + 7, RLENGTH - 8), $2 }
      /^coupon_claim_stage_observations_total\{/ { match($0, /stage="[a-z_]+"/); print "n:" substr($0, RSTART + 7, RLENGTH - 8), $2 }
      /^coupon_lock_retries_total / { print "n:retries", $2 }
')
  done
}
