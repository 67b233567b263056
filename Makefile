# ds-mlir top-level driver. Every target is idempotent and installs what it
# needs: Debian packages when run as root, otherwise it prints the exact
# apt-get line and stops.
#
#   make deps    toolchain and libraries
#   make build   configure once, build into build/ (tools in build/bin/)
#   make check   deps + build + every test (lit and ctest)
#   make docs    regenerate the dialect and pass docs under docs/
#   make demo    train a small GPT-style character LM with ds-run (CPU), in
#                FP32, with the mixed-precision policies, with QAT (INT8,
#                the seeds' tiers) and with 8x8 block sparsity
#   make bench   ds-run vs PyTorch eager on a GPT-style training step (and
#                at 1024 tokens ds-run's causal GEMMs in 256-row blocks vs
#                whole),
#                FP32 vs the mixed-precision policy (memory, step time), and
#                int8 inference vs f32 (GEMMs, and the examples' forwards),
#                8x8 block-sparse kernels vs dense sgemm and the sparse GPT
#                step vs dense; data-parallel step time per all-reduce
#                scheme at 2 and 4 MPI ranks (communication hidden behind
#                the backward) and the schemes at 64 ranks / 7B (link model);
#                ds-plan's pipeline plans on the seed's two heterogeneous
#                clusters (70B- and 7B-shaped graphs) vs uniform-split and
#                homogeneous-only baselines, and ds-plan's own run time;
#                a 2-stage pipeline on 2 ranks: measured vs predicted stage
#                compute and bubble (GPipe, 1F1B)
#   make accuracy  long runs: INT8 QAT vs FP32 held-out loss (MLP, CNN,
#                1000 steps, 3 seeds), integer inference beside it, and INT4
#                QAT of the GPT block (d_model 256) on fortune-cookie text;
#                block-sparse GPT training (the seeds' 80 -> 98 % schedule,
#                constant 90 %) vs dense; data-parallel GPT on 4 MPI ranks,
#                every all-reduce compression vs uncompressed
#   make gpu-emulated  the whole GPU device check (scripts/gpu-check.sh)
#                without a GPU: every step compiled with its kernels run on
#                the host, trained on the stub libcuda, one table

LLVM_PREFIX  ?= /usr/lib/llvm-22
BUILD_DIR    ?= build
JOBS         ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS  ?=

# Debian packages the build and the tests need.
DEB_PACKAGES := cmake ninja-build clang-22 lld-22 llvm-22-dev llvm-22-tools \
                libmlir-22-dev mlir-22-tools libgtest-dev libbenchmark-dev \
                libdnnl-dev libopenmpi-dev openmpi-bin nlohmann-json3-dev \
                python3 python3-venv

.PHONY: all deps build check docs demo bench accuracy gpu-emulated clean

all: build

deps:
	@./scripts/install-deps.sh $(DEB_PACKAGES)
	@./scripts/make-venv.sh

$(BUILD_DIR)/build.ninja:
	cmake -G Ninja -S . -B $(BUILD_DIR) \
	  -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_C_COMPILER=$(LLVM_PREFIX)/bin/clang \
	  -DCMAKE_CXX_COMPILER=$(LLVM_PREFIX)/bin/clang++ \
	  -DLLVM_USE_LINKER=lld \
	  -DMLIR_DIR=$(LLVM_PREFIX)/lib/cmake/mlir \
	  -DLLVM_EXTERNAL_LIT=$(LLVM_PREFIX)/bin/lit \
	  $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/build.ninja
	ninja -C $(BUILD_DIR) -j $(JOBS)

check: build
	ninja -C $(BUILD_DIR) -j $(JOBS) check-ds

docs: build
	ninja -C $(BUILD_DIR) ds-docs
	./scripts/update-docs.sh $(BUILD_DIR)

demo: build
	@./scripts/install-deps.sh fortunes
	./demo/run_demo.sh

accuracy: build
	@./scripts/install-deps.sh fortunes
	$(HOME)/.cache/ds-mlir/venv/bin/python benchmarks/qat_accuracy.py --ds-run $(BUILD_DIR)/bin/ds-run
	$(HOME)/.cache/ds-mlir/venv/bin/python benchmarks/sparsity_accuracy.py --ds-run $(BUILD_DIR)/bin/ds-run
	$(HOME)/.cache/ds-mlir/venv/bin/python benchmarks/dp_accuracy.py --ds-run $(BUILD_DIR)/bin/ds-run

bench: build
	$(HOME)/.cache/ds-mlir/venv/bin/python benchmarks/gpt_step.py --ds-run $(BUILD_DIR)/bin/ds-run
	$(HOME)/.cache/ds-mlir/venv/bin/python benchmarks/gpt_step.py --ds-run $(BUILD_DIR)/bin/ds-run \
	  --d-model 128 --heads 2 --seq 1024 --batch 2 --compare-causal-block
	$(HOME)/.cache/ds-mlir/venv/bin/python benchmarks/conv_step.py \
	  --ds-opt $(BUILD_DIR)/bin/ds-opt --ds-run $(BUILD_DIR)/bin/ds-run
	$(HOME)/.cache/ds-mlir/venv/bin/python benchmarks/mixed_precision.py \
	  --ds-opt $(BUILD_DIR)/bin/ds-opt --ds-run $(BUILD_DIR)/bin/ds-run
	$(HOME)/.cache/ds-mlir/venv/bin/python benchmarks/integer_inference.py \
	  --ds-run $(BUILD_DIR)/bin/ds-run \
	  --gemm-bench $(BUILD_DIR)/bin/ds-runtime-gemm-benchmark
	$(HOME)/.cache/ds-mlir/venv/bin/python benchmarks/sparsity.py \
	  --ds-run $(BUILD_DIR)/bin/ds-run \
	  --kernel-bench $(BUILD_DIR)/bin/ds-runtime-sparse-benchmark
	$(HOME)/.cache/ds-mlir/venv/bin/python benchmarks/dp_step.py --ds-run $(BUILD_DIR)/bin/ds-run
	$(HOME)/.cache/ds-mlir/venv/bin/python benchmarks/dp_simulate.py
	$(HOME)/.cache/ds-mlir/venv/bin/python benchmarks/plan_bench.py \
	  --ds-plan $(BUILD_DIR)/bin/ds-plan
	$(HOME)/.cache/ds-mlir/venv/bin/python benchmarks/pipeline_bench.py \
	  --ds-run $(BUILD_DIR)/bin/ds-run --ds-plan $(BUILD_DIR)/bin/ds-plan
	$(HOME)/.cache/ds-mlir/venv/bin/python benchmarks/gpu_bounds.py \
	  --ds-opt $(BUILD_DIR)/bin/ds-opt --data-parallel

EMULATED := $(BUILD_DIR)/gpu-bundle-emulated
gpu-emulated: build
	./scripts/gpu-check.sh prepare --emulate-kernels --build $(BUILD_DIR) --out $(EMULATED)
	env DS_STUB_CUDA_POISON=1 DS_CUDA_DRIVER=$(BUILD_DIR)/lib/stub-cuda/libcuda.so.1 \
	  DS_CUBLASLT_LIBRARY=$(BUILD_DIR)/lib/stub-cuda/libcublasLt.so \
	  DS_GPU_CHECK_PYTHON=$(HOME)/.cache/ds-mlir/venv/bin/python \
	  DS_GPU_CHECK_REPORT=$(EMULATED)/report \
	  bash $(EMULATED)/gpu-check.sh run $(EMULATED)

clean:
	rm -rf $(BUILD_DIR)
