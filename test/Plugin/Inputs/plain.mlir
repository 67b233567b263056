// RUN: true

func.func @plain() {
  return
}
