"""Compiled ds code called from Python, for numerics checks against PyTorch.

A ds module goes through `ds-opt --ds-cpu-pipeline` (or any pipeline),
`mlir-translate --mlir-to-llvmir` and `clang -O3 -march=native -shared`
into a shared object; its functions are called through their C interface
(`_mlir_ciface_<name>`, one memref descriptor per argument) on NumPy
buffers, without copies. Mark each function `attributes
{llvm.emit_c_interface}`; after the pipeline its results are trailing
out-parameters, so a call passes the inputs, then arrays for the results:

    mod = CompiledModule(text, ds_opt="build/bin/ds-opt")
    x = np.arange(16, dtype=np.float32)
    y = np.empty(16, dtype=np.uint8)          # storage of tensor<16xf8E4M3FN>
    mod.call("cast", x, y)

Narrow float results are bytes in memory: pass an array of the storage
width (uint8 for FP8, uint16 for bf16/f16) or an ml_dtypes array. The
runtime library (libdsrt, for library GEMMs) is linked when `runtime` names
it. Used by test/Integration/Numerics and benchmarks/casts.py.
"""

import ctypes
import os
import shutil
import subprocess
import tempfile

import numpy as np

LLVM_BIN = os.environ.get("DS_LLVM_BIN", "/usr/lib/llvm-22/bin")


def _descriptor_type(rank):
    """The ctypes struct of MLIR's ranked memref descriptor of `rank`."""
    fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
              ("offset", ctypes.c_int64)]
    if rank:
        fields += [("sizes", ctypes.c_int64 * rank),
                   ("strides", ctypes.c_int64 * rank)]
    return type(f"MemRef{rank}D", (ctypes.Structure,), {"_fields_": fields})


_DESCRIPTORS = {}


def memref_descriptor(array):
    """A descriptor viewing `array` (strides in elements, no copy)."""
    rank = array.ndim
    cls = _DESCRIPTORS.setdefault(rank, _descriptor_type(rank))
    d = cls()
    ptr = array.ctypes.data
    d.allocated = ptr
    d.aligned = ptr
    d.offset = 0
    for i in range(rank):
        if array.strides[i] % array.itemsize:
            raise ValueError("strides must be whole elements")
        d.sizes[i] = array.shape[i]
        d.strides[i] = array.strides[i] // array.itemsize
    return d


def run_tool(cmd, **kw):
    """Runs `cmd`; raises with its stderr on failure."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed "
                           f"({r.returncode}):\n{r.stderr[-4000:]}")
    return r.stdout


class CompiledModule:
    """A ds module compiled to a shared object and loaded with ctypes."""

    def __init__(self, text, ds_opt, pipeline=("--ds-cpu-pipeline",),
                 runtime=None, workdir=None, cflags=("-O3", "-march=native")):
        self._own_dir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="ds-compiled-")
        src = os.path.join(self.workdir, "module.mlir")
        llvm_mlir = os.path.join(self.workdir, "module.llvm.mlir")
        ll = os.path.join(self.workdir, "module.ll")
        so = os.path.join(self.workdir, "module.so")
        with open(src, "w") as f:
            f.write(text)
        run_tool([ds_opt, src, *pipeline, "-o", llvm_mlir])
        run_tool([os.path.join(LLVM_BIN, "mlir-translate"), "--mlir-to-llvmir",
                  llvm_mlir, "-o", ll])
        # memrefCopy and friends live in MLIR's C runner utilities.
        llvm_lib = os.path.join(os.path.dirname(LLVM_BIN), "lib")
        link = [os.path.join(llvm_lib, "libmlir_c_runner_utils.so"),
                f"-Wl,-rpath,{llvm_lib}"]
        if runtime:
            link += [runtime, f"-Wl,-rpath,{os.path.dirname(runtime)}"]
        run_tool([os.path.join(LLVM_BIN, "clang"), *cflags, "-shared", "-fPIC",
                  "-Wno-override-module", ll, "-o", so, *link])
        self.lib = ctypes.CDLL(so)
        self._functions = {}

    def function(self, name):
        """The C interface of `name`, taking NumPy arrays."""
        if name not in self._functions:
            f = getattr(self.lib, f"_mlir_ciface_{name}")
            f.restype = None
            self._functions[name] = f
        return self._functions[name]

    def call(self, name, *arrays):
        """Calls `name` with one descriptor per array (inputs, then outputs);
        the arrays must stay alive for the call (they do: the caller holds
        them)."""
        for a in arrays:
            if not isinstance(a, np.ndarray):
                raise TypeError("arguments are NumPy arrays")
        descs = [memref_descriptor(a) for a in arrays]
        self.function(name)(*[ctypes.byref(d) for d in descs])

    def close(self):
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
