#!/usr/bin/env bash
# Poll a GPU turn: wait up to WAIT seconds (default 0) while the device checklist runs, print
# its progress, and put the results so far into $OUT/device-check.tar.gz (one file: what comes
# back is at most 8 files). Usage, from the checkout's root: bash .device/poll.sh [WAIT]
set -uo pipefail
WAIT=${1:-0}
cd "$(dirname "$0")/.."
source .device/env.sh
end=$((SECONDS + WAIT))
while [ "$SECONDS" -lt "$end" ] && make -s device-check-status STAMP= | grep -q '^device-check running'; do
    sleep 10
done
make -s device-check-status STAMP=
python3 experiments/device_check.py --bundle "${OUT:-.device/out}/device-check.tar.gz"
