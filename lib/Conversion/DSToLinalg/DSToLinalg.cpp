#include "ds/Conversion/Passes.h"
#include "ds/Dialect/DS/IR/DSOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/DialectConversion.h"
namespace mlir::ds {
#define GEN_PASS_DEF_CONVERTDSTOLINALGPASS
#include "ds/Conversion/Passes.h.inc"
}
using namespace mlir;
using namespace mlir::ds;
void mlir::ds::populateDSToLinalgPatterns(RewritePatternSet &patterns) {}
namespace {
struct ConvertDSToLinalgPass : public mlir::ds::impl::ConvertDSToLinalgPassBase<ConvertDSToLinalgPass> {
  void runOnOperation() override {}
};
}
