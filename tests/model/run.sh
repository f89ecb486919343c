#!/usr/bin/env bash
# run.sh - one SPIN run of a model in tests/model/ (docs/model.md): builds
# the verifier with the given -D options in a fresh temporary directory,
# runs it, and checks the verdict.
#
# usage: tests/model/run.sh MODEL.pml pass|fail [-DNAME ...] [--live] [--why TEXT]
#   pass: the exhaustive search must finish with no error.
#   fail: SPIN must find a counterexample (a mutant, or a run without an
#         assumption of docs/redlock.md); its trail is replayed and the
#         violated property printed. A run that fails to finish (out of
#         memory, depth) is neither: it fails the test.
#   --live: check the model's ltl property (acceptance cycles under weak
#           fairness) instead of assertions and end states.
#   --why TEXT: with fail, the counterexample must violate the property
#           whose SPIN message contains TEXT (e.g. the assertion's text).
# Exit status 0 iff the verdict is the expected one; 2 on usage errors.
set -Eeuo pipefail

die() { echo "run.sh: $*" >&2; exit 2; }
[ $# -ge 2 ] || die "usage: run.sh MODEL.pml pass|fail [-DNAME ...] [--live]"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
model="$1" want="$2"
shift 2
case "$want" in pass|fail) ;; *) die "expected pass or fail, not $want" ;; esac
[ -f "$here/$model" ] || die "no model $model in tests/model"
command -v spin >/dev/null || die "spin is not installed (./scripts/setup.sh installs it)"
command -v cc >/dev/null || die "no C compiler"

defs=() live=0 whyre=""
while [ $# -gt 0 ]; do
  case "$1" in
    -D*) defs+=("$1") ;;
    --live) live=1 ;;
    --why) [ $# -ge 2 ] || die "--why needs a text"; whyre="$2"; shift ;;
    *) die "unknown option $1" ;;
  esac
  shift
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$here"/*.pml "$work/"
cd "$work"
spin -a "${defs[@]}" "$model" >spin.out 2>&1 || { cat spin.out >&2; die "spin -a failed"; }
# The verifier's own limits: 3 GB of state, a search depth no run here
# comes near; COLLAPSE compresses state vectors (exhaustive, unlike
# bitstate hashing, which could miss states).
if [ "$live" = 1 ]; then
  cc -O2 -w -DCOLLAPSE -DMEMLIM=3000 -DNFAIR=3 -o pan pan.c
  flags=(-a -f -m500000)
else
  cc -O2 -w -DSAFETY -DCOLLAPSE -DMEMLIM=3000 -o pan pan.c
  flags=(-m500000)
fi
start=$(date +%s)
./pan "${flags[@]}" >pan.out 2>&1 || true
secs=$(( $(date +%s) - start ))
errors="$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -n1)"
states="$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out | head -n1)"
what="$model ${defs[*]:-}"
[ "$live" = 0 ] || what="$what (liveness)"
if grep -q "error: max search depth too small\|out of memory\|search not completed" pan.out && [ "${errors:-0}" = 0 ]; then
  echo "FAIL $what: the search did not complete ($secs s)"; tail -n 20 pan.out; exit 1
fi
[ -n "$errors" ] || { echo "FAIL $what: no verdict"; cat pan.out; exit 1; }
if [ "$errors" = 0 ]; then
  if [ "$want" = pass ]; then
    echo "PASS $what: no counterexample in $states states ($secs s)"; exit 0
  fi
  echo "FAIL $what: expected a counterexample, none in $states states ($secs s)"; exit 1
fi
why="$(grep -m1 -E 'assertion violated|acceptance cycle|invalid end state' pan.out || true)"
if [ "$want" = fail ] && [ -n "$whyre" ] && [[ "$why" != *"$whyre"* ]]; then
  echo "FAIL $what: a counterexample, but not of the property expected ($whyre): $why"; exit 1
fi
if [ "$want" = fail ]; then
  echo "PASS $what: counterexample as expected ($secs s): $why"
  # The trail, as the steps that led there (the last 25).
  spin -t "${defs[@]}" -p "$model" 2>/dev/null | grep -E '^ *[0-9]+:' | tail -n 25 || true
  exit 0
fi
echo "FAIL $what: $why ($secs s)"
spin -t "${defs[@]}" -p -g "$model" 2>/dev/null | tail -n 60 || true
exit 1
