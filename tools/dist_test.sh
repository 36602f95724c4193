#!/usr/bin/env bash
# Distributed testing on one or more nodes with torchrun:
#   tools/dist_test.sh CONFIG CHECKPOINT GPUS [test.py options, e.g. --corruption cloud --severity 3]
# Multi-node: set NNODES, NODE_RANK, MASTER_ADDR and PORT on every node.
set -euo pipefail
if [ $# -lt 3 ]; then
    echo "usage: $0 CONFIG CHECKPOINT GPUS [test.py options]" >&2
    exit 2
fi
CONFIG=$1
CHECKPOINT=$2
GPUS=$3
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
PYTHON=${PYTHON:-python}
TOOLS="$(cd "$(dirname "$0")" && pwd)"

PYTHONPATH="$TOOLS/..${PYTHONPATH:+:$PYTHONPATH}" \
"$PYTHON" -m torch.distributed.run \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --master_port="$PORT" \
    --nproc_per_node="$GPUS" \
    "$TOOLS/test.py" "$CONFIG" "$CHECKPOINT" --launcher pytorch "${@:4}"
