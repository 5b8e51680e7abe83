# The environment of a GPU turn (sourced by start.sh and poll.sh, from the checkout's root):
# the wheels and the restored MiniLM package on PYTHONPATH, the restored data, caches in /tmp.
export RQA_DEVICE_HOME=/tmp/rqa
export PYTHONPATH="$RQA_DEVICE_HOME/site-packages:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export RQA_DATA_DIR="$RQA_DEVICE_HOME/data" RQA_CACHE_DIR="$RQA_DEVICE_HOME/cache"
export HF_HUB_OFFLINE=1 WANDB_MODE=offline PYTHONUNBUFFERED=1 MPLCONFIGDIR="$RQA_DEVICE_HOME/mpl"
