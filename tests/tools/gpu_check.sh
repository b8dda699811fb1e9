#!/usr/bin/env bash
# `make gpu-check`: the GPU checks of the engine in one run (<= 5 minutes on one H200-class GPU).
#   1. `check` (reconstruction error of every scope vs the HF tensors) for both embedded models on cuda
#   2. `bench` BERT-base shape at n = 128 and n = 512 on cuda (tokens/s, roofline vs a matmul of the
#      same run on the same device), float32 and bfloat16
#   3. a timed K24 pass of paper size: 992 sequences x 128 tokens, BERT-base shape (random weights)
#   3b. causal pairs on the device: `bench --model smollm2` at n = 128 (causal vs every-pair work, same
#      run) and at n = 4096, one layer (long context: time and peak device memory)
#   4. the device-map tests (tests/models/test_device_map.py; its CUDA test spreads a tiny model over
#      the GPUs, CPU memory and disk and compares with the single-GPU load)
# Without a CUDA device it prints one line and exits 2, running nothing. Output: gpu-check.log.
set -euo pipefail
PY="${PY:-.venv/bin/python}"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "gpu-check: no CUDA device visible to torch ($("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'torch missing')); nothing was run" >&2
  exit 2
fi
LOG="${LOG:-gpu-check.log}"
: > "$LOG"
run() { echo "\$ report-builder $*" | tee -a "$LOG"; "$PY" -m report_builder "$@" 2>&1 | tee -a "$LOG"; }
start=$(date +%s)
"$PY" -c 'import torch; print("GPU:", torch.cuda.get_device_name(0), "| torch", torch.__version__)' | tee -a "$LOG"
run check --model minilm --device cuda
run check --model smollm2 --device cuda
run bench --shape base --seq-len 128 --batch 8 --device cuda --repeats 3
run bench --shape base --seq-len 512 --batch 2 --device cuda --repeats 3
run bench --shape base --seq-len 128 --batch 8 --device cuda --dtype bfloat16 --repeats 3
run bench --shape base --k24-pass 992 --seq-len 128 --batch 64 --device cuda
run bench --shape base --k24-pass 992 --seq-len 128 --batch 64 --device cuda --dtype tf32
run bench --model smollm2 --seq-len 128 --device cuda --repeats 3
run bench --model smollm2 --seq-len 4096 --layers 1 --skip-naive --device cuda --repeats 1
echo "\$ pytest tests/models/test_device_map.py (a device map over the GPUs, CPU memory and disk)" | tee -a "$LOG"
"$PY" -m pytest -q tests/models/test_device_map.py 2>&1 | tail -3 | tee -a "$LOG"
echo "gpu-check: done in $(( $(date +%s) - start )) s; log in $LOG" | tee -a "$LOG"
