#!/usr/bin/env bash
# `make gpu-check`: the GPU check of issue #29 in one go, <= 5 minutes on one H200 (tests/tools/gpu_check.py):
#   `check` on cuda of random-weight stand-ins of both embedded models (their configs, no wheel), every scope;
#   `bench --json`: BERT-base shape n = 128 batch 8 and n = 512 batch 2, SmolLM2 shape n = 128 batch 8 and
#   n = 4096 one layer (float32), TF32 and bfloat16 at n = 128, --max-memory 32GiB vs the default;
#   the FF decomposition's kernels per layer and GPU busy time (torch.profiler);
#   a probe of CUDA graphs: K21 ratios and the causal FF step, eager vs replayed from one graph (gpu_graphs.py);
#   on request only (--steps compile): those two steps, the BERT-base FF step and the fast full layer (with its
#   check) through torch.compile, with their graph breaks;
#   the K24 paper pass 992 x 128 (float32 with its statistics, and TF32) and the K21 paper pass 992 x 86;
#   a device map over the GPU(s), CPU memory and disk.
# Needs only python3 with torch (CUDA), transformers, pandas, pyarrow, jinja2, pyyaml, filelock, psutil,
# accelerate and safetensors; run from anywhere (the repository goes on PYTHONPATH). PY picks the python
# (default python3; `make gpu-check` passes .venv's).
#   tests/tools/gpu_check.sh [--out FILE] [--budget SECONDS]   one JSON (default $OUT/gpu-check.json, else
#                                                              ./gpu-check.json) and the log beside it (.log)
#   tests/tools/gpu_check.sh --dry-run                         the same on the CPU, tiny sizes (in the suite)
# GPU_CHECK_COMMIT=<hash> records the commit where the tree has no .git (a copied working tree).
# Without a CUDA device (and without --dry-run) it prints one line and exits 2, running nothing.
set -uo pipefail
PY="${PY:-python3}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" TRANSFORMERS_NO_ADVISORY_WARNINGS=1 TOKENIZERS_PARALLELISM=false
dry=0
for a in "$@"; do [ "$a" = "--dry-run" ] && dry=1; done
if [ "$dry" = 0 ] && ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "gpu-check: no CUDA device visible to torch ($("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'torch missing')); nothing was run (--dry-run runs the same on the CPU)" >&2
  exit 2
fi
exec "$PY" -m tests.tools.gpu_check "$@"
