//===- DSAttrs.td - ds attributes and enums ----------------*- tablegen -*-===//
//
// Attributes of the training-step contract (`#ds.init`, `#ds.state`) and the
// enums ds ops use.
//
//===----------------------------------------------------------------------===//

#ifndef DS_DIALECT_DS_IR_DSATTRS_TD
#define DS_DIALECT_DS_IR_DSATTRS_TD

include "ds/Dialect/DS/IR/DSBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def DS_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how ds.gelu evaluates the Gaussian CDF", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"tanh", 1>
    ]> {
  let cppNamespace = "::mlir::ds";
}

def DS_FakeQuantGradOf : I32EnumAttr<"FakeQuantGradOf",
    "which operand's per-element gradient ds.fake_quant_grad computes", [
      I32EnumAttrCase<"input", 0>,
      I32EnumAttrCase<"scale", 1>,
      I32EnumAttrCase<"zero_point", 2>
    ]> {
  let cppNamespace = "::mlir::ds";
}

def DS_InitKind : I32EnumAttr<"InitKind",
    "how the runner initialises a parameter or state tensor", [
      I32EnumAttrCase<"zeros", 0>,
      I32EnumAttrCase<"ones", 1>,
      I32EnumAttrCase<"constant", 2>,
      I32EnumAttrCase<"normal", 3>,
      I32EnumAttrCase<"uniform", 4>,
      I32EnumAttrCase<"file", 5>
    ]> {
  let cppNamespace = "::mlir::ds";
  let genSpecializedAttr = 0;
}

//===----------------------------------------------------------------------===//
// #ds.init
//===----------------------------------------------------------------------===//

def DS_InitAttr : DS_Attr<"Init", "init"> {
  let summary = "How the runner initialises a parameter or state argument";
  let description = [{
    Attached as `ds.init` to every `ds.param` and `ds.state` argument of a
    training step. The runner (ds-run) draws the initial value from a seeded
    generator, so a run is reproducible from its seed.

    | form                        | initial value                         |
    |-----------------------------|---------------------------------------|
    | `#ds.init<zeros>`           | 0                                     |
    | `#ds.init<ones>`            | 1                                     |
    | `#ds.init<constant, 0.5>`   | the given value (may be +-inf)        |
    | `#ds.init<normal, 0.02>`    | N(0, std^2) with the given std        |
    | `#ds.init<uniform, 0.125>`  | U(-b, b) with the given bound b       |
    | `#ds.init<file>`            | must be loaded (`ds-run --params DIR`)|

    `normal` and `uniform` need a floating-point element type; the others
    work for every element type.
  }];
  let parameters = (ins
    "::mlir::ds::InitKind":$kind,
    APFloatParameter<"the constant, std or bound">:$value
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Whether this kind takes a numeric value (constant, normal, uniform).
    bool takesValue() const;
    /// The value as a double (0 for kinds that take none).
    double getValueAsDouble() const { return getValue().convertToDouble(); }
  }];
}

//===----------------------------------------------------------------------===//
// #ds.state
//===----------------------------------------------------------------------===//

def DS_StateAttr : DS_Attr<"State", "state"> {
  let summary = "What a state argument of a training step holds";
  let description = [{
    Attached as `ds.state` to an argument that carries memory across steps:
    optimizer moments, the step counter, the loss scale, RNG keys, amax
    histories, and so on. `kind` says what it is (a dotted name such as
    `"adam.m"`, `"step"`, `"rng"`); `of` names the parameter it belongs to,
    when it belongs to one. The pair (`kind`, `of`) identifies the state
    uniquely within a step; checkpoints use it as the key.

    ```mlir
    %m: tensor<4x8xf32> {ds.state = #ds.state<"adam.m", of = "fc1.weight">,
                         ds.init = #ds.init<zeros>}
    %step: tensor<i64> {ds.state = #ds.state<"step">, ds.init = #ds.init<zeros>}
    ```
  }];
  let parameters = (ins
    StringRefParameter<"what the state holds">:$kind,
    StringRefParameter<"the parameter it belongs to", "\"\"">:$of
  );
  let assemblyFormat = "`<` $kind (`,` `of` `=` $of^)? `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The key that identifies this state in a step and in checkpoints:
    /// `kind` or `kind@of`.
    std::string getKey() const;
  }];
}

#endif // DS_DIALECT_DS_IR_DSATTRS_TD
