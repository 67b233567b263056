//===- Passes.td - ds transformation passes ----------------*- tablegen -*-===//
//
// The passes of ds-mlir. Flags are the public interface; each starts with
// `ds-`. See docs/Passes.md (generated) for the options.
//
//===----------------------------------------------------------------------===//

#ifndef DS_TRANSFORMS_PASSES_TD
#define DS_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExportContractPass : Pass<"ds-export-contract", "::mlir::ModuleOp"> {
  let summary = "Record every training step's contract in the module's "
                "ds.contract table";
  let description = [{
    Reads the training-step contract of every function marked
    `ds.train_step` and records it in the module attribute `ds.contract`, a
    dictionary from function name to its argument and result table (role,
    name or state, type, init). The table is what survives lowering: once
    the function's tensors have become memrefs and LLVM pointers, `ds-run`
    still knows what each argument and result is.

    With `strip` (the default) the contract attributes are then removed from
    the functions, which become plain functions that any upstream pass
    accepts. Run it first in a lowering pipeline.

    ```mlir
    module attributes {ds.contract = {step = {args = [...], results = [...]}}} {
      func.func @step(...) { ... }
    }
    ```
  }];
  let options = [
    Option<"strip", "strip", "bool", /*default=*/"true",
           "Remove the contract attributes from the functions after "
           "recording them">
  ];
}

#endif // DS_TRANSFORMS_PASSES_TD
