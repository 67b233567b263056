#!/usr/bin/env bash
# The device check of ds-mlir's GPU backend (docs/GPUBackend.md), in two
# halves, because the GPU machine is bare (no MLIR, no LLVM, no network):
#
#   scripts/gpu-check.sh prepare [--out DIR] [--chip sm_90] [--steps N]
#                                [--examples "mlp cnn gpt_block"]
#                                [--build DIR (default build/)]
#                                [--bench-layers L (default 12; 0: none)]
#                                [--lowering "GROUPS" (default all; none)]
#                                [--parity MODEL (default all; none)]
#                                [--emulate-kernels]
#     Here, after `make build`: compiles every example's training step for
#     the chip (ds-run --device cuda --emit-step: host code with the cubins
#     embedded), in f32 and with the FP8/BF16 policy, loss scaling and
#     clipping (and the MLP sparse and fake-quantized; data-parallel, one
#     rank's step: the GPT block's gradients averaged in buckets on NCCL,
#     the MLP's rounded to bf16 on the device and summed on NCCL, and
#     compressed in three tiers or by DGC's top-k, encoded on the device,
#     through the host); writes each step's data and the CPU path's
#     losses on it (the
#     reference); compiles the lowering execution cases of
#     test/Integration/Lowering/check_ops.py, one step per group, with
#     their inputs and NumPy/PyTorch references (export_cases.py); compiles
#     the PyTorch parity cases (check_parity.py --export: each model,
#     optimizer and dtype with PyTorch's losses and final tensors); compiles the GPT benchmark step (gen_examples.py gpt
#     --d-model 1024 --heads 16 --seq 1024 --batch 8 --layers L) in f32,
#     BF16-mixed and the FP8 policy (and FP8 without row groups and amax-and-cast kernels, to measure
#     them); and copies the sources of the runtime's
#     CUDA backend, of ds-step-run and of the runtime check, with a
#     CMakeLists.txt and PyTorch's side of the benchmark, into one bundle of
#     at most 60 MiB (default build/gpu-bundle).
#     --emulate-kernels compiles every step to run its kernels on the host
#     (ds-run --gpu-emulate-kernels, at most 3 blocks per launch so that the
#     grid-stride loops take several trips) and leaves the benchmark out: such a
#     bundle runs only on the stub libcuda (DS_CUDA_DRIVER), where `run`
#     then checks the whole GPU lowering but the NVVM back end here.
#
#   gpu-check.sh run [BUNDLE]
#     On the GPU machine (CMake, a C++17 compiler, the CUDA toolkit, a
#     driver): builds the bundle, runs the runtime's checks (GEMMs of every
#     type and layout, FP8 and BF16 against f32 on the same rounded
#     operands), runs the lowering cases against their references and the
#     parity cases against PyTorch's results, trains
#     every step for N steps against its CPU reference,
#     benchmarks cuBLASLt's BF16 and FP8 GEMMs at 8192^3 and the GPT step
#     against PyTorch (eager f32 without TF32, autocast BF16, torch.compile),
#     and prints one table. Without a device every row is UNSUPPORTED and the exit is 0;
#     a failed check exits 1. The comparisons run with $DS_GPU_CHECK_PYTHON
#     (default python3; it needs NumPy).
#     Each row is printed as it is measured, so a run cut short still
#     reports. The checks share a budget of $DS_GPU_CHECK_BUDGET seconds
#     (default 420: the device's 8 minutes less its start); a check with no
#     time left is SKIPPED, the table still prints, and the exit is 2 when
#     something was skipped and nothing failed. The table and the whole
#     output of every failed check are written to $DS_GPU_CHECK_REPORT
#     (default $OUT, which the device tool brings back, else BUNDLE/report).
#
#   gpu-check.sh rows BUNDLE BUILD
#     Only the lowering and parity rows, with BUILD/ds-step-run (the tests
#     run them here on cases compiled for the CPU).
set -uo pipefail

# The comment block above, whatever its length.
usage() { sed -n '2,/^set -uo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit "${1:-1}"; }
die() { echo "gpu-check: error: $*" >&2; exit 1; }

# The rows of the table. Each is printed as it comes (the run may be cut
# short) and kept for the table; a failed check's output goes to
# $report/logs/<row>.log.
rows=() failed=0 skipped=0 budget=${DS_GPU_CHECK_BUDGET:-420} report=""
row() {
  local line
  line=$(printf '%-34s %-11s %s' "$1" "$2" "$3")
  rows+=("$line")
  echo "gpu-check: $line"
  case $2 in
    FAIL)
      failed=1
      if [[ -n $report && $# -ge 4 ]]; then
        mkdir -p "$report/logs"
        printf '%s\n' "$4" > "$report/logs/$(tr -c 'A-Za-z0-9._-' '_' <<< "$1" | sed 's/_*$//').log"
      fi ;;
    SKIPPED) skipped=$((skipped + 1)) ;;
  esac
}
# Seconds a check that needs at most $1 may take: less when the budget is
# nearly spent, 0 when it is spent (the caller then reports it SKIPPED).
allow() {
  local left=$((budget - SECONDS))
  if ((left <= 0)); then echo 0; elif (($1 < left)); then echo "$1"; else echo "$left"; fi
}
over_budget() { row "$1" SKIPPED "the budget of $budget s (DS_GPU_CHECK_BUDGET) was spent"; }
# Why a command that exited with status $1 under `timeout $2` failed, in
# one line: its first error, else how it ended (an emulated kernel's
# failed check, an abort) with its last line.
why_failed() {
  local rc=$1 t=$2 out=$3 line
  ((rc == 124)) && { echo "timed out after $t s"; return; }
  line=$(grep -m1 -E 'error|ds-emulate-gpu-kernels:|^FAIL' <<< "$out")
  [[ -n $line ]] && { echo "$line"; return; }
  if ((rc > 128)); then line="killed by signal $((rc - 128))"; else line="exit status $rc"; fi
  echo "$line: $(grep -v '^[[:space:]]*$' <<< "$out" | tail -1)"
}

prepare() {
  local root out chip steps examples build layers lowering parity
  root=$(cd "$(dirname "$0")/.." && pwd)
  out="$root/build/gpu-bundle" chip=sm_90 steps=20 examples="mlp cnn gpt_block"
  build="$root/build" layers=12 lowering=all parity=all emulate=0
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --out) out=$2; shift 2 ;;
      --chip) chip=$2; shift 2 ;;
      --steps) steps=$2; shift 2 ;;
      --examples) examples=$2; shift 2 ;;
      --build) build=$2; shift 2 ;;
      --bench-layers) layers=$2; shift 2 ;;
      --lowering) lowering=$2; shift 2 ;;
      --parity) parity=$2; shift 2 ;;
      --emulate-kernels) emulate=1; layers=0; shift ;;
      -h|--help) usage 0 ;;
      *) die "prepare: unknown argument '$1'" ;;
    esac
  done
  [[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "--steps expects a positive integer"
  [[ "$layers" =~ ^[0-9]+$ ]] || die "--bench-layers expects an integer >= 0"
  local bin="$build/bin" python="$HOME/.cache/ds-mlir/venv/bin/python"
  [[ -x "$bin/ds-run" ]] || die "no $bin/ds-run: run 'make build' first"
  [[ -x "$python" ]] || die "no $python: run 'make deps' first"
  [[ -d /usr/include/nlohmann ]] || die "nlohmann-json's headers are missing: run 'make deps'"
  local policy="$root/test/Conversion/GPU/Inputs/fp8-bf16.yaml"
  # Each case's ds-run flags, in `flags`. `techniques` (the MLP only):
  # block sparsity with regrowth, 4-bit fake quantization with learned
  # scales and loss scaling, whose roundings and top-k ties make 1e-2 the
  # tolerance. `dp` (the GPT block only): the policy's step data-parallel,
  # its gradients computed in 64 KiB buckets that NCCL averages (a world
  # of one on the GPU machine: the collectives, the probes and the GEMMs
  # writing bucket views run; the sum is the rank's own). `bf16-hook` and
  # `compressed` and `dgc` (the MLP only): f32, its buckets rounded to
  # bf16 by the step and summed by NCCL in place (DDP's bf16 hook), or
  # compressed in three tiers or by DGC's top-k with error feedback (its
  # warm-up of a step per fraction, 25 % down to 0.4 %, then 0.1 %), both
  # encoded by the step on the device (the radix selects; top-k's count
  # pyramids, its k computed from p0 by the step) and staged through the
  # host (the staging thread on the driver's asynchronous copies to
  # pinned memory).
  # `gpu_flags`: those of the GPU's step alone (its buckets of 750
  # elements are encoded on the device, where by default only those of
  # 65536 or more are).
  local flags=() gpu_flags=()
  case_flags() {
    gpu_flags=()
    case $1 in
      f32) flags=() ;;
      policy) flags=(--precision="$policy" --loss-scaling --clip-gradients) ;;
      techniques) flags=(--sparsity="update-every=4 initial=0.5 final=0.75 regrow"
                         --fake-quant="weight-bits=4 learn-scales" --loss-scaling) ;;
      dp) flags=(--precision="$policy" --loss-scaling --clip-gradients --data-parallel
                 --fuse-allreduce="bucket-bytes=65536 first-bucket-bytes=16384") ;;
      bf16-hook) flags=(--data-parallel --compress-allreduce=scheme=bf16
                        --fuse-allreduce="bucket-bytes=3000 first-bucket-bytes=1000") ;;
      compressed) flags=(--data-parallel --compress-allreduce
                         --fuse-allreduce="bucket-bytes=3000 first-bucket-bytes=1000")
                  gpu_flags=(--gpu-device-encoders-min 1) ;;
      dgc) flags=(--data-parallel --compress-allreduce="scheme=topk warmup-iterations=1"
                  --fuse-allreduce="bucket-bytes=3000 first-bucket-bytes=1000")
           gpu_flags=(--gpu-device-encoders-min 1) ;;
    esac
  }
  local -A tolerance=([f32]=1e-4 [policy]=1e-2 [techniques]=1e-2 [dp]=1e-2
                        [bf16-hook]=1e-3 [compressed]=1e-3 [dgc]=1e-3)
  local start=$SECONDS emu=() emu_py=()
  # Emulated, with at most 3 blocks per launch: the kernels' grid-stride
  # loops take several trips, as they do at the benchmark's sizes.
  ((emulate)) && emu=(--gpu-emulate-kernels --gpu-max-blocks 3) emu_py=(--emulate-kernels)
  rm -rf "$out" && mkdir -p "$out/cases" || die "cannot create $out"
  ((emulate)) && echo "kernels run on the host (ds-run --gpu-emulate-kernels): the stub libcuda only" > "$out/emulated"
  : > "$out/cases.txt"
  local example config case dir
  for example in $examples; do
    [[ -f "$root/examples/$example.mlir" ]] || die "no example '$example'"
    local example_configs=(f32 policy)
    [[ $example == mlp ]] && example_configs+=(techniques bf16-hook compressed dgc)
    [[ $example == gpt_block ]] && example_configs+=(dp)
    for config in "${example_configs[@]}"; do
      case="$example-$config" dir="$out/cases/$example-$config"
      case_flags "$config"
      echo "gpu-check: $case: compiling for $chip, CPU reference of $steps steps"
      "$bin/ds-run" "$root/examples/$example.mlir" "${flags[@]}" "${gpu_flags[@]}" \
        --device cuda --gpu-chip "$chip" --steps "$steps" "${emu[@]}" \
        --emit-step "$dir" --quiet || die "$case: ds-run --emit-step failed"
      rm -f "$dir/step.o" # step.so holds the same code
      "$python" "$root/test/Runtime/aot/make_data.py" "$dir" "$dir/data" \
        "$steps" > "$dir/data.txt" || die "$case: cannot write its data"
      local data=()
      while IFS='=' read -r name file; do
        data+=(--data "$name=$file" --eval-data "$name=$file")
      done < "$dir/data.txt"
      rm -f "$dir/data.txt"
      "$bin/ds-run" "$root/examples/$example.mlir" "${flags[@]}" \
        --resume "$dir/init" "${data[@]}" --steps "$steps" \
        --report "$dir/ref.json" --quiet || die "$case: the CPU reference failed"
      echo "$case $steps ${tolerance[$config]}" >> "$out/cases.txt"
    done
  done
  # The lowering execution cases: one step per group of check_ops.py,
  # inputs in its init/, references beside it.
  if [[ $lowering != none ]]; then
    local groups=()
    [[ $lowering != all ]] && for g in $lowering; do groups+=(--group "$g"); done
    echo "gpu-check: lowering execution cases ($lowering): compiling for $chip"
    "$python" "$root/test/Integration/Lowering/export_cases.py" \
      --ds-run "$bin/ds-run" --out "$out/lowering" --device cuda --chip "$chip" \
      "${groups[@]}" "${emu_py[@]}" > "$out/lowering.log" 2>&1 ||
      { tail -20 "$out/lowering.log"; die "exporting the lowering cases failed"; }
    grep -v '^export_cases.py: left out' "$out/lowering.log" | sed 's/^export_cases.py/gpu-check/'
    rm -f "$out"/lowering/*/step.o "$out/lowering.log"
    # The inputs and references travel compressed too (masked outputs'
    # zeros and the large cases' quantised inputs shrink most).
    gzip -9 "$out"/lowering/*/step.so "$out"/lowering/*/init/*.npy \
      "$out"/lowering/*/reference/*.npy
    cp "$root/test/Integration/Lowering/compare_cases.py" "$out/lowering/"
  fi
  # The PyTorch parity cases: the models of check_parity.py compiled for the
  # chip with their initial weights, data, and PyTorch's losses and final
  # tensors (trained here, on the CPU).
  if [[ $parity != none ]]; then
    local only=()
    [[ $parity != all ]] && only=(--only "$parity")
    echo "gpu-check: PyTorch parity cases ($parity): compiling for $chip"
    env DS_RUN="$bin/ds-run" PYTHONPATH="$root/python" "$python" \
      "$root/test/Integration/Torch/check_parity.py" --sdpa "${only[@]}" \
      --export "$out/parity" --chip "$chip" "${emu_py[@]}" > "$out/parity.log" 2>&1 ||
      { tail -20 "$out/parity.log"; die "exporting the parity cases failed"; }
    echo "gpu-check: $(tail -1 "$out/parity.log")"
    rm -f "$out/parity.log"
    gzip -9 "$out"/parity/*/step.so
    cp "$root/test/Integration/Torch/parity_compare.py" "$out/parity/"
  fi
  # The GPT step benchmark: kernels and GEMMs at a real size. Its state
  # (hundreds of MiB) is drawn on the GPU machine (ds-step-run
  # --init-random), and the libraries travel compressed.
  if (( layers > 0 )); then
    local size=(--d-model 1024 --heads 16 --seq 1024 --batch 8 --vocab 128)
    mkdir -p "$out/bench"
    "$python" "$root/examples/gen_examples.py" gpt "${size[@]}" --dropout 0 \
      --layers "$layers" -o "$out/bench/gpt.mlir" || die "cannot generate the GPT step"
    # fp8-unfused: the FP8 step without row groups and with each amax in
    # a kernel of its own (ds-run --gpu-fuse-rows=false
    # --gpu-fuse-siblings=false), to measure what the two fusions save;
    # *-unroll1: the elementwise kernels one element a thread at a time
    # (--gpu-unroll 1 --gpu-vectorize=false), to measure what loading
    # several at once saves; *-scalar: several elements a thread, but each
    # access one element (--gpu-vectorize=false), to measure the 16-byte
    # vectors;
    # fp8-intcasts: bf16 and FP8 casts as the CPU's integer code
    # (--gpu-native-casts=false), to measure the cvt instructions;
    # fp8-index32: 32-bit kernel indices (--gpu-index32), to decide its
    # default; fp8-uncached: row groups that reread their rows
    # (--gpu-cache-rows=false), to measure the row caches; bf16-apart: the
    # column sums in launches of their own after their row groups
    # (--gpu-row-columns=false), to measure what folding them in the rows'
    # kernel saves against the smaller blocks it takes; bf16-whole: causal
    # attention's six GEMMs each as one GEMM over the whole score matrix
    # (--causal-block 0), to measure the 256-row blocks over the lower
    # block triangle against their extra calls.
    local -A policies=(
      [f32]=""
      [bf16]="--precision=$root/scripts/gpu-check/bf16.yaml"
      [fp8]="--precision=$root/scripts/gpu-check/fp8.yaml"
      [fp8-unfused]="--precision=$root/scripts/gpu-check/fp8.yaml --gpu-fuse-rows=false --gpu-fuse-siblings=false"
      [bf16-unroll1]="--precision=$root/scripts/gpu-check/bf16.yaml --gpu-unroll 1 --gpu-vectorize=false"
      [fp8-unroll1]="--precision=$root/scripts/gpu-check/fp8.yaml --gpu-unroll 1 --gpu-vectorize=false"
      [bf16-scalar]="--precision=$root/scripts/gpu-check/bf16.yaml --gpu-vectorize=false"
      [fp8-scalar]="--precision=$root/scripts/gpu-check/fp8.yaml --gpu-vectorize=false"
      [fp8-intcasts]="--precision=$root/scripts/gpu-check/fp8.yaml --gpu-native-casts=false"
      [fp8-index32]="--precision=$root/scripts/gpu-check/fp8.yaml --gpu-index32"
      [fp8-uncached]="--precision=$root/scripts/gpu-check/fp8.yaml --gpu-cache-rows=false"
      [bf16-apart]="--precision=$root/scripts/gpu-check/bf16.yaml --gpu-row-columns=false"
      [bf16-whole]="--precision=$root/scripts/gpu-check/bf16.yaml --causal-block 0"
    )
    local variant
    for variant in f32 bf16 fp8 fp8-unfused bf16-unroll1 fp8-unroll1 bf16-scalar fp8-scalar fp8-intcasts fp8-index32 fp8-uncached bf16-apart bf16-whole; do
      echo "gpu-check: gpt benchmark ($layers layers, d_model 1024) $variant: compiling for $chip"
      # shellcheck disable=SC2086
      "$bin/ds-run" "$out/bench/gpt.mlir" ${policies[$variant]} --device cuda \
        --gpu-chip "$chip" --steps 12 --emit-step "$out/bench/gpt-$variant" \
        --gpu-launch-report "$out/bench/launch-report-$variant.txt" \
        --emit-init=false --quiet || die "gpt-$variant: ds-run --emit-step failed"
      rm -f "$out/bench/gpt-$variant/step.o"
      gzip -9 "$out/bench/gpt-$variant/step.so"
    done
    "$python" "$root/test/Runtime/aot/make_data.py" "$out/bench/gpt-f32" \
      "$out/bench/data" 12 > /dev/null || die "cannot write the benchmark's data"
    # The same batches with the second half of every sequence one padding
    # token: the embedding gradient's list for it is 4096 positions long.
    "$python" "$root/test/Runtime/aot/make_data.py" "$out/bench/gpt-f32" \
      "$out/bench/data-padded" 12 0 --pad 0.5 > /dev/null ||
      die "cannot write the benchmark's padded data"
    rm -f "$out/bench/gpt.mlir"
    echo "${size[*]} --layers $layers" > "$out/bench/size.txt"
    cp "$root/scripts/gpu-check/torch_gpt.py" "$out/bench/"
    cp "$root/benchmarks/profile_vs_bound.py" "$out/bench/"
  fi
  # The sources the GPU machine builds, in the tree's layout.
  local src="$out/src"
  mkdir -p "$src/include/ds/Runtime" "$src/lib/Runtime/cuda" \
    "$src/tools/ds-step-run" "$src/unittests/Runtime" "$src/third_party"
  cp "$root"/include/ds/Runtime/ds_runtime.h \
    "$root"/include/ds/Runtime/ds_runtime_cuda.h \
    "$root"/include/ds/Runtime/DeviceTensors.h \
    "$root"/include/ds/Runtime/StepGraphs.h "$src/include/ds/Runtime/"
  cp "$root"/lib/Runtime/Error.cpp "$root"/lib/Runtime/RuntimeInternal.h \
    "$root"/lib/Runtime/Comm*.cpp "$root"/lib/Runtime/Comm*.h \
    "$src/lib/Runtime/"
  cp "$root"/lib/Runtime/cuda/*.cpp "$root"/lib/Runtime/cuda/*.h \
    "$root"/lib/Runtime/cuda/*.cmake "$src/lib/Runtime/cuda/"
  cp "$root"/tools/ds-step-run/*.cpp "$root"/tools/ds-step-run/*.h \
    "$root"/tools/ds-step-run/Sources.cmake "$src/tools/ds-step-run/"
  cp "$root/unittests/Runtime/CudaCheck.cpp" \
    "$root/unittests/Runtime/NcclCheck.cpp" "$src/unittests/Runtime/"
  cp -r /usr/include/nlohmann "$src/third_party/"
  # The NCCL check's build: no MPI there (one process calls none), and
  # NCCL's header, which PyTorch's wheels may not install.
  cp -r "$root/scripts/gpu-check/no-mpi" "$src/third_party/"
  local nccl_h
  for nccl_h in "${DS_NCCL_INCLUDE:-/usr/local/cuda/include}/nccl.h" \
      /usr/local/include/nccl.h /usr/include/nccl.h ""; do
    [[ -z $nccl_h || -f $nccl_h ]] && break
  done
  if [[ -n $nccl_h ]]; then
    mkdir -p "$src/third_party/nccl"
    cp "$nccl_h" "$src/third_party/nccl/"
  else
    echo "gpu-check: no nccl.h here (DS_NCCL_INCLUDE): the bundle has no NCCL check"
  fi
  cp "$root/scripts/gpu-check/CMakeLists.txt" "$out/CMakeLists.txt"
  cp "$0" "$out/gpu-check.sh"
  local bytes
  bytes=$(du -sb "$out" | cut -f1)
  (( bytes <= 60 * 1024 * 1024 )) ||
    die "the bundle is $((bytes / 1024 / 1024)) MiB, over the 60 MiB a GPU machine takes"
  echo "gpu-check: bundle $out: $(wc -l < "$out/cases.txt") steps, benchmark of $layers layers, $((bytes / 1024)) KiB, prepared in $((SECONDS - start)) s"
  echo "gpu-check: on the GPU machine: bash $(basename "$out")/gpu-check.sh run $(basename "$out")"
}

run() {
  local bundle=${1:-$(cd "$(dirname "$0")" && pwd)}
  bundle=$(cd "$bundle" 2>/dev/null && pwd) || die "no bundle at '${1:-}'"
  [[ -f "$bundle/cases.txt" && -f "$bundle/CMakeLists.txt" ]] ||
    die "$bundle is not a gpu-check bundle (run 'gpu-check.sh prepare' first)"
  report=${DS_GPU_CHECK_REPORT:-${OUT:-$bundle/report}}
  mkdir -p "$report" || die "cannot write the report to $report"
  local start=$SECONDS build="$bundle/build" log="$report/build.log"
  local generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  if ! { cmake -S "$bundle" -B "$build" "${generator[@]}" \
           -DCMAKE_BUILD_TYPE=Release &&
         cmake --build "$build" -j "$(nproc)"; } > "$log" 2>&1; then
    tail -30 "$log"
    die "building the bundle failed (log: $log)"
  fi
  local built=$((SECONDS - start)) device emulated=""
  [[ -f "$bundle/emulated" ]] && emulated=$(cat "$bundle/emulated")
  echo "gpu-check: bundle built in $built s; checks within ${budget} s of the start"
  [[ -n $emulated ]] && echo "gpu-check: $emulated"
  if ! device=$("$build/ds-step-run" --device-info 2>&1); then
    row "device" "UNSUPPORTED" "${device#ds-step-run: error: }"
    while read -r case steps tol; do
      row "$case ($steps steps vs CPU)" "UNSUPPORTED" "no device"
    done < "$bundle/cases.txt"
    local g
    for g in "$bundle"/lowering/*/ "$bundle"/parity/*/; do
      [[ -d $g ]] && row "$(basename "$(dirname "$g")") $(basename "$g")" "UNSUPPORTED" "no device"
    done
    print_table "no CUDA device" "$built"
    return 0
  fi
  local scenario out t
  for scenario in basic gemm fp8-refusals fp8-accuracy graphs; do
    t=$(allow 120)
    ((t > 0)) || { over_budget "runtime $scenario"; continue; }
    out=$(timeout "$t" "$build/ds-runtime-cuda-check" "$scenario" 2>&1)
    local rc=$? summary
    summary=$(grep -E '^[0-9]+ passed' <<< "$out" | tail -1)
    [[ $scenario == fp8-accuracy ]] &&
      summary="$summary; $(grep -E 'Frobenius' <<< "$out" | sed 's/ on the same rounded operands: relative Frobenius error/:/' | tr '\n' ';')"
    if [[ $rc -eq 0 ]]; then row "runtime $scenario" PASS "$summary"
    else row "runtime $scenario" FAIL "$summary $(grep -m3 '^FAIL' <<< "$out" | tr '\n' ' ')" "$out"; fi
  done
  nccl_check "$build"
  local case steps tol lib
  while read -r case steps tol; do
    local dir="$bundle/cases/$case" data=() runner=("$build/ds-step-run") dp=0
    for f in "$dir"/data/*.npy; do data+=(--data "$(basename "$f" .npy)=$f"); done
    # A data-parallel step: the runner with the comm layer, on NCCL.
    if grep -q '"data_parallel": true' "$dir/step.json"; then
      dp=1 lib=$(find_nccl)
      if [[ ! -x $build/ds-step-run-nccl ]]; then
        row "$case ($steps steps vs CPU)" "UNSUPPORTED" "the bundle was prepared without nccl.h"
        continue
      elif [[ -z $lib ]]; then
        row "$case ($steps steps vs CPU)" "UNSUPPORTED" "no libnccl.so.2 (DS_NCCL_LIBRARY)"
        continue
      fi
      runner=(env DS_CUDA_COLLECTIVES=nccl DS_NCCL_LIBRARY="$lib" "$build/ds-step-run-nccl")
    fi
    t=$(allow 120)
    ((t > 0)) || { over_budget "$case ($steps steps vs CPU)"; continue; }
    out=$(timeout "$t" "${runner[@]}" "$dir" "${data[@]}" --steps "$steps" \
            --report-every 10 --expect "$dir/ref.json" --rtol "$tol" \
            --losses "$dir/gpu.json" 2>&1)
    local rc=$? diff ms collectives=""
    diff=$(grep -o 'max relative difference [^ ]*' <<< "$out" | awk '{print $4}')
    ms=$(grep -o '^ds-step-run: [0-9.]* ms/step' <<< "$out" | awk '{print $2}')
    if ((dp)); then
      # The compression ratio of a compressing step (the dense bytes of its
      # gradients over what it sent, the loss's all-reduce included).
      local ratio=""
      grep -q 'ds-compress-allreduce' "$dir/step.json" &&
        ratio=$(grep -o '[0-9]* bytes sent a step ([0-9]* dense)' <<< "$out" |
          awk '{ sub(/\(/, "", $6); if ($1 > 0) printf "%.2fx", $6 / $1 }')
      [[ -n $ratio ]] && collectives="; compression $ratio"
      collectives+="; $(grep -o 'device collectives: .*' <<< "$out")"
      # What the runtime copied over PCIe a step (the inputs included).
      local pcie
      pcie=$(grep -o "the runtime's copies: [0-9]* bytes to the host, [0-9]* to the device" <<< "$out" |
        awk '{ printf "PCIe %s B/step to the host, %s back", $4, $9 }')
      [[ -n $pcie ]] && collectives+="; $pcie"
    fi
    if [[ $rc -eq 0 ]]; then
      row "$case ($steps steps vs CPU)" PASS "max rel. loss diff ${diff} (tol $tol), ${ms} ms/step$collectives"
    else
      row "$case ($steps steps vs CPU)" FAIL "${diff:+max rel. loss diff $diff (tol $tol) }$(why_failed $rc "$t" "$out")" "$out"
    fi
    # A data-parallel step runs as a graph when all of its collectives are
    # NCCL's: not with a scheme that encodes on the host (three-tier, top-k,
    # PowerSGD; the capture would fail by name).
    if ((dp)) && grep -q 'ds-compress-allreduce' "$dir/step.json" &&
      ! grep -qE 'scheme=(fp16|bf16)' "$dir/step.json"; then
      continue
    fi
    graph_case "$dir" "$case" "$steps" "$tol" "$build" "${data[@]}"
  done < "$bundle/cases.txt"
  dp_vs_single "$bundle"
  [[ -d "$bundle/lowering" ]] && run_lowering "$bundle" "$build"
  [[ -d "$bundle/parity" ]] && run_parity "$bundle" "$build"
  t=$(allow 120)
  if [[ -n $emulated ]]; then
    row "bench" "UNSUPPORTED" "kernels emulated on the host"
  elif ((t > 0)); then
    out=$(DS_CUDA_BENCH_N=${DS_CUDA_BENCH_N:-8192} timeout "$t" "$build/ds-runtime-cuda-check" bench 2>&1)
    while read -r line; do
      [[ -n "$line" ]] && row "$(cut -d: -f2 <<< "$line" | sed 's/^ //')" "-" "$(cut -d: -f3- <<< "$line" | sed 's/^ //')"
    done <<< "$(grep '^bench:' <<< "$out")"
    grep -q '^FAIL' <<< "$out" && row "bench" FAIL "$(grep -m1 '^FAIL' <<< "$out")" "$out"
  else
    over_budget "bench bf16 / e4m3"
  fi
  [[ -f "$bundle/bench/size.txt" ]] && bench_gpt "$bundle" "$build"
  print_table "$device${emulated:+; $emulated}" "$built"
  pack_report
  ((failed)) && return 1
  ((skipped)) && return 2
  return 0
}

# libnccl.so.2 for the NCCL check: DS_NCCL_LIBRARY, PyTorch's wheel
# (nvidia-nccl-cu*), the loader's cache, the toolkit; empty if none.
find_nccl() {
  local lib py=${DS_GPU_CHECK_PYTHON:-python3}
  [[ -n ${DS_NCCL_LIBRARY:-} ]] && { echo "$DS_NCCL_LIBRARY"; return; }
  lib=$("$py" -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2> /dev/null)
  [[ -f $lib ]] && { echo "$lib"; return; }
  lib=$(ldconfig -p 2> /dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
  [[ -f $lib ]] && { echo "$lib"; return; }
  for lib in /usr/local/cuda/lib64/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2; do
    [[ -f $lib ]] && { echo "$lib"; return; }
  done
}

# A data-parallel step of one rank against the same step without data
# parallelism, both as trained on the device (their gpu.json): the mean of
# one rank is its gradient, so only the bucket plumbing differs (the GEMMs
# writing offset views of a bucket, the probes, NCCL's in-place calls).
# Identical losses say that plumbing changed no number; a difference
# within the case's tolerance is what cuBLASLt's choice of algorithm for
# an offset output may give.
dp_vs_single() {
  local bundle=$1 dir case single tol py=${DS_GPU_CHECK_PYTHON:-python3} out
  for dir in "$bundle"/cases/*-dp/; do
    [[ -d $dir ]] || continue
    case=$(basename "$dir") single="${case%-dp}-policy"
    tol=$(awk -v c="$case" '$1 == c {print $3}' "$bundle/cases.txt")
    if [[ ! -f $dir/gpu.json || ! -f $bundle/cases/$single/gpu.json ]]; then
      row "$case vs $single" "UNSUPPORTED" "not both trained on the device"
      continue
    fi
    out=$("$py" - "$dir/gpu.json" "$bundle/cases/$single/gpu.json" <<'PY'
import json, sys
a, b = ([s["loss"] for s in json.load(open(f))["steps"]] for f in sys.argv[1:3])
worst = 0.0
for x, y in zip(a, b):
    if x is None or y is None:
        worst = worst if x is y else 1e300  # awk reads no "inf"
    else:
        worst = max(worst, abs(x - y) / max(abs(y), 1e-30))
print(min(len(a), len(b)), worst)
PY
)
    local n=${out%% *} worst=${out##* }
    if [[ -z $out ]] || ! awk -v w="$worst" -v t="$tol" 'BEGIN { exit !(w <= t) }'; then
      row "$case vs $single" FAIL "max rel. loss diff ${worst:-?} over ${n:-?} steps (tol $tol)"
    elif awk -v w="$worst" 'BEGIN { exit !(w == 0) }'; then
      row "$case vs $single" PASS "losses identical over $n steps (one rank: the collectives change no number)"
    else
      row "$case vs $single" PASS "max rel. loss diff $worst over $n steps (tol $tol)"
    fi
  done
}

# The collectives NCCL serves, on the device, in one process: the values
# each writes (f32, f64, the four reductions, starts and waits in place or
# not, broadcasts), the misuse a step could make, the finalisation; then
# (`graphs`) a step in miniature on NCCL as a CUDA graph.
nccl_check() {
  local build=$1 lib out rc
  t=$(allow 60)
  ((t > 0)) || { over_budget "runtime nccl (1 rank)"; return; }
  if [[ ! -x $build/ds-runtime-nccl-check ]]; then
    row "runtime nccl (1 rank)" "UNSUPPORTED" "the bundle was prepared without nccl.h"
    return
  fi
  lib=$(find_nccl)
  if [[ -z $lib ]]; then
    row "runtime nccl (1 rank)" "UNSUPPORTED" "no libnccl.so.2 (DS_NCCL_LIBRARY)"
    return
  fi
  local scenario name summary
  # The entry points, then a step in miniature captured into a CUDA graph
  # with its NCCL collectives (the communication stream's fork and join
  # under the real driver's rules) and launched with new inputs, then a
  # top-k start of device slots (the staging thread's own copies), then
  # such slots all-gathered on NCCL.
  for scenario in "" graphs topk-slots topk-gather; do
    name="runtime nccl${scenario:+ $scenario} (1 rank)"
    t=$(allow 60)
    ((t > 0)) || { over_budget "$name"; continue; }
    out=$(DS_CUDA_COLLECTIVES=nccl DS_NCCL_LIBRARY=$lib timeout "$t" \
            "$build/ds-runtime-nccl-check" $scenario 2>&1)
    rc=$?
    summary="$(grep -E '^[0-9]+ passed' <<< "$out" | tail -1); $(basename "$lib")"
    if [[ $rc -eq 0 ]]; then row "$name" PASS "$summary"
    else row "$name" FAIL "$summary $(why_failed $rc "$t" "$out")" "$out"; fi
  done
}

# The device tool brings back at most 8 files from $OUT: when the report
# is there and holds more, everything but the table goes into details.tgz.
pack_report() {
  [[ -n ${OUT:-} && $report == "$OUT" ]] || return 0
  local files
  files=$(cd "$report" && find . -type f | wc -l)
  ((files > 7)) || return 0
  (cd "$report" && find . -type f ! -name gpu-check.txt ! -name details.tgz -printf '%P\n' |
     tar czf details.tgz -T - &&
     find . -mindepth 1 ! -name gpu-check.txt ! -name details.tgz -delete) &&
    echo "gpu-check: the logs, build log and profiles are in $report/details.tgz"
}

# One case again with --cuda-graphs: the same losses as the direct run on
# the device, bit for bit (the same kernels, GEMMs and NCCL collectives,
# replayed), or within the CPU tolerance when the direct run failed. Runs
# the caller's `runner` (the direct run's command: ds-step-run-nccl on
# NCCL for a data-parallel step).
graph_case() {
  local dir=$1 case=$2 steps=$3 tol=$4 build=$5 out rc expect rtol ms
  shift 5
  if [[ -n $emulated ]]; then
    row "$case graphs" "UNSUPPORTED" "kernels emulated on the host"
    return
  fi
  t=$(allow 120)
  ((t > 0)) || { over_budget "$case graphs"; return; }
  expect="$dir/gpu.json" rtol=0
  [[ -f $expect ]] || { expect="$dir/ref.json"; rtol=$tol; }
  out=$(timeout "$t" "${runner[@]}" "$dir" "$@" --steps "$steps" \
          --report-every 10 --cuda-graphs --expect "$expect" --rtol "$rtol" 2>&1)
  rc=$?
  ms=$(grep -o '^ds-step-run: [0-9.]* ms/step' <<< "$out" | awk '{print $2}')
  if [[ $rc -eq 0 ]]; then
    row "$case graphs" PASS "losses vs $(basename "$expect") (rtol $rtol): $(grep -o 'max relative difference [^ ]*' <<< "$out" | awk '{print $4}'), ${ms} ms/step; graphs $(grep -o 'CUDA graphs: .*' <<< "$out" | sed 's/^CUDA graphs: //')"
  else
    row "$case graphs" FAIL "$(why_failed $rc "$t" "$out")" "$out"
  fi
}

# The lowering execution cases: each group's step once, its results
# against the references (compare_cases.py: NumPy only).
run_lowering() {
  local bundle=$1 build=$2 dir group out rc py=${DS_GPU_CHECK_PYTHON:-python3}
  if ! "$py" -c 'import numpy' 2> /dev/null; then
    row "lowering cases" "UNSUPPORTED" "no NumPy for $py"
    return
  fi
  for dir in "$bundle"/lowering/*/; do
    group=$(basename "$dir")
    rm -rf "$dir/gpu"
    t=$(allow 60)
    ((t > 0)) || { over_budget "lowering $group"; continue; }
    [[ -f "$dir/step.so" ]] || gunzip -k "$dir/step.so.gz"
    for z in "$dir"/init/*.npy.gz "$dir"/reference/*.npy.gz; do
      [[ -f $z && ! -f ${z%.gz} ]] && gunzip -k "$z"
    done
    out=$(timeout "$t" "$build/ds-step-run" "$dir" --steps 1 --quiet \
            --save-results "$dir/gpu" 2>&1)
    rc=$?
    if ((rc != 0)); then
      row "lowering $group" FAIL "$(why_failed $rc "$t" "$out")" "$out"
      continue
    fi
    out=$("$py" "$bundle/lowering/compare_cases.py" "$dir" "$dir/gpu" 2>&1)
    if [[ $out == PASS:* ]]; then row "lowering $group" PASS "${out#PASS: $group: }"
    else row "lowering $group" FAIL "$(head -1 <<< "${out#FAIL: $group: }")" "$out"; fi
  done
  out=$("$py" -c "import json,sys; l=json.load(open(sys.argv[1]))['left_out']; print(len(l))" "$bundle/lowering/index.json")
  [[ $out != 0 ]] && row "lowering cases left out" "-" "$out (ops without GPU kernels)"
  return 0
}

# The PyTorch parity cases: each trained by ds-step-run on the device,
# then check_parity.py's criteria against PyTorch's results
# (parity_compare.py: NumPy only).
run_parity() {
  local bundle=$1 build=$2 dir name out f steps rc py=${DS_GPU_CHECK_PYTHON:-python3}
  if ! "$py" -c 'import numpy' 2> /dev/null; then
    row "parity" "UNSUPPORTED" "no NumPy for $py"
    return
  fi
  for dir in "$bundle"/parity/*/; do
    name=$(basename "$dir")
    [[ -f "$dir/step.so" ]] || gunzip -k "$dir/step.so.gz"
    local data=()
    for f in "$dir"/data/*.npy; do data+=(--data "$(basename "$f" .npy)=$f"); done
    steps=$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['steps'])" "$dir/reference/parity.json")
    rm -rf "$dir/gpu-state"
    t=$(allow 60)
    ((t > 0)) || { over_budget "parity $name"; continue; }
    out=$(timeout "$t" "$build/ds-step-run" "$dir" "${data[@]}" --steps "$steps" \
            --quiet --losses "$dir/gpu.json" --save-state "$dir/gpu-state" 2>&1)
    rc=$?
    if ((rc != 0)); then
      row "parity $name" FAIL "$(why_failed $rc "$t" "$out")" "$out"
      continue
    fi
    out=$("$py" "$bundle/parity/parity_compare.py" "$dir" "$dir/gpu.json" "$dir/gpu-state" 2>&1)
    if [[ $out == PASS:* ]]; then row "parity $name" PASS "${out#PASS: }"
    else row "parity $name" FAIL "$(head -1 <<< "${out#FAIL: }")" "$out"; fi
  done
}

# The GPT step: ds (f32, BF16-mixed, FP8 policy) and PyTorch on one shape,
# then ds's FP8 step without row groups and amax-and-cast kernels (last: the least important when
# the budget runs short).
bench_gpt() {
  local bundle=$1 build=$2 size variant out ms_ds_fp8="" ms_ds_bf16="" ms_pt_bf16="" ms_unfused="" ms_base
  read -r -a size < "$bundle/bench/size.txt"
  local layers=${size[-1]}
  bench_data=()
  for f in "$bundle"/bench/data/*.npy; do bench_data+=(--data "$(basename "$f" .npy)=$f"); done
  for variant in f32 bf16 fp8; do
    bench_ds "$bundle" "$build" "$variant" "$layers"
    [[ $variant == fp8 ]] && ms_ds_fp8=$bench_ms
    [[ $variant == bf16 ]] && ms_ds_bf16=$bench_ms
  done
  t=$(allow 180)
  if ((t == 0)); then
    over_budget "gpt ${layers}x1024 torch"
  elif python3 -c 'import torch' 2> /dev/null; then
    out=$(timeout "$t" python3 "$bundle/bench/torch_gpt.py" "${size[@]}" 2>&1)
    while read -r line; do
      [[ $line == torch* ]] || continue
      row "gpt ${layers}x1024 $(cut -d: -f1 <<< "$line")" "-" "$(cut -d: -f2- <<< "$line" | sed 's/^ //')"
      [[ $line == "torch autocast-bf16:"* ]] && ms_pt_bf16=$(awk '{print $3}' <<< "$line")
    done <<< "$out"
  else
    row "gpt ${layers}x1024 torch" "UNSUPPORTED" "no PyTorch for python3"
  fi
  if [[ -n "$ms_ds_fp8" && -n "$ms_pt_bf16" ]]; then
    row "ds fp8 vs torch autocast-bf16" "-" "$(awk -v a="$ms_pt_bf16" -v b="$ms_ds_fp8" 'BEGIN{printf "%.2fx (goal >= 1.2x)", a/b}')"
  fi
  bench_ds "$bundle" "$build" fp8 "$layers" graphs --cuda-graphs
  if [[ -n "$ms_ds_fp8" && -n "$bench_ms" ]]; then
    row "ds fp8: CUDA graphs vs launches" "-" "$(awk -v a="$ms_ds_fp8" -v b="$bench_ms" 'BEGIN{printf "%.2fx faster", a/b}')"
    [[ -n "$ms_pt_bf16" ]] &&
      row "ds fp8 graphs vs torch autocast-bf16" "-" "$(awk -v a="$ms_pt_bf16" -v b="$bench_ms" 'BEGIN{printf "%.2fx (goal >= 1.2x)", a/b}')"
  fi
  bench_ds "$bundle" "$build" fp8-unfused "$layers"
  ms_unfused=$bench_ms
  if [[ -n "$ms_ds_fp8" && -n "$ms_unfused" ]]; then
    row "ds fp8: row groups vs unfused" "-" "$(awk -v a="$ms_unfused" -v b="$ms_ds_fp8" 'BEGIN{printf "%.2fx faster", a/b}')"
  fi
  local base
  for base in bf16 fp8; do
    [[ $base == bf16 ]] && ms_base=$ms_ds_bf16 || ms_base=$ms_ds_fp8
    bench_ds "$bundle" "$build" "$base-unroll1" "$layers"
    if [[ -n "$ms_base" && -n "$bench_ms" ]]; then
      row "ds $base: vectors vs one element a thread" "-" "$(awk -v a="$bench_ms" -v b="$ms_base" 'BEGIN{printf "%.2fx faster", a/b}')"
    fi
    bench_ds "$bundle" "$build" "$base-scalar" "$layers"
    if [[ -n "$ms_base" && -n "$bench_ms" ]]; then
      row "ds $base: vectors vs scalar groups" "-" "$(awk -v a="$bench_ms" -v b="$ms_base" 'BEGIN{printf "%.2fx faster", a/b}')"
    fi
  done
  bench_ds "$bundle" "$build" fp8-intcasts "$layers"
  if [[ -n "$ms_ds_fp8" && -n "$bench_ms" ]]; then
    row "ds fp8: cvt casts vs integer code" "-" "$(awk -v a="$bench_ms" -v b="$ms_ds_fp8" 'BEGIN{printf "%.2fx faster", a/b}')"
  fi
  bench_ds "$bundle" "$build" fp8-index32 "$layers"
  if [[ -n "$ms_ds_fp8" && -n "$bench_ms" ]]; then
    row "ds fp8: 32-bit vs 64-bit indices" "-" "$(awk -v a="$ms_ds_fp8" -v b="$bench_ms" 'BEGIN{printf "%.2fx faster", a/b}')"
  fi
  bench_ds "$bundle" "$build" fp8-uncached "$layers"
  if [[ -n "$ms_ds_fp8" && -n "$bench_ms" ]]; then
    row "ds fp8: cached rows vs reread rows" "-" "$(awk -v a="$bench_ms" -v b="$ms_ds_fp8" 'BEGIN{printf "%.2fx faster", a/b}')"
  fi
  bench_ds "$bundle" "$build" bf16-apart "$layers"
  if [[ -n "$ms_ds_bf16" && -n "$bench_ms" ]]; then
    row "ds bf16: column sums in row groups vs apart" "-" "$(awk -v a="$bench_ms" -v b="$ms_ds_bf16" 'BEGIN{printf "%.2fx faster", a/b}')"
  fi
  bench_ds "$bundle" "$build" bf16-whole "$layers"
  if [[ -n "$ms_ds_bf16" && -n "$bench_ms" ]]; then
    row "ds bf16: causal GEMMs in row blocks vs whole" "-" "$(awk -v a="$bench_ms" -v b="$ms_ds_bf16" 'BEGIN{printf "%.2fx faster", a/b}')"
  fi
  # Padding: the embedding gradient walks the padding token's list of
  # 4096 positions in pieces; a serial walk would show here.
  if [[ -d "$bundle/bench/data-padded" ]]; then
    local uniform=("${bench_data[@]}")
    bench_data=()
    for f in "$bundle"/bench/data-padded/*.npy; do bench_data+=(--data "$(basename "$f" .npy)=$f"); done
    bench_ds "$bundle" "$build" fp8 "$layers" padded
    bench_data=("${uniform[@]}")
    if [[ -n "$ms_ds_fp8" && -n "$bench_ms" ]]; then
      row "ds fp8: half-padded vs uniform" "-" "$(awk -v a="$bench_ms" -v b="$ms_ds_fp8" 'BEGIN{printf "%.2fx the time", a/b}')"
    fi
  fi
  profile_ds "$bundle" "$build" fp8 "$layers"
  profile_ds "$bundle" "$build" bf16 "$layers"
}

# Where one ds variant's device time goes: 4 steps with ds-step-run
# --profile (every kernel and GEMM between two events), the whole list in
# $report/profile-<variant>.txt (joined with the launch report in
# profile-vs-bound-<variant>.txt), and a row with the GEMMs' and the
# kernels' shares and the longest kernel.
profile_ds() {
  local bundle=$1 build=$2 variant=$3 layers=$4 out
  local dir="$bundle/bench/gpt-$variant"
  [[ -d $dir ]] || return 0
  t=$(allow 60)
  ((t > 0)) || { over_budget "gpt ${layers}x1024 profile $variant"; return 0; }
  out=$(timeout "$t" "$build/ds-step-run" "$dir" --init-random 0 "${bench_data[@]}" \
          --steps 4 --quiet --profile 100000 2>&1)
  local rc=$?
  if [[ -n $report ]]; then
    printf '%s\n' "$out" > "$report/profile-$variant.txt"
    # Each kernel's and GEMM's time against its line of the launch report.
    [[ $rc -eq 0 && -f "$bundle/bench/launch-report-$variant.txt" ]] &&
      python3 "$bundle/bench/profile_vs_bound.py" "$report/profile-$variant.txt" \
        "$bundle/bench/launch-report-$variant.txt" --top 60 \
        > "$report/profile-vs-bound-$variant.txt" 2>&1
  fi
  if [[ $rc -ne 0 ]]; then
    row "gpt ${layers}x1024 profile $variant" FAIL "$(grep -m1 error <<< "$out" || echo "exit $rc")" "$out"
    return 0
  fi
  row "gpt ${layers}x1024 profile $variant" "-" "$(awk '
    /profile of steps/ { for (i = 1; i <= NF; ++i) if ($i == "ms" && $(i+2) == "device") total = $(i-1) }
    /profile +[0-9.]+ ms +[0-9.]+% +[0-9.]+ calls/ {
      if ($0 ~ /cublasLt/) gemm += $3; else { kernel += $3; if (!top) { top = $NF; share = $5 } } }
    END { printf "device %.2f ms/step: GEMMs %.2f ms, kernels %.2f ms; longest kernel %s (%s)",
                 total, gemm, kernel, top, share }' <<< "$out")"
}

# One ds variant of the GPT step, 12 steps from a random state; its
# ms/step in $bench_ms (empty when it did not run).
bench_ds() {
  local bundle=$1 build=$2 variant=$3 layers=$4 tokens=$((8 * 1024))
  local dir="$bundle/bench/gpt-$variant" out work label=$3${5:+ $5}
  shift 5 2> /dev/null || shift $#
  bench_ms=""
  [[ -d $dir ]] || return 0
  t=$(allow 90)
  ((t > 0)) || { over_budget "gpt ${layers}x1024 ds $label"; return 0; }
  [[ -f "$dir/step.so" ]] || gunzip -k "$dir/step.so.gz"
  out=$(timeout "$t" "$build/ds-step-run" "$dir" --init-random 0 "${bench_data[@]}" \
          --steps 12 --report-every 12 "$@" 2>&1)
  local rc=$? ms host
  ms=$(grep -o '^ds-step-run: [0-9.]* ms/step' <<< "$out" | awk '{print $2}')
  host=$(grep -o 'host [0-9.]* ms' <<< "$out" | awk '{print $2}')
  work=$(grep -o 'per step: [0-9]* kernel launches, [0-9]* cuBLASLt GEMMs' <<< "$out" | awk '{print $3 " launches + " $6 " GEMMs"}')
  # The step's roofline bound at an H200's peaks (ds-gpu-launch-report,
  # written when the bundle was prepared).
  local bound="" rep="$bundle/bench/launch-report-$variant.txt"
  [[ -f $rep ]] && bound=$(grep -m1 -o 'bound: [0-9.]* us' "$rep" | awk '{printf "%.1f", $2 / 1000}')
  if [[ -n "$ms" ]]; then
    row "gpt ${layers}x1024 ds $label" "-" "$ms ms/step (host $host ms; ${work:-?}${bound:+; roofline bound $bound ms}), $(awk -v t=$tokens -v m="$ms" 'BEGIN{printf "%.0f", t*1000/m}') tokens/s"
    bench_ms=$ms
  else
    row "gpt ${layers}x1024 ds $label" FAIL "$(why_failed $rc "$t" "$out")" "$out"
  fi
}

print_table() {
  {
    echo
    echo "ds-mlir GPU check: $1; bundle built in $2 s, all done in $SECONDS s$( ((skipped)) && echo "; $skipped checks SKIPPED (budget $budget s)")"
    printf '%-34s %-11s %s\n' "check" "result" "measured"
    local r
    for r in "${rows[@]}"; do echo "$r"; done
  } | tee "$report/gpu-check.txt"
  ((failed)) && echo "gpu-check: the output of each failed check is in $report/logs"
  return 0
}

# The lowering and parity rows alone, with the ds-step-run in BUILD: the
# tests run them here on steps compiled for the CPU (the same bash that
# runs on the GPU machine).
rows_only() {
  local bundle=$1 build=$2
  report=${DS_GPU_CHECK_REPORT:-}
  [[ -d "$bundle/lowering" ]] && run_lowering "$bundle" "$build"
  [[ -d "$bundle/parity" ]] && run_parity "$bundle" "$build"
  ((failed)) && return 1
  ((skipped)) && return 2
  return 0
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  run) shift; run "$@" ;;
  rows) shift; rows_only "$@" ;;
  -h|--help) usage 0 ;;
  *) usage 1 ;;
esac
