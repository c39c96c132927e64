#!/bin/bash
# One training campaign: train for SECONDS (on CUDA when present) on the
# jobs before CUT, choose a kept model by its gain on F1 over busy windows
# of those jobs, and judge that model on busy windows of the jobs from CUT
# on, which no episode played (exit 1 if a check fails).
#
#   [CUT=320000] fair/trainer/campaign.sh SLURP TRACE OUT SECONDS [train.py options...]
#
# CUT defaults to RICC-2010-2's job 320000 (of 447,784 after loading): the
# jobs submitted from 2 September 2010, the trace's last four weeks (28%
# of its jobs, about 15 congested stretches). OUT gets the run
# (curve.csv, model-EPOCH.onnx), train.log, choice.txt and judge.md (the
# model card's table).
set -euo pipefail
slurp=$1 trace=$2 out=$3 seconds=$4
shift 4
cut=${CUT:-320000}
here=$(dirname "$0")
mkdir -p "$out"
python3 "$here/train.py" --trace "$trace" --out "$out" --slurp "$slurp" \
    --min-bsld 3 --clone f1 --baseline f1 --hold-out "$cut.." \
    --keep-every 5 --epochs 1000000 --max-seconds "$seconds" "$@" > "$out/train.log" 2>&1
python3 "$here/choose.py" --slurp "$slurp" --trace "$trace" --hold-out "$cut.." \
    "$out"/model-[0-9]*.onnx | tee "$out/choice.txt"
best=$(tail -n 1 "$out/choice.txt")
python3 "$here/judge.py" --slurp "$slurp" --trace "$trace" --model "$best" \
    --within "$cut.." --min-bsld 3 --samples 100 | tee "$out/judge.md"
