# bench/lib/measure.sh - what the bench scripts measure and compute alike:
# their integer options, the CPU time of their processes, the servers'
# per-stage counters, the JSON lines the programs and the scripts print,
# the Lua scripts the Redis masters ran, and the medians and ratios of the
# tables. Sourced after the script defines die(); the stage totals go into
# the caller's associative arrays stage_s and stage_n, scrape_stages reads
# the caller's server_urls and script_calls its redis_ports.
# shellcheck shell=bash

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

# The scripts every master has run so far, summed: the calls of EVALSHA,
# EVAL and their _RO forms, and FCALL (libdlock sends EVALSHA, falling back
# to EVAL on NOSCRIPT: lock/src/script.c), from INFO commandstats.
script_calls() { # -> the sum over the masters of redis_ports
  local port fd hdr body n sum=0
  for port in "${redis_ports[@]}"; do
    exec {fd}<>"/dev/tcp/127.0.0.1/$port" || die "cannot connect to redis-server 127.0.0.1:$port"
    printf 'INFO commandstats\r\n' >&"$fd" || die "cannot send INFO to redis-server 127.0.0.1:$port"
    IFS= read -r -t 5 hdr <&"$fd" || die "no INFO reply from redis-server 127.0.0.1:$port"
    hdr="${hdr%$'\r'}"
    [[ "$hdr" =~ ^\$([0-9]+)$ ]] || die "INFO commandstats on 127.0.0.1:$port answered '$hdr'"
    n="${BASH_REMATCH[1]}"
    # The bulk reply is ASCII: its n bytes are n characters.
    IFS= read -r -t 5 -N "$n" body <&"$fd" || die "INFO reply of redis-server 127.0.0.1:$port cut short"
    exec {fd}>&-
    n="$(awk -F '[:,=]' '/^cmdstat_(eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro):/ {
        for (i = 2; i < NF; i += 2) if ($i == "calls") s += $(i + 1) } END { print s + 0 }' <<<"$body")"
    sum=$((sum + n))
  done
  echo "$sum"
}

# JSON lines: the programs' own (dlock-bench, the peer drivers) and the
# flat ones the bench scripts write with --json. Flat objects only: a key's
# first occurrence in the line is its value.

jget() { # json key -> its value: a number, true/false/null, or a string's text ('' when absent)
  local v
  v="$(sed -n "s/.*\"$2\":\(null\|true\|false\|-\{0,1\}[0-9][0-9.eE+-]*\).*/\1/p" <<<"$1")"
  [ -n "$v" ] || v="$(sed -n "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p" <<<"$1")"
  printf '%s\n' "$v"
}

jsel() { # file key match... -> key's value on each line holding every match string, in file order
  local file="$1" key="$2" line m
  shift 2
  while IFS= read -r line; do
    for m in "$@"; do [[ "$line" == *"$m"* ]] || continue 2; done
    jget "$line" "$key"
  done <"$file"
}

json_line() { # key value ... -> one flat JSON object; a value that is a number stays one
  local out="" k v
  while [ $# -ge 2 ]; do
    k="$1" v="$2"
    shift 2
    if ! [[ "$v" =~ ^-?[0-9]+(\.[0-9]+)?$ ]]; then
      v="${v//\\/\\\\}" v="${v//\"/\\\"}" v="\"$v\""
    fi
    out+="${out:+,}\"$k\":$v"
  done
  printf '{%s}\n' "$out"
}

# Statistics of a list of numbers (arguments; null, '' and '-' left out).

median() { # numbers... -> the median (the mean of the middle two for an even count), or null
  printf '%s\n' "$@" | grep -E '^-?[0-9]' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) print "null"; else if (NR % 2) print v[(NR + 1) / 2] + 0;
                              else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

ratio() { # a b [suffix] -> a / b to 2 decimals, then suffix ("x"); '-' when either is missing or b is 0
  awk -v a="$1" -v b="$2" -v x="${3:-}" 'BEGIN {
    if (a ~ /^-?[0-9]/ && b ~ /^-?[0-9]/ && b + 0 != 0) printf "%.2f%s\n", a / b, x; else print "-" }'
}

ratios() { # "a1 a2 ..." "b1 b2 ..." -> a1/b1, a2/b2, ...: the ratio within each round, comma-separated
  local -a num den
  local i out=""
  read -r -a num <<<"$1"
  read -r -a den <<<"$2"
  for ((i = 0; i < ${#num[@]} && i < ${#den[@]}; i++)); do out+="${out:+, }$(ratio "${num[i]}" "${den[i]}")"; done
  printf '%s\n' "${out:--}"
}

grouped() { # number -> rounded to an integer, thousands apart by a space (17 079), or '-'
  awk -v n="$1" 'BEGIN { if (n !~ /^-?[0-9]/) { print "-"; exit }
    s = sprintf("%.0f", n); out = ""
    while (length(s) > 3) { out = " " substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }
    print s out }'
}
