// RUN: ds-opt %s --pass-pipeline='builtin.module(gpu.module(ds-lower-gpu-subgroup-reduce))' \
// RUN:   --split-input-file --verify-diagnostics | FileCheck %s
// What it leaves, convert-gpu-to-nvvm takes: five warp shuffles for the
// f32 reduction, ten 32-bit ones for the f64 (each 64-bit shuffle split).
// RUN: ds-opt %s --pass-pipeline='builtin.module(gpu.module(ds-lower-gpu-subgroup-reduce,convert-gpu-to-nvvm))' \
// RUN:   --split-input-file --verify-diagnostics | FileCheck %s --check-prefix=NVVM

// A warp reduction is a butterfly: xor shuffles at distances 1 to 16 over
// 32 lanes, each followed by the combiner; 32-bit words for f32, one
// 64-bit shuffle per step for f64.
// CHECK-LABEL: gpu.func @warp_sums
// CHECK-NOT:     gpu.subgroup_reduce
// CHECK:         %[[S1:.*]], %{{.*}} = gpu.shuffle xor %[[X:[^,]*]], %c1_i32, %c32_i32 : f32
// CHECK:         %[[A1:.*]] = arith.addf %[[X]], %[[S1]] : f32
// CHECK:         gpu.shuffle xor %[[A1]], %c2_i32, %c32_i32 : f32
// CHECK-COUNT-3: gpu.shuffle xor %{{.*}} : f32
// CHECK-COUNT-5: gpu.shuffle xor %{{.*}} : f64
// CHECK:         arith.maxsi
// CHECK-NOT:     gpu.subgroup_reduce
// NVVM-LABEL: llvm.func @warp_sums
// NVVM-COUNT-5: nvvm.shfl.sync bfly {{.*}} : f32 -> f32
// NVVM-COUNT-10: nvvm.shfl.sync bfly {{.*}} : i32 -> i32
gpu.module @kernels {
  gpu.func @warp_sums(%a: memref<64xf32>, %b: memref<64xf64>, %c: memref<64xi64>) kernel {
    %t = gpu.thread_id x
    %x = memref.load %a[%t] : memref<64xf32>
    %sx = gpu.subgroup_reduce add %x uniform : (f32) -> f32
    memref.store %sx, %a[%t] : memref<64xf32>
    %y = memref.load %b[%t] : memref<64xf64>
    %sy = gpu.subgroup_reduce add %y uniform : (f64) -> f64
    memref.store %sy, %b[%t] : memref<64xf64>
    %z = memref.load %c[%t] : memref<64xi64>
    %sz = gpu.subgroup_reduce maxsi %z uniform : (i64) -> i64
    memref.store %sz, %c[%t] : memref<64xi64>
    gpu.return
  }
}

// -----

// Wider than a 64-bit shuffle: refused, by name.
gpu.module @wide {
  gpu.func @vector_sum(%a: vector<4xf32>) kernel {
    // expected-error @+1 {{cannot lower a reduction of 'vector<4xf32>' to shuffles}}
    %s = gpu.subgroup_reduce add %a uniform : (vector<4xf32>) -> vector<4xf32>
    gpu.return
  }
}
