// RUN: not ds-opt %s --ds-autodiff --ds-compress-allreduce 2>&1 | FileCheck %s --check-prefix=NODP
// RUN: not ds-opt %s --ds-autodiff --ds-fuse-allreduce 2>&1 | FileCheck %s --check-prefix=NODPFUSE
// RUN: not ds-opt %s --ds-autodiff --ds-data-parallel --ds-fuse-allreduce="bucket-bytes=0" 2>&1 | FileCheck %s --check-prefix=BUCKET
// RUN: not ds-opt %s --ds-autodiff --ds-data-parallel --ds-compress-allreduce="quantile-low=0.9 quantile-high=0.5" 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not ds-opt %s --ds-autodiff --ds-data-parallel --ds-compress-allreduce="fixed-thresholds theta-low=2 theta-high=1" 2>&1 | FileCheck %s --check-prefix=THETA
// RUN: not ds-opt %s --ds-autodiff --ds-data-parallel --ds-compress-allreduce="scheme=topk ratio=0" 2>&1 | FileCheck %s --check-prefix=RATIO
// RUN: not ds-opt %s --ds-autodiff --ds-data-parallel --ds-data-parallel 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not ds-opt %s --ds-data-parallel 2>&1 | FileCheck %s --check-prefix=NOGRAD
// RUN: not ds-opt %s --ds-autodiff --ds-data-parallel --ds-compress-allreduce --ds-fuse-allreduce 2>&1 | FileCheck %s --check-prefix=LATEFUSE

// NODP: ds-compress-allreduce: the module is not data parallel: run ds-data-parallel first
// NODPFUSE: ds-fuse-allreduce: the module is not data parallel: run ds-data-parallel first
// BUCKET: in option 'bucket-bytes' of pass 'ds-fuse-allreduce': must be > 0, got 0
// ORDER: in option 'quantile-low' of pass 'ds-compress-allreduce': must not exceed quantile-high (0.500000), got 0.900000
// THETA: in option 'theta-low' of pass 'ds-compress-allreduce': must not exceed theta-high (1.000000), got 2.000000
// RATIO: in option 'ratio' of pass 'ds-compress-allreduce': must be in (0, 1], got 0.000000
// TWICE: ds-data-parallel: already averages its gradients (ds-data-parallel ran twice?)
// NOGRAD: ds-data-parallel
// LATEFUSE: is already compressed: run ds-fuse-allreduce before ds-compress-allreduce

func.func @step(%w: tensor<2x4xf32> {ds.param = "fc.weight", ds.init = #ds.init<zeros>},
                %x: tensor<3x4xf32> {ds.input = "x"},
                %y: tensor<3x2xf32> {ds.input = "y"})
    -> (tensor<f32> {ds.loss}) attributes {ds.train_step} {
  %q = ds.matmul %x, %w transpose_rhs : tensor<3x4xf32>, tensor<2x4xf32> -> tensor<3x2xf32>
  %l = ds.mse_loss %q, %y : tensor<3x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
