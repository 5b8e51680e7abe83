#!/usr/bin/env bash
# Poll a GPU turn, in the checkout's root (no carry needed): wait up to WAIT seconds (default
# 0) while the device checklist runs, print its progress, put the results so far into
# $OUT/device-check.tar.gz and up to 7 carry files not yet handed back beside it (a call
# brings back at most 8 files; the status says how many are left: poll again for them).
# Usage: bash experiments/device/poll.sh [WAIT]   (or bash .device/poll.sh [WAIT])
set -uo pipefail
WAIT=${1:-0}
source experiments/device/env.sh || exit 2
end=$((SECONDS + WAIT))
status() { python3 experiments/device_check.py --status $DEVICE_CHECK_ARGS; }
while [ "$SECONDS" -lt "$end" ]; do
    case "$(status)" in "device-check running"*) sleep 10 ;; *) break ;; esac
done
status
python3 experiments/device_check.py $DEVICE_CHECK_ARGS --bundle "${OUT:-runs/device-check}/device-check.tar.gz"
python3 experiments/device_check.py $DEVICE_CHECK_ARGS --return-carry "${OUT:-runs/device-check}" --max-files 7
