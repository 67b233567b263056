#!/usr/bin/env bash
# make demo: a GPT-style decoder block trained as a character-level language
# model on Debian's fortune cookies, through ds-autodiff, ds-insert-optimizer
# and ds-cpu-pipeline, on the CPU: in FP32, with the default mixed-precision
# policy (ds-run --precision), and with all three levels of the seeds' MGPM
# (examples/policies/mgpm.yaml: channel split, FP32 warm-up and fine-tune
# phases) plus loss scaling, and with quantization-aware training (ds-run
# --fake-quant: every layer INT8, evaluated also as integer inference and
# exported as an int8 model, and the seeds' four tiers), and with dynamic
# 8x8 block sparsity (ds-run --sparsity: the seeds' schedule, 80 % held for
# 30 % of the run, then a cosine to 98 %); same data and seed.
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

echo "== QAT: every linear layer INT8 (torch.ao x86 grids, current weight ranges)"
train -qat-int8 \
  --fake-quant="policy=$root/examples/policies/qat-int8.yaml weight-observer=current" \
  --integer-eval --export-quantized "$out/int8-model"

echo "== QAT: the seeds' tiers (attention projections kept in BF16, other layers INT8)"
train -qat-tiers --fake-quant="weight-observer=current" --precision

echo "== block sparsity: 8x8 blocks, 80 % -> 98 % (the seeds' cosine schedule), masks every 100 steps"
train -sparse --sparsity

echo "== summary"
"$py" "$root/demo/plot_report.py" "$out/loss.png" \
  "fp32=$out/report.json" "mixed=$out/report-mixed.json" \
  "mgpm=$out/report-mgpm.json" "qat-int8=$out/report-qat-int8.json" \
  "qat-tiers=$out/report-qat-tiers.json" "sparse=$out/report-sparse.json"
# The INT8 model as exported (--export-quantized): one byte per quantized
# weight element instead of four, and its integer inference (int8 GEMMs)
# beside the fake-quantized forward it was trained as.
"$py" - "$out/report-qat-int8.json" "$out/int8-model/quantized.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["eval"][-1]
index = json.load(open(sys.argv[2]))
b = index["bytes"]
print("INT8 model (%s): %d layers, %.1f KiB of int8 weights + %.1f KiB of scales "
      "and zero points, vs %.1f KiB in FP32" % (
          sys.argv[2].rsplit("/", 1)[0], len(index["layers"]),
          b["int8_weights"] / 1024, b["scales_and_zero_points"] / 1024,
          b["as_f32"] / 1024))
print("held-out loss at step %d: fake-quantized %.4f, integer inference %.4f "
      "(%+.1e), f32 forward of the QAT weights %.4f" % (
          ev["step"], ev["loss"], ev["int8_loss"], ev["int8_loss"] - ev["loss"],
          ev["f32_loss"]))
PY
# The sparse run: the linear layers' final sparsity and the work of the
# block-sparse kernels against the dense products.
"$py" - "$out/report.json" "$out/report-sparse.json" <<'PY'
import json, sys
dense, sparse = (json.load(open(p)) for p in sys.argv[1:3])
sp = sparse["summary"]["sparsity"]
layers = sp["layers"]
k = sp.get("kernels", {})
print("block-sparse run: %d linear layers at %.1f %% mean sparsity (%s); kernels "
      "executed %.3f of the dense FLOPs; step %.1f ms vs %.1f ms dense; "
      "held-out loss %.4f vs %.4f dense" % (
          len(layers), 100 * sum(v["final_sparsity"] for v in layers.values())
          / len(layers), ", ".join(sorted(layers)),
          k.get("executed_over_dense", 0.0),
          sparse["summary"]["median_step_ms"], dense["summary"]["median_step_ms"],
          sparse["eval"][-1]["loss"], dense["eval"][-1]["loss"]))
PY
echo "reports: $out/report{,-mixed,-mgpm,-qat-int8,-qat-tiers,-sparse}.json"
echo "checkpoints: $out/checkpoint{,-mixed,-mgpm,-qat-int8,-qat-tiers,-sparse}"
