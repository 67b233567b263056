// RUN: ds-opt %s --ds-sync-batch-norm | FileCheck %s
// RUN: ds-opt %s --ds-sync-batch-norm --ds-autodiff | FileCheck %s --check-prefix=GRAD

// The batch statistics are sums over every rank: the count, the sum and the
// centred sum of squares per channel; the running statistics follow them.
// CHECK-LABEL: func.func @step
// CHECK-NOT: ds.batch_norm
// CHECK: %[[COUNT:.*]] = ds.all_reduce %{{.*}} sum : tensor<1x1x1x1xf32>
// CHECK: %[[S1:.*]] = ds.reduce_sum %{{.*}} [0, 2, 3] keep_dims : tensor<4x3x2x2xf32> -> tensor<1x3x1x1xf32>
// CHECK: %[[G1:.*]] = ds.all_reduce %[[S1]] sum : tensor<1x3x1x1xf32>
// CHECK: %[[MEAN:.*]] = ds.div %[[G1]], %[[COUNT]]
// CHECK: %[[C:.*]] = ds.sub %{{.*}}, %[[MEAN]]
// CHECK: %[[SQ:.*]] = ds.mul %[[C]], %[[C]]
// CHECK: %[[S2:.*]] = ds.reduce_sum %[[SQ]] [0, 2, 3] keep_dims
// CHECK: ds.all_reduce %[[S2]] sum : tensor<1x3x1x1xf32>
// CHECK: ds.rsqrt

// Autodiff derives SyncBatchNorm's backward: the gradient sums are
// all-reduced too.
// GRAD: ds.all_reduce %{{.*}} sum {{{.*}}ds.vjp_of = "ds.all_reduce"} : tensor<1x3x1x1xf32>
// GRAD: ds.all_reduce %{{.*}} sum {{{.*}}ds.vjp_of = "ds.all_reduce"} : tensor<1x3x1x1xf32>

func.func @step(%x: tensor<4x3x2x2xf32> {ds.input = "x"},
                %g: tensor<3xf32> {ds.param = "bn.weight", ds.init = #ds.init<ones>},
                %b: tensor<3xf32> {ds.param = "bn.bias", ds.init = #ds.init<zeros>},
                %m: tensor<3xf32> {ds.state = #ds.state<"bn.running_mean">, ds.init = #ds.init<zeros>},
                %v: tensor<3xf32> {ds.state = #ds.state<"bn.running_var">, ds.init = #ds.init<ones>},
                %s: tensor<1x3x2x2xf32> {ds.param = "scale", ds.init = #ds.init<ones>})
    -> (tensor<f32> {ds.loss}, tensor<3xf32> {ds.update = 3 : i64}, tensor<3xf32> {ds.update = 4 : i64})
    attributes {ds.train_step} {
  %xs = ds.mul %x, %s : tensor<4x3x2x2xf32>, tensor<1x3x2x2xf32> -> tensor<4x3x2x2xf32>
  %y, %m1, %v1 = ds.batch_norm %xs, %g, %b, %m, %v : tensor<4x3x2x2xf32>, tensor<3xf32>
  %sq = ds.mul %y, %y : tensor<4x3x2x2xf32>, tensor<4x3x2x2xf32> -> tensor<4x3x2x2xf32>
  %l = ds.reduce_mean %sq [0, 1, 2, 3] : tensor<4x3x2x2xf32> -> tensor<f32>
  return %l, %m1, %v1 : tensor<f32>, tensor<3xf32>, tensor<3xf32>
}
