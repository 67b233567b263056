// A blocking wait on a token that is not a stream of this function (here an
// argument) lowers to mgpuEventSynchronize and mgpuEventDestroy.
module attributes {gpu.container_module} {
  func.func @join(%token: !gpu.async.token) {
    gpu.wait [%token]
    return
  }
}
