// RUN: ds-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(ds-convert-kernels-to-nvvm))' | FileCheck %s
// RUN: ds-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(ds-convert-kernels-to-nvvm{index32=false}))' | FileCheck %s --check-prefix=WIDE

// Every index fits: the element index is computed in 32 bits (the
// address still 64: the GEP widens it); a bare pointer per buffer.
// CHECK-LABEL: llvm.func @fits(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK:         nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NOT:     llvm.sext
// CHECK:         llvm.getelementptr {{.*}}[%{{.*}}] : (!llvm.ptr, i32) -> !llvm.ptr, f32
// WIDE-LABEL: llvm.func @fits
// WIDE:         llvm.getelementptr {{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @fits(%x: memref<1000x64xf32>, %y: memref<64000xf32>) kernel {
      %t = gpu.thread_id x
      %c1 = arith.constant 1 : index
      %v = memref.load %x[%t, %c1] : memref<1000x64xf32>
      memref.store %v, %y[%t] : memref<64000xf32>
      gpu.return
    }
  }
}

// -----

// A buffer of 2^31 elements: its last index needs 64 bits, so the whole
// module keeps them.
// CHECK-LABEL: llvm.func @too_large
// CHECK:         llvm.getelementptr {{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @too_large(%x: memref<2147483648xi8>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %x[%t] : memref<2147483648xi8>
      memref.store %v, %x[%t] : memref<2147483648xi8>
      gpu.return
    }
  }
}

// -----

// A view whose offset and strides reach past the margin: 64 bits.
// CHECK-LABEL: llvm.func @strided_view
// CHECK:         llvm.getelementptr {{.*}}[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @strided_view(%x: memref<4x4xf32, strided<[1000000000, 1], offset: 10>>) kernel {
      %t = gpu.thread_id x
      %c0 = arith.constant 0 : index
      %v = memref.load %x[%t, %c0] : memref<4x4xf32, strided<[1000000000, 1], offset: 10>>
      memref.store %v, %x[%c0, %t] : memref<4x4xf32, strided<[1000000000, 1], offset: 10>>
      gpu.return
    }
  }
}

// -----

// An index argument comes from the host in 64 bits: the kernel keeps them.
// CHECK-LABEL: llvm.func @index_argument(%{{.*}}: !llvm.ptr, %{{.*}}: i64)
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @index_argument(%x: memref<64xf32>, %i: index) kernel {
      %v = memref.load %x[%i] : memref<64xf32>
      memref.store %v, %x[%i] : memref<64xf32>
      gpu.return
    }
  }
}
