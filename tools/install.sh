#!/usr/bin/env bash
# Install the pinned OpenMMLab stack and reobench_mm into a Python environment.
#
#   bash tools/install.sh                      # project-local .venv (created if missing)
#   VENV=/path/to/venv bash tools/install.sh   # another virtual environment (created if missing)
#   PYTHON=/path/to/python bash tools/install.sh   # an existing environment, used as it is
#
# Idempotent: a stamp holding the hash of the requirement files and of this script is kept
# inside the environment; when it matches and the stack imports, nothing is installed again.
# mmcv 2.1.0 is built from source with its compiled ops (about 20 minutes on 2 cores); pip
# caches the built wheel, so later installs on the same machine take seconds. With a CUDA
# toolkit present (and a GPU visible, or FORCE_CUDA=1) the same command builds the CUDA ops.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="${VENV:-$ROOT/.venv}"
if [[ -z "${PYTHON:-}" || "${PYTHON}" == "$VENV/bin/python" || "${PYTHON}" == ".venv/bin/python" ]]; then
    if [[ ! -x "$VENV/bin/python" ]]; then
        echo "[install] creating virtual environment $VENV"
        "${BASE_PYTHON:-python3}" -m venv "$VENV"
    fi
    PYTHON="$VENV/bin/python"
fi
if ! "$PYTHON" -c 'import sys' 2>/dev/null; then
    echo "[install] error: PYTHON=$PYTHON is not a working Python interpreter" >&2
    exit 2
fi

PREFIX="$("$PYTHON" -c 'import sys; print(sys.prefix)')"
STAMP="$PREFIX/.reobench_mm-install.stamp"
HASH="$(cat requirements/*.txt tools/install.sh setup.py | sha256sum | cut -c1-16)"

stack_imports() {
    "$PYTHON" - <<'PY' 2>/dev/null
import mmcv, mmengine, mmdet, mmseg, mmrotate  # noqa: F401
from mmcv.ops import RoIAlignRotated, nms_rotated  # noqa: F401  (compiled ops)
import reobench_mm  # noqa: F401
assert mmcv.__version__ == '2.1.0', mmcv.__version__
PY
}

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$HASH" ]] && stack_imports; then
    echo "[install] up to date in $PREFIX (remove $STAMP to force a reinstall)"
    exit 0
fi

PIP=("$PYTHON" -m pip --disable-pip-version-check)
export PIP_PROGRESS_BAR="${PIP_PROGRESS_BAR:-off}"

echo "[install] 1/4 build tools and torch"
"${PIP[@]}" install -r requirements/build.txt -r requirements/torch.txt

echo "[install] 2/4 mmcv 2.1.0 with compiled ops"
if "$PYTHON" -c 'import mmcv, sys; from mmcv.ops import nms_rotated; sys.exit(mmcv.__version__ != "2.1.0")' 2>/dev/null; then
    echo "[install] mmcv 2.1.0 with ops already installed"
else
    cuda_flags=()
    if [[ "${FORCE_CUDA:-0}" == "1" ]] || "$PYTHON" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
        # A wheel cached from an earlier CPU-only build must not be reused for a CUDA build.
        echo "[install] CUDA visible: building mmcv's CUDA ops (needs nvcc matching torch.version.cuda)"
        cuda_flags=(--no-cache-dir)
    else
        echo "[install] no GPU: building mmcv's CPU ops (about 20 minutes on 2 cores; pip caches the wheel)"
    fi
    # -c: mmcv's own dependencies (opencv-python, numpy) get the project's pins at once
    MMCV_WITH_OPS=1 MAX_JOBS="${MAX_JOBS:-$(nproc)}" \
        "${PIP[@]}" install --no-build-isolation "${cuda_flags[@]}" \
        -c requirements/runtime.txt mmcv==2.1.0
fi

echo "[install] 3/4 OpenMMLab toolboxes and runtime requirements"
"${PIP[@]}" install -r requirements/mminstall.txt -r requirements/runtime.txt -r requirements/tests.txt

echo "[install] 4/4 reobench_mm (editable)"
"${PIP[@]}" install --no-build-isolation --no-deps -e .

if ! stack_imports; then
    echo "[install] error: the stack was installed but does not import; run:" >&2
    echo "  $PYTHON -c 'import mmcv.ops, mmdet, mmseg, mmrotate, reobench_mm'" >&2
    exit 1
fi
echo "$HASH" > "$STAMP"
echo "[install] done: $("$PYTHON" -c 'import torch, mmcv, mmdet, mmseg, mmrotate, mmengine; print(f"torch {torch.__version__}, mmengine {mmengine.__version__}, mmcv {mmcv.__version__}, mmdet {mmdet.__version__}, mmseg {mmseg.__version__}, mmrotate {mmrotate.__version__}")')"
