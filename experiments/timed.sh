#!/usr/bin/env bash
# Run one step of a recipe and append its wall time to a TSV log (UTC start, step, seconds,
# exit status, torch threads; a header line starts a new log); the step's exit status is kept:
#   bash experiments/timed.sh LOG STEP COMMAND [ARG ...]
# A step stopped by a signal (TERM, INT, HUP: a session's end, Ctrl-C) still leaves its row,
# with the step's own exit status, once the step has exited (its resumable checkpoint saved):
# a recipe run over several sittings logs every sitting.
set -u
log=$1 step=$2
shift 2
mkdir -p "$(dirname "$log")"
[ -s "$log" ] || printf 'start\tstep\tseconds\tstatus\tthreads\n' >> "$log"
start=$(date -u +%FT%TZ)
SECONDS=0
trap 'signalled=1' TERM INT HUP   # run after the step exits: bash waits for it first
"$@"
rc=$?
printf '%s\t%s\t%d\t%d\t%s\n' "$start" "$step" "$SECONDS" "$rc" "${RQA_THREADS:-default}" >> "$log"
exit "$rc"
