# scripts/lib/err.sh - every script under scripts/ and bench/ that fails says
# why on stderr: sourced right after `set -Eeuo pipefail` (-E: functions and
# subshells inherit the trap), it names the script, the file and line, the
# command that failed and its exit status. Deliberate exits (die, exit N)
# print their own message; set -u's "unbound variable" is bash's own line.
# shellcheck shell=bash

err_report() { # name status line
  # Inside $(...) or ( ... ) the failure may be one the caller handles
  # (v="$(cat f)" || ...); the caller's own line reports it when it is not.
  [ "$BASH_SUBSHELL" = 0 ] || return 0
  echo "$1: ${BASH_SOURCE[1]##*/} line $3: '$BASH_COMMAND' failed (exit $2)" >&2
}

err_trap() { # name: the prefix of the message
  # shellcheck disable=SC2064  # the name is fixed now; $? and $LINENO at the failure
  trap "err_report '$1' \$? \$LINENO" ERR
}
