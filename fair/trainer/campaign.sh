#!/bin/bash
# One training campaign: train for SECONDS (on CUDA when present), choose a
# kept model by its gain on F1 over busy windows outside the held-out ones,
# and judge that model on the held-out windows (exit 1 if a check fails).
#
#   fair/trainer/campaign.sh SLURP TRACE OUT SECONDS [train.py options...]
#
# OUT gets the run (curve.csv, model-EPOCH.onnx), train.log, choice.txt and
# judge.md (the model card's table).
set -euo pipefail
slurp=$1 trace=$2 out=$3 seconds=$4
shift 4
here=$(dirname "$0")
mkdir -p "$out"
python3 "$here/train.py" --trace "$trace" --out "$out" --slurp "$slurp" \
    --min-bsld 3 --clone f1 --baseline f1 --hold-out 12345:300,777:300 \
    --keep-every 5 --epochs 1000000 --max-seconds "$seconds" "$@" > "$out/train.log" 2>&1
python3 "$here/choose.py" --slurp "$slurp" --trace "$trace" "$out"/model-[0-9]*.onnx | tee "$out/choice.txt"
best=$(tail -n 1 "$out/choice.txt")
python3 "$here/judge.py" --slurp "$slurp" --trace "$trace" --model "$best" | tee "$out/judge.md"
