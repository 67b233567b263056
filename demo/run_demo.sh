#!/usr/bin/env bash
# make demo: a GPT-style decoder block trained as a character-level language
# model on Debian's fortune cookies, through ds-autodiff, ds-insert-optimizer
# and ds-cpu-pipeline, on the CPU. Ends with a summary and a loss-curve PNG.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=$build/demo
py=${DS_PYTHON:-$HOME/.cache/ds-mlir/venv/bin/python}
steps=${DEMO_STEPS:-1000}
mkdir -p "$out"

echo "== preparing data"
"$py" "$root/demo/prepare_text.py" "$out" --seq 64

echo "== writing the model (examples/gen_examples.py gpt, d_model 128)"
"$py" "$root/examples/gen_examples.py" gpt --d-model 128 --heads 4 --seq 64 \
  --batch 16 --vocab 128 -o "$out/gpt_char.mlir"

echo "== training with ds-run ($steps steps, AdamW, warm-up + cosine)"
"$build/bin/ds-run" "$out/gpt_char.mlir" --steps "$steps" --threads 2 \
  --lr 2e-3 --schedule warmup-cosine --warmup-steps 50 \
  --data tokens="$out/tokens.npy" --data targets="$out/targets.npy" \
  --eval-data tokens="$out/eval_tokens.npy" \
  --eval-data targets="$out/eval_targets.npy" \
  --eval-every 100 --eval-batches 8 --print-every 20 \
  --report "$out/report.json" --checkpoint "$out/checkpoint"

echo "== summary"
"$py" "$root/demo/plot_report.py" "$out/loss.png" "fp32=$out/report.json"
echo "report: $out/report.json   checkpoint: $out/checkpoint"
