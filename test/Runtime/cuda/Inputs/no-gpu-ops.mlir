// No gpu op: nothing declares an mgpu* function, which the check refuses.
module {
  func.func @nothing() {
    return
  }
}
