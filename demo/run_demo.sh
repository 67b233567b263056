#!/usr/bin/env bash
# make demo: a GPT-style decoder block trained as a character-level language
# model on Debian's fortune cookies, through ds-autodiff, ds-insert-optimizer
# and ds-cpu-pipeline, on the CPU: in FP32, with the default mixed-precision
# policy (ds-run --precision), and with all three levels of the seeds' MGPM
# (examples/policies/mgpm.yaml: channel split, FP32 warm-up and fine-tune
# phases) plus loss scaling; same data and seed.
# Ends with a side-by-side summary and a loss-curve PNG.
#
# Environment: BUILD_DIR (default build/), DEMO_OUT (default $BUILD_DIR/demo),
# DEMO_STEPS (default 1000), DS_PYTHON (the venv's python).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${DEMO_OUT:-$build/demo}
py=${DS_PYTHON:-$HOME/.cache/ds-mlir/venv/bin/python}
steps=${DEMO_STEPS:-1000}
if ! [[ $steps =~ ^[0-9]+$ ]] || ((steps < 10)); then
  echo "run_demo.sh: DEMO_STEPS must be a whole number >= 10, got '$steps'" >&2
  exit 1
fi
# 50 warm-up steps and a held-out loss every 100 steps, scaled down for
# short runs.
warmup=$((steps / 20 < 50 ? steps / 20 : 50))
eval_every=$((steps / 5 < 100 ? steps / 5 : 100))
mkdir -p "$out"

echo "== preparing data"
"$py" "$root/demo/prepare_text.py" "$out" --seq 64

echo "== writing the model (examples/gen_examples.py gpt, d_model 128)"
"$py" "$root/examples/gen_examples.py" gpt --d-model 128 --heads 4 --seq 64 \
  --batch 16 --vocab 128 -o "$out/gpt_char.mlir"

# train SUFFIX [DS-RUN FLAGS...]: one run, into report$SUFFIX.json and
# checkpoint$SUFFIX/.
train() {
  local suffix=$1
  shift
  "$build/bin/ds-run" "$out/gpt_char.mlir" --steps "$steps" --threads 2 \
    --lr 2e-3 --schedule warmup-cosine --warmup-steps "$warmup" \
    --data tokens="$out/tokens.npy" --data targets="$out/targets.npy" \
    --eval-data tokens="$out/eval_tokens.npy" \
    --eval-data targets="$out/eval_targets.npy" \
    --eval-every "$eval_every" --eval-batches 8 --print-every 20 \
    --report "$out/report$suffix.json" --checkpoint "$out/checkpoint$suffix" \
    "$@"
}

echo "== training with ds-run in FP32 ($steps steps, AdamW, warm-up + cosine)"
train ""

echo "== the same training with the default mixed-precision policy (--precision)"
train -mixed --precision

echo "== with the MGPM policy (module, channel and time levels) and loss scaling"
train -mgpm --precision="$root/examples/policies/mgpm.yaml" --loss-scaling \
  --anomaly-steps 20

echo "== summary"
"$py" "$root/demo/plot_report.py" "$out/loss.png" \
  "fp32=$out/report.json" "mixed=$out/report-mixed.json" \
  "mgpm=$out/report-mgpm.json"
echo "reports: $out/report.json, $out/report-mixed.json, $out/report-mgpm.json"
echo "checkpoints: $out/checkpoint, $out/checkpoint-mixed, $out/checkpoint-mgpm"
