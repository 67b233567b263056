// RUN: ds-opt %s --ds-merge-gpu-modules -split-input-file | FileCheck %s

// ds-merge-gpu-modules: the kernels gpu-kernel-outlining put in modules of
// their own move into the first module; each takes its module's name, a
// helper that both modules cloned is renamed in the second, and the
// launches follow. (The two kernels here differ through their helpers.)

// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @step_kernel {
// CHECK-DAG: gpu.func @step_kernel(%{{.*}}: memref<4xf32>) kernel
// CHECK-DAG: func.func @helper(
// CHECK-DAG: gpu.func @step_kernel_0(%{{.*}}: memref<4xf32>) kernel
// CHECK-DAG: func.func @step_kernel_0_helper(
// CHECK-DAG: call @step_kernel_0_helper(
// CHECK: }
// CHECK-NOT: gpu.module
// CHECK: func.func @step
// CHECK: gpu.launch_func @step_kernel::@step_kernel
// CHECK: gpu.launch_func @step_kernel::@step_kernel_0
module attributes {gpu.container_module} {
  gpu.module @step_kernel {
    func.func @helper(%x: f32) -> f32 {
      return %x : f32
    }
    gpu.func @step_kernel(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %v = memref.load %a[%c0] : memref<4xf32>
      %w = func.call @helper(%v) : (f32) -> f32
      memref.store %w, %a[%c0] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @step_kernel_0 {
    func.func @helper(%x: f32) -> f32 {
      %y = arith.addf %x, %x : f32
      return %y : f32
    }
    gpu.func @step_kernel(%a: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %v = memref.load %a[%c0] : memref<4xf32>
      %w = func.call @helper(%v) : (f32) -> f32
      memref.store %w, %a[%c0] : memref<4xf32>
      gpu.return
    }
  }
  func.func @step(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @step_kernel::@step_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @step_kernel_0::@step_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    return
  }
}

// -----

// Modules that compile differently (here: one already has a target) keep
// their kernels; the compatible ones still merge.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @a {
// CHECK: gpu.func @a(
// CHECK: gpu.func @c(%{{.*}}: memref<4xf32>)
// CHECK: gpu.module @b [#nvvm.target<chip = "sm_90">]
// CHECK-NOT: gpu.module @c
// CHECK: gpu.launch_func @a::@a
// CHECK: gpu.launch_func @b::@b
// CHECK: gpu.launch_func @a::@c
module attributes {gpu.container_module} {
  gpu.module @a {
    gpu.func @a() kernel { gpu.return }
  }
  gpu.module @b [#nvvm.target<chip = "sm_90">] {
    gpu.func @b() kernel { gpu.return }
  }
  gpu.module @c {
    gpu.func @c(%a: memref<4xf32>) kernel { gpu.return }
  }
  func.func @step(%a: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @a::@a blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @b::@b blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @c::@c blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    return
  }
}

// -----

// Equal kernels (the same layer's code outlined once per layer) are kept
// once and every launch names the copy kept: constant globals that differ
// only in name are merged first, so kernels reading them become equal too.
// A kernel that reads a different constant, or computes differently, stays.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @k0 {
// CHECK-NEXT: memref.global "private" constant @cst : {{.*}}[1.000000e+00, 2.000000e+00]
// CHECK: gpu.func @k0(
// CHECK-NOT: gpu.func
// CHECK: memref.global "private" constant @k2_cst : {{.*}}[1.000000e+00, 3.000000e+00]
// CHECK-NEXT: gpu.func @k2(
// CHECK-NEXT: memref.get_global @k2_cst
// CHECK: gpu.func @k3(
// CHECK-NOT: gpu.func
// CHECK-NOT: memref.global
// CHECK: func.func @step
// CHECK-NEXT: arith.constant
// CHECK-NEXT: gpu.launch_func @k0::@k0
// CHECK-NEXT: gpu.launch_func @k0::@k0
// CHECK-NEXT: gpu.launch_func @k0::@k2
// CHECK-NEXT: gpu.launch_func @k0::@k3
module attributes {gpu.container_module} {
  gpu.module @k0 {
    memref.global "private" constant @cst : memref<2xf32> = dense<[1.0, 2.0]>
    gpu.func @k0(%a: memref<2xf32>) kernel {
      %g = memref.get_global @cst : memref<2xf32>
      memref.copy %g, %a : memref<2xf32> to memref<2xf32>
      gpu.return
    }
  }
  gpu.module @k1 {
    memref.global "private" constant @cst : memref<2xf32> = dense<[1.0, 2.0]>
    gpu.func @k1(%a: memref<2xf32>) kernel {
      %g = memref.get_global @cst : memref<2xf32>
      memref.copy %g, %a : memref<2xf32> to memref<2xf32>
      gpu.return
    }
  }
  gpu.module @k2 {
    memref.global "private" constant @cst : memref<2xf32> = dense<[1.0, 3.0]>
    gpu.func @k2(%a: memref<2xf32>) kernel {
      %g = memref.get_global @cst : memref<2xf32>
      memref.copy %g, %a : memref<2xf32> to memref<2xf32>
      gpu.return
    }
  }
  gpu.module @k3 {
    gpu.func @k3(%a: memref<2xf32>) kernel {
      gpu.return
    }
  }
  func.func @step(%a: memref<2xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @k0::@k0 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<2xf32>)
    gpu.launch_func @k1::@k1 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<2xf32>)
    gpu.launch_func @k2::@k2 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<2xf32>)
    gpu.launch_func @k3::@k3 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<2xf32>)
    return
  }
}
