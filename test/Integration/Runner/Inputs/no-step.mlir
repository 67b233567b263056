func.func @plain() {
  return
}
