#!/usr/bin/env bash
# Testing on a Slurm cluster:
#   [GPUS=8] [GPUS_PER_NODE=8] [CPUS_PER_TASK=5] [SRUN_ARGS=...] \
#   tools/slurm_test.sh PARTITION JOB_NAME CONFIG CHECKPOINT [test.py options]
set -euo pipefail
if [ $# -lt 4 ]; then
    echo "usage: $0 PARTITION JOB_NAME CONFIG CHECKPOINT [test.py options]" >&2
    exit 2
fi
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
CHECKPOINT=$4
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
PYTHON=${PYTHON:-python}
TOOLS="$(cd "$(dirname "$0")" && pwd)"

# shellcheck disable=SC2086  # SRUN_ARGS holds several words
PYTHONPATH="$TOOLS/..${PYTHONPATH:+:$PYTHONPATH}" \
srun -p "$PARTITION" \
    --job-name="$JOB_NAME" \
    --gres=gpu:"$GPUS_PER_NODE" \
    --ntasks="$GPUS" \
    --ntasks-per-node="$GPUS_PER_NODE" \
    --cpus-per-task="$CPUS_PER_TASK" \
    --kill-on-bad-exit=1 \
    ${SRUN_ARGS} \
    "$PYTHON" -u "$TOOLS/test.py" "$CONFIG" "$CHECKPOINT" --launcher=slurm "${@:5}"
