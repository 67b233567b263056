"""Checks libdsrt's mgpu* functions against the calls MLIR emits.

Lowers each input with the stock mlir-opt (NVVM target, gpu-module-to-binary
in format `bin` and `isa`, gpu-to-llvm) and mlir-translate, collects every
`declare ... @mgpu*(...)` of the LLVM IR, and checks that each function is

  1. exported by the library (llvm-nm -D --defined-only), and
  2. declared in the header with C types that map to the same LLVM types
     (pointers -> ptr, int64_t/size_t/intptr_t/uint64_t -> i64,
     int32_t/int/unsigned -> i32, int16_t/uint16_t -> i16,
     int8_t/bool/char -> i8, void).

Also checks that every mgpu* function the header declares is exported.
Prints one line per function ("ok: mgpuMemAlloc(i64, ptr, i8) -> ptr") and
"mgpu-signatures: N declared, M failed"; exits 1 on any failure, including
when the inputs declare no mgpu* function at all (then nothing was checked).

Usage: check_mgpu_signatures.py --mlir-opt PATH --cuda-bin DIR
           --header ds_runtime_cuda.h --library libdsrt.so INPUT.mlir...
mlir-translate and llvm-nm are taken from mlir-opt's directory; ptxas (for
format=bin) from --cuda-bin. Python standard library only.
"""
import argparse
import os
import re
import subprocess
import sys

PIPELINE = [
    '--nvvm-attach-target=chip=sm_90 features=+ptx80',
    '--convert-gpu-to-nvvm',
    '--reconcile-unrealized-casts',
    None,  # --gpu-module-to-binary=format=...
    '--gpu-to-llvm',
    '--convert-to-llvm',
    '--reconcile-unrealized-casts',
]

C_TO_LLVM = {
    'void': 'void',
    'int64_t': 'i64', 'uint64_t': 'i64', 'size_t': 'i64', 'intptr_t': 'i64',
    'uintptr_t': 'i64', 'int32_t': 'i32', 'uint32_t': 'i32', 'int': 'i32',
    'unsigned': 'i32', 'int16_t': 'i16', 'uint16_t': 'i16', 'short': 'i16',
    'int8_t': 'i8', 'uint8_t': 'i8', 'bool': 'i8', 'char': 'i8',
}

DECLARE = re.compile(r'^declare\s+(?:\w+\s+)*?(\S+)\s+@(mgpu\w+)\((.*)\)',
                     re.M)


def run(cmd, stdin=None, env=None):
    result = subprocess.run(cmd, input=stdin, capture_output=True, text=True,
                            env=env)
    if result.returncode != 0:
        sys.exit('command failed (%d): %s\n%s' % (result.returncode,
                                                    ' '.join(cmd),
                                                    result.stderr))
    return result.stdout


def llvm_type(text):
    """The LLVM type of a declaration's parameter type, dropping attributes
    such as `noundef`."""
    return text.split()[0]


def declared(mlir_opt, translate, path, fmt, env):
    """{name: (return type, [parameter types])} of the lowered input."""
    passes = [p if p else '--gpu-module-to-binary=format=' + fmt
              for p in PIPELINE]
    lowered = run([mlir_opt, path] + passes, env=env)
    ir = run([translate, '--mlir-to-llvmir'], stdin=lowered, env=env)
    found = {}
    for ret, name, params in DECLARE.findall(ir):
        types = [llvm_type(p) for p in params.split(',') if p.strip()]
        found[name] = (ret, types)
    return found


def c_to_llvm(text):
    """LLVM type of a C declaration of a return value or parameter."""
    text = text.strip()
    if '*' in text:
        return 'ptr'
    words = [w for w in text.split() if w not in ('const', 'volatile')]
    # A parameter "int64_t gridX": the last word is its name.
    if len(words) > 1 and words[-1] not in C_TO_LLVM:
        words = words[:-1]
    key = ' '.join(words)
    if key == 'unsigned int':
        key = 'unsigned'
    if key not in C_TO_LLVM:
        return '<unknown C type %r>' % text
    return C_TO_LLVM[key]


def header_prototypes(path):
    """{name: (return type, [parameter types])} of the header's mgpu*."""
    text = open(path).read()
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    text = re.sub(r'^\s*#[^\n]*', ' ', text, flags=re.M)
    protos = {}
    for ret, name, params in re.findall(
            r'DSRT_API\s+([^;(){}]*?)\b(mgpu\w+)\s*\(([^)]*)\)\s*;', text):
        # "void *mgpuModuleLoad": the star sits before the name.
        types = [c_to_llvm(p) for p in params.split(',')]
        if types == ['void']:
            types = []
        protos[name] = (c_to_llvm(ret), types)
    return protos


def exported(nm, library):
    out = run([nm, '-D', '--defined-only', library])
    return {line.split()[-1] for line in out.splitlines() if line.split()}


def signature(name, ret, params):
    return '%s(%s) -> %s' % (name, ', '.join(params), ret)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--mlir-opt', required=True)
    parser.add_argument('--cuda-bin', required=True)
    parser.add_argument('--header', required=True)
    parser.add_argument('--library', required=True)
    parser.add_argument('inputs', nargs='+')
    args = parser.parse_args()

    tools = os.path.dirname(os.path.realpath(args.mlir_opt))
    translate = os.path.join(tools, 'mlir-translate')
    nm = os.path.join(tools, 'llvm-nm')
    env = dict(os.environ)
    env['PATH'] = args.cuda_bin + os.pathsep + env.get('PATH', '')

    calls = {}
    failures = []
    for path in args.inputs:
        for fmt in ('bin', 'isa'):
            for name, sig in declared(args.mlir_opt, translate, path, fmt,
                                      env).items():
                if name in calls and calls[name] != sig:
                    failures.append('CONFLICT %s and %s' % (
                        signature(name, *calls[name]), signature(name, *sig)))
                calls.setdefault(name, sig)

    protos = header_prototypes(args.header)
    symbols = exported(nm, args.library)
    for name in sorted(calls):
        ret, params = calls[name]
        want = signature(name, ret, params)
        if name not in symbols:
            failures.append('NOT EXPORTED %s by %s' % (want, args.library))
        elif name not in protos:
            failures.append('MISSING %s: no prototype in %s' % (want,
                                                                args.header))
        elif protos[name] != (ret, params):
            hret, hparams = protos[name]
            failures.append('MISMATCH %s: the header says %s' % (
                want, signature(name, hret, hparams)))
        else:
            print('ok: ' + want)
    for name in sorted(set(protos) - symbols):
        failures.append('NOT EXPORTED %s: declared in the header but not '
                        'defined by %s' % (name, args.library))
    for name in sorted(set(protos) - set(calls)):
        print('header only: %s (MLIR emits no call to it for these inputs)'
              % name)
    if not calls:
        failures.append('no mgpu* declarations in the lowered inputs: '
                        'nothing was checked')
    for failure in failures:
        print(failure)
    print('mgpu-signatures: %d declared, %d failed' % (len(calls),
                                                       len(failures)))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
