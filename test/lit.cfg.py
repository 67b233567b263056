# -*- Python -*-
# lit configuration of the ds-mlir test suite.

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "DS"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.ds_obj_root, "test")
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py",
                   "__pycache__"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%shlibext", ".so"))
config.substitutions.append(("%ds_src_root", config.ds_src_root))
config.substitutions.append(("%ds_obj_root", config.ds_obj_root))
config.substitutions.append(("%ds_bin", config.ds_tools_dir))
config.substitutions.append(
    ("%ds_plugin", os.path.join(config.ds_lib_dir, "libDSPlugin.so")))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

tool_dirs = [config.ds_tools_dir, config.llvm_tools_dir]
tools = [
    "ds-opt",
    "ds-plan",
    # Debian's stock mlir-opt, which loads ds as a plugin.
    ToolSubst("%mlir_opt", os.path.join(config.llvm_tools_dir, "mlir-opt")),
]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# %mlir_runner_libs: the runtime libraries mlir-runner loads for
# printMemref* (beside Debian's mlir-runner).
_mlir_lib = os.path.join(os.path.dirname(os.path.realpath(
    os.path.join(config.llvm_tools_dir, "mlir-runner"))), "..", "lib")
config.substitutions.append(("%mlir_runner_libs", ",".join(
    os.path.join(_mlir_lib, l)
    for l in ("libmlir_c_runner_utils.so", "libmlir_runner_utils.so"))))

# Inputs/ folders hold files that tests feed to tools; they are not tests.
config.excludes.append("Inputs")

# %ds_python: the project's virtual environment (numpy, torch, ml_dtypes).
# Tests that need it say `REQUIRES: python-venv`. lit applies substitutions
# in list order, each to what the previous ones left, so an earlier pattern
# that matched "%ds_python" (or a prefix of it) would shadow this entry: it
# goes first, replacing any earlier definition. (lit's default substitutions,
# llvm_config.use_default_substitutions, define %python as lit's own
# interpreter, not %ds_python; the venv path holds no substitution pattern.)
if os.path.exists(config.ds_python):
    config.available_features.add("python-venv")
    config.substitutions = [(k, v) for (k, v) in config.substitutions
                            if k != "%ds_python"]
    config.substitutions.insert(0, ("%ds_python", config.ds_python))
else:
    lit_config.warning("no Python venv at %s; tests needing it are skipped"
                       % config.ds_python)

# %ds_mpirun: scripts/ds-mpirun (mpirun with the settings containers need).
# Multi-rank tests say `REQUIRES: mpi`; make deps installs OpenMPI.
import shutil
if shutil.which("mpirun"):
    config.available_features.add("mpi")
config.substitutions.append(
    ("%ds_mpirun", os.path.join(config.ds_src_root, "scripts", "ds-mpirun")))
config.substitutions.append(("%ds_lib", config.ds_lib_dir))

# The CUDA backend of libdsrt: its tests say `REQUIRES: cuda-runtime` and run
# on any machine, against the stub driver and cuBLASLt in %stub_cuda_dir
# (test/lib/StubCuda); %cuda_bin_dir holds the toolkit's ptxas.
if config.ds_cuda_runtime:
    config.available_features.add("cuda-runtime")
config.substitutions.append(
    ("%stub_cuda_dir", os.path.join(config.ds_lib_dir, "stub-cuda")))
# The real NCCL on the loader's path (the toolkit's): `REQUIRES: nccl-library`.
import ctypes.util
if ctypes.util.find_library("nccl"):
    config.available_features.add("nccl-library")
# The stub NCCL is built when the toolkit has nccl.h: `REQUIRES: nccl-stub`.
if os.path.exists(os.path.join(config.ds_lib_dir, "stub-cuda",
                               "libnccl.so.2")):
    config.available_features.add("nccl-stub")
config.substitutions.append(("%cuda_bin_dir", config.ds_cuda_bin_dir))

# ds-gpu-pipeline's tests assemble kernels with the CUDA toolkit's ptxas
# (gpu-module-to-binary runs it): `REQUIRES: ptxas`.
_cuda_home = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
if shutil.which("ptxas") or os.path.exists(os.path.join(_cuda_home, "bin", "ptxas")):
    config.available_features.add("ptxas")
    llvm_config.with_environment("PATH", os.path.join(_cuda_home, "bin"),
                                 append_path=True)
