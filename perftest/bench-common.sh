# bench-common.sh - what the benchmark runners (perftest/run-*-bench.sh)
# share: their --help, errors, option values and timestamped progress.
# Sourced after PROG is set; msg needs RUNLOG and T_START.

# the script's header comment, as its --help
usage() { awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }
# need OPTION ARGC: OPTION takes a value (ARGC: arguments left, itself included)
need() { [[ $2 -ge 2 ]] || die "$1 needs a value"; }
# progress on stderr and in the run's log, with the seconds since T_START
msg() { printf '%s: [%4ds] %s\n' "$PROG" "$((SECONDS - T_START))" "$*" | tee -a "$RUNLOG" >&2; }
