// Every host-side gpu op that gpu-to-llvm lowers to an mgpu* call (see
// mgpu-signatures.test), lowered with format=bin (mgpuModuleLoad) and
// format=isa (mgpuModuleLoadJIT).
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @scale(%buffer: memref<16xf32>) kernel {
      gpu.return
    }
  }

  func.func @host(%n: index, %v16: i16, %v32: i32, %device: i32,
                  %host: memref<*xf32>) {
    %c1 = arith.constant 1 : index
    // The token chain of a step: a stream, stream-ordered allocations,
    // async launches, copies and memsets.
    %t0 = gpu.wait async
    %m, %t1 = gpu.alloc async [%t0] () : memref<16xf32>
    %shared = gpu.alloc host_shared () : memref<16xf32>
    %t2 = gpu.launch_func async [%t1] @kernels::@scale
        blocks in (%n, %c1, %c1) threads in (%c1, %c1, %c1)
        args(%m : memref<16xf32>)
    gpu.launch_func @kernels::@scale
        blocks in (%n, %c1, %c1) threads in (%c1, %c1, %c1)
        args(%m : memref<16xf32>)
    gpu.launch_func @kernels::@scale clusters in (%c1, %c1, %c1)
        blocks in (%n, %c1, %c1) threads in (%c1, %c1, %c1)
        args(%m : memref<16xf32>)
    %t3 = gpu.memcpy async [%t2] %shared, %m : memref<16xf32>, memref<16xf32>
    %m16, %t4 = gpu.alloc async [%t3] () : memref<16xi16>
    %t5 = gpu.memset async [%t4] %m16, %v16 : memref<16xi16>, i16
    %m32, %t6 = gpu.alloc async [%t5] () : memref<16xi32>
    %t7 = gpu.memset async [%t6] %m32, %v32 : memref<16xi32>, i32
    // A join of two tokens: events, and a stream waiting on them.
    %ta = gpu.wait async [%t7]
    %tb = gpu.wait async [%t7]
    %tc = gpu.wait async [%ta, %tb]
    %t8 = gpu.dealloc async [%tc] %m : memref<16xf32>
    gpu.wait [%t8]
    gpu.host_register %host : memref<*xf32>
    gpu.host_unregister %host : memref<*xf32>
    gpu.set_default_device %device
    return
  }
}
