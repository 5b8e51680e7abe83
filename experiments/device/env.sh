# The environment of a GPU turn, sourced by start.sh and poll.sh in the checkout's root: the
# wheels and the restored MiniLM package first on PYTHONPATH, the restored data, caches in
# /tmp, and the checklist's results in runs/device-check/checklist (git-ignored, so a later
# call's copy of the working tree leaves them alone; start.sh seeds it with the committed
# results/gpu/checklist/, so finished items are not run again).
if [ ! -f Makefile ] || [ ! -f experiments/device_check.py ]; then
    echo "run this from the checkout's root (where the device's commands start)" >&2
    return 2 2>/dev/null || exit 2
fi
export RQA_DEVICE_HOME="${RQA_DEVICE_HOME:-/tmp/rqa}"
export PYTHONPATH="$RQA_DEVICE_HOME/site-packages:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export RQA_DATA_DIR="$RQA_DEVICE_HOME/data" RQA_CACHE_DIR="$RQA_DEVICE_HOME/cache"
# every test-pool look of the turn, into the work root, so that a bundle brings them back
export RQA_LEDGER="$PWD/runs/device-check/ledger.jsonl"
export HF_HUB_OFFLINE=1 WANDB_MODE=offline PYTHONUNBUFFERED=1 MPLCONFIGDIR="$RQA_DEVICE_HOME/mpl"
export DEVICE_CHECK_ARGS="${DEVICE_CHECK_ARGS:---output-root runs/device-check/checklist --work-root runs/device-check}"
