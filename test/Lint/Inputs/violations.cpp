// One of each violation test/Lint/lint.py reports (never compiled).
void f(OpPassManager &pm, Operation *op) {
  addTextual(pm, "ds-autodiff");
  (void)parsePassPipeline("ds-insert-optimizer{kind=sgd}", pm);
  llvm::report_fatal_error("bad option");
  op->setAttr("ds.role", attr);
  op->emitOpError("no 'ds.seed' constant");
  // "ds.role" in a comment is fine.
}
bool isFloatTensor(Value v) { return true; }
void sweep(Value loss) { llvm::DenseSet<Value> toLoss{loss}; }
