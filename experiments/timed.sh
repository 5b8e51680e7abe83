#!/usr/bin/env bash
# Run one step of a recipe and append its wall time to a TSV log (UTC start, step, seconds,
# exit status, torch threads); the step's exit status is kept:
#   bash experiments/timed.sh LOG STEP COMMAND [ARG ...]
set -u
log=$1 step=$2
shift 2
mkdir -p "$(dirname "$log")"
start=$(date -u +%FT%TZ)
SECONDS=0
"$@"
rc=$?
printf '%s\t%s\t%d\t%d\t%s\n' "$start" "$step" "$SECONDS" "$rc" "${RQA_THREADS:-default}" >> "$log"
exit "$rc"
