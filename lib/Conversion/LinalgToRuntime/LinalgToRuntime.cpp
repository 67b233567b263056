//===- LinalgToRuntime.cpp - Matmuls to the runtime's GEMM ----------------===//
//
// Implements convert-linalg-to-ds-runtime. Library GEMMs (oneDNN) beat what
// MLIR's loop lowering gives on these CPUs by one to two orders of magnitude,
// so after bufferization every plain matmul (f32, f64, and the int8 x int8
// -> int32 products of quantized inference) becomes a call into the runtime
// (include/ds/Runtime/ds_runtime.h). The runtime takes rank-3 strided
// memrefs plus transpose flags; this pass derives those from the linalg op's
// indexing maps and views 2-D operands as a batch of one. On CUDA, a bf16 or
// f16 GEMM whose f32 product every reader rounds back to that type writes
// that type directly (NarrowGemmOutputs.h).
//
//===----------------------------------------------------------------------===//

#include "NarrowGemmOutputs.h"

#include "ds/Conversion/Passes.h"
#include "ds/Dialect/DS/IR/CausalGemm.h"
#include "ds/Dialect/DS/IR/DSDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"

namespace mlir::ds {
#define GEN_PASS_DEF_PREPARELIBRARYGEMMSPASS
#define GEN_PASS_DEF_CONVERTLINALGTODSRUNTIMEPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// How one matmul operand is stored: which map dimension is its row and
/// column, and whether it has a batch dimension.
struct OperandLayout {
  bool batched = false;
  bool transposed = false;
};

/// A float or integer constant zero.
bool isZero(Value v) {
  return matchPattern(v, m_AnyZeroFloat()) || matchPattern(v, m_Zero());
}

/// The runtime GEMM for operands of `in` accumulating into `out`: f32 and
/// f64, or int8 into int32 (quantized inference), on the CPU; f32, and bf16
/// or f16 into f32, on cuBLASLt (ds_runtime_cuda.h). f64 and int8 have no
/// CUDA entry and stay loops (GPU kernels there).
StringRef runtimeGemmFor(Type in, Type out, bool cuda) {
  if (cuda) {
    if (in == out && in.isF32())
      return "dsrt_cuda_matmul_f32";
    if (out.isF32() && in.isBF16())
      return "dsrt_cuda_matmul_bf16";
    if (out.isF32() && isa<Float8E4M3FNType>(in))
      return "dsrt_cuda_matmul_f8"; // E4M3 x E4M3; see fp8GemmFor
    if (out.isF32() && in.isF16())
      return "dsrt_cuda_matmul_f16";
    return "";
  }
  if (in == out && in.isF32())
    return "dsrt_matmul_f32";
  if (in == out && in.isF64())
    return "dsrt_matmul_f64";
  if (in.isInteger(8) && out.isInteger(32))
    return "dsrt_matmul_s8s8s32";
  return "";
}

/// The cuBLASLt FP8 GEMM of an operand pair: E4M3 x E4M3 (the general
/// entry, formats as arguments) or E4M3 with E5M2 (an entry per pair, whose
/// declaration types each operand); "" for E5M2 x E5M2, which cuBLASLt has
/// no kernel for, and for anything else.
StringRef fp8GemmFor(Type a, Type b) {
  bool a4 = isa<Float8E4M3FNType>(a), a5 = isa<Float8E5M2Type>(a);
  bool b4 = isa<Float8E4M3FNType>(b), b5 = isa<Float8E5M2Type>(b);
  if (a4 && b4)
    return "dsrt_cuda_matmul_f8";
  if (a5 && b4)
    return "dsrt_cuda_matmul_e5m2_e4m3";
  if (a4 && b5)
    return "dsrt_cuda_matmul_e4m3_e5m2";
  return "";
}

/// The zero fill of `out` immediately before `op`, if any.
linalg::FillOp findZeroFill(Operation *op, Value out) {
  auto fill = dyn_cast_or_null<linalg::FillOp>(op->getPrevNode());
  if (!fill || fill.getOutputs().front() != out)
    return nullptr;
  if (!isZero(fill.getInputs().front()))
    return nullptr;
  return fill;
}

/// Reads the layout of operand `map` over (batch?, m, n, k) dimensions.
/// `rowDim`/`colDim` are the untransposed positions (e.g. m, k for lhs).
std::optional<OperandLayout> readLayout(AffineMap map, unsigned batchDim,
                                        bool hasBatch, unsigned rowDim,
                                        unsigned colDim) {
  SmallVector<unsigned> dims;
  for (AffineExpr e : map.getResults()) {
    auto d = dyn_cast<AffineDimExpr>(e);
    if (!d)
      return std::nullopt;
    dims.push_back(d.getPosition());
  }
  OperandLayout layout;
  ArrayRef<unsigned> inner = dims;
  if (hasBatch && dims.size() == 3) {
    if (dims[0] != batchDim)
      return std::nullopt;
    layout.batched = true;
    inner = ArrayRef<unsigned>(dims).drop_front();
  }
  if (inner.size() != 2)
    return std::nullopt;
  if (inner[0] == rowDim && inner[1] == colDim)
    layout.transposed = false;
  else if (inner[0] == colDim && inner[1] == rowDim)
    layout.transposed = true;
  else
    return std::nullopt;
  return layout;
}

/// Views `v` (rank 2 or 3) as a rank-3 memref with fully dynamic strides.
Value asRank3(OpBuilder &b, Location loc, Value v, MemRefType target) {
  auto type = cast<MemRefType>(v.getType());
  if (type.getRank() == 2) {
    SmallVector<int64_t> shape = {1, type.getDimSize(0), type.getDimSize(1)};
    v = memref::ExpandShapeOp::create(
        b, loc, shape, v, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
  }
  return memref::CastOp::create(b, loc, target, v);
}

/// Declares (once) `func.func private @name(memref3, memref3, memref3, i64,
/// i64) attributes {llvm.emit_c_interface}` (inputs `in`, output `out`).
/// For FP8 GEMMs the rhs has its own type `inB`, and extra arguments
/// follow: the operand formats (i64, i64; `formats`, dsrt_cuda_matmul_f8
/// only) and the dequantisation scale pointers (!llvm.ptr, !llvm.ptr).
/// The *_bias entries take the bias last, a rank-1 memref (`bias`).
func::FuncOp getOrDeclare(ModuleOp module, StringRef name, MemRefType in,
                          MemRefType out, bool fp8 = false, MemRefType inB = {},
                          bool formats = false, MemRefType bias = {}) {
  if (auto f = module.lookupSymbol<func::FuncOp>(name))
    return f;
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToStart(module.getBody());
  auto i64 = b.getI64Type();
  SmallVector<Type> inputs = {in, inB ? inB : in, out, i64, i64};
  if (fp8) {
    auto ptr = LLVM::LLVMPointerType::get(b.getContext());
    if (formats)
      inputs.append({i64, i64});
    inputs.append({ptr, ptr});
  }
  if (bias)
    inputs.push_back(bias);
  auto type = b.getFunctionType(inputs, {});
  auto f = func::FuncOp::create(b, module.getLoc(), name, type);
  f.setPrivate();
  f->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  return f;
}

/// The static M, N, K of a GEMM from its lhs `a` (layout `la`) and output
/// `c`.
struct GemmSizes {
  int64_t m, n, k;
};
std::optional<GemmSizes> gemmSizes(Value a, Value c, OperandLayout la) {
  auto at = cast<MemRefType>(a.getType()), ct = cast<MemRefType>(c.getType());
  if (!at.hasStaticShape() || !ct.hasStaticShape())
    return std::nullopt;
  unsigned ar = at.getRank() - 2, cr = ct.getRank() - 2;
  return GemmSizes{ct.getDimSize(cr), ct.getDimSize(cr + 1),
                   at.getDimSize(la.transposed ? ar : ar + 1)};
}

/// The view of rows [row, row + rows) and columns [col, col + cols) of the
/// innermost two dimensions of `v` (rank 2, or 3 with every batch).
Value viewRows(OpBuilder &b, Location loc, Value v, int64_t row, int64_t rows,
               int64_t col, int64_t cols) {
  auto type = cast<MemRefType>(v.getType());
  SmallVector<OpFoldResult> offsets, sizes, strides;
  if (type.getRank() == 3) {
    offsets.push_back(b.getIndexAttr(0));
    sizes.push_back(b.getIndexAttr(type.getDimSize(0)));
  }
  offsets.append({b.getIndexAttr(row), b.getIndexAttr(col)});
  sizes.append({b.getIndexAttr(rows), b.getIndexAttr(cols)});
  strides.assign(type.getRank(), b.getIndexAttr(1));
  return memref::SubViewOp::create(b, loc, v, offsets, sizes, strides);
}

LogicalResult rewriteMatmul(ModuleOp module, linalg::LinalgOp op, bool cuda) {
  bool isBatch = isa<linalg::BatchMatmulOp>(op);
  if (!isBatch && !isa<linalg::MatmulOp>(op))
    return failure();
  if (!op.hasPureBufferSemantics())
    return failure();
  Value a = op.getDpsInputOperand(0)->get();
  Value bv = op.getDpsInputOperand(1)->get();
  Value c = op.getDpsInitOperand(0)->get();
  Type et = cast<MemRefType>(c.getType()).getElementType();
  Type inType = cast<MemRefType>(a.getType()).getElementType();
  Type inTypeB = cast<MemRefType>(bv.getType()).getElementType();
  bool fp8 = cuda && et.isF32() && !fp8GemmFor(inType, inTypeB).empty();
  if (inTypeB != inType && !fp8)
    return failure();
  StringRef callee =
      fp8 ? fp8GemmFor(inType, inTypeB) : runtimeGemmFor(inType, et, cuda);
  if (callee.empty())
    return failure();
  linalg::FillOp fill = findZeroFill(op, c);
  bool overwrite = op->hasAttr(DSDialect::kGemmOverwriteAttrName);
  if (!fill && !overwrite)
    return failure();

  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  // Dimensions: matmul (m, n, k); batch_matmul (b, m, n, k).
  unsigned off = isBatch ? 1 : 0;
  unsigned m = off, n = off + 1, k = off + 2;
  auto la = readLayout(maps[0], 0, isBatch, m, k);
  auto lb = readLayout(maps[1], 0, isBatch, k, n);
  auto lc = readLayout(maps[2], 0, isBatch, m, n);
  if (!la || !lb || !lc || lc->transposed)
    return failure();
  // The runtime shares only the right-hand side across batches.
  if (isBatch && (!la->batched || !lc->batched))
    return failure();
  // cuBLASLt's FP8 kernels take one layout (X * W^T) and multiples of 16;
  // any other FP8 matmul stays a loop nest (a kernel on the GPU).
  if (fp8) {
    auto shapeOf = [](Value v) { return cast<MemRefType>(v.getType()); };
    bool aligned =
        llvm::all_of(std::initializer_list<MemRefType>{shapeOf(a), shapeOf(bv)},
                     [](MemRefType t) {
                       return t.hasStaticShape() &&
                              t.getShape().back() % 16 == 0 &&
                              t.getShape()[t.getRank() - 2] % 16 == 0;
                     });
    if (isBatch || la->transposed || !lb->transposed || !aligned)
      return failure();
  }

  // A narrow C (NarrowGemmOutputs.h): cuBLASLt rounds where every reader
  // would round the f32 product anyway, for bf16/f16 operands to their own
  // type, for FP8 ones to bf16 after the readers' dequantisation scale (its
  // A scale pointer, the scale computed into a device f32 first); both after
  // a linear layer's bias (its bias epilogue, for E4M3 x E4M3 among FP8).
  std::optional<GemmEpilogue> epilogue;
  if (cuda && (fp8 || inType.isBF16() || inType.isF16()))
    epilogue = gemmEpilogue(op, /*allowScale=*/fp8, fill);
  if (epilogue && (fp8 ? !epilogue->type.isBF16() : epilogue->type != inType))
    epilogue.reset();
  if (epilogue && epilogue->bias) {
    // cuBLASLt's bias entries: E4M3 x E4M3 among FP8, and K > 0 (an empty
    // sum plus a bias is no GEMM).
    int64_t kSize = cast<MemRefType>(a.getType())
                        .getDimSize(la->transposed ? off + 0 : off + 1);
    if ((fp8 && callee != "dsrt_cuda_matmul_f8") ||
        ShapedType::isDynamic(kSize) || kSize == 0)
      epilogue.reset();
  }
  EpilogueBuffers buffers;
  std::string narrowCallee;
  if (epilogue) {
    buffers = applyEpilogue(op, *epilogue);
    c = op.getDpsInitOperand(0)->get();
    et = epilogue->type;
    narrowCallee = (callee + (et.isBF16() ? "_to_bf16" : "_to_f16") +
                    (buffers.bias ? "_bias" : ""))
                       .str();
    callee = narrowCallee;
  }

  OpBuilder b(op);
  Location loc = op.getLoc();
  MLIRContext *ctx = op->getContext();
  int64_t dyn = ShapedType::kDynamic;
  auto strided = [&](Type elem) {
    return MemRefType::get(
        {dyn, dyn, dyn}, elem,
        StridedLayoutAttr::get(ctx, dyn, ArrayRef<int64_t>{dyn, dyn, dyn}));
  };
  MemRefType m3 = strided(inType), m3b = strided(inTypeB), out3 = strided(et);
  bool formats = callee.starts_with("dsrt_cuda_matmul_f8");
  MemRefType bias1;
  if (buffers.bias)
    bias1 = MemRefType::get({dyn}, et, StridedLayoutAttr::get(ctx, dyn, {dyn}));
  func::FuncOp fn =
      getOrDeclare(module, callee, m3, out3, fp8, m3b, formats, bias1);
  Value ta =
      arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(la->transposed));
  Value tb =
      arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(lb->transposed));
  // What follows the operands and flags: FP8 formats and scales, a bias.
  SmallVector<Value> extra;
  if (fp8) {
    // dsrt_cuda_matmul_f8 takes the formats (both E4M3: DSRT_FP8_E4M3 = 0).
    // No dequantisation scales (NULL: 1), as the f32 GEMM of the extended
    // operands had none, unless the readers' scale moved into the GEMM.
    if (formats) {
      Value e4m3 = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
      extra.append({e4m3, e4m3});
    }
    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    Value none = LLVM::ZeroOp::create(b, loc, ptrType);
    Value scale = none;
    if (buffers.scale) {
      Value address =
          memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffers.scale);
      Value bits = arith::IndexCastOp::create(b, loc, b.getI64Type(), address);
      scale = LLVM::IntToPtrOp::create(b, loc, ptrType, bits);
    }
    extra.append({scale, none});
  }
  if (buffers.bias)
    extra.push_back(memref::CastOp::create(b, loc, bias1, buffers.bias));
  auto call = [&](Value lhs, Value rhs, Value out) {
    SmallVector<Value> args = {asRank3(b, loc, lhs, m3),
                               asRank3(b, loc, rhs, m3b),
                               asRank3(b, loc, out, out3), ta, tb};
    args.append(extra);
    func::CallOp::create(b, loc, fn, args);
  };

  // Causal attention's products (CausalGemm.h): one GEMM per block of rows
  // (columns) of C, over the columns that are read and the depth that is
  // not zero. FP8 and bias GEMMs are never attention's: one call each.
  SmallVector<CausalGemmBlock> blocks;
  if (std::optional<CausalGemm> causal = getCausalGemm(op);
      causal && !fp8 && !buffers.bias)
    if (auto sizes = gemmSizes(a, c, *la))
      blocks = causalGemmBlocks(*causal, sizes->m, sizes->n, sizes->k);
  if (blocks.empty())
    call(a, bv, c);
  for (const CausalGemmBlock &blk : blocks) {
    int64_t rows = blk.rowEnd - blk.rowBegin, cols = blk.colEnd - blk.colBegin,
            depth = blk.depthEnd - blk.depthBegin;
    Value lhs =
        la->transposed
            ? viewRows(b, loc, a, blk.depthBegin, depth, blk.rowBegin, rows)
            : viewRows(b, loc, a, blk.rowBegin, rows, blk.depthBegin, depth);
    Value rhs =
        lb->transposed
            ? viewRows(b, loc, bv, blk.colBegin, cols, blk.depthBegin, depth)
            : viewRows(b, loc, bv, blk.depthBegin, depth, blk.colBegin, cols);
    Value out = viewRows(b, loc, c, blk.rowBegin, rows, blk.colBegin, cols);
    call(lhs, rhs, out);
  }
  op->erase();
  if (fill)
    fill->erase();
  return success();
}

/// A marked matmul that stays a loop nest must see a zero accumulator.
void restoreZeroFill(linalg::LinalgOp op) {
  op->removeAttr(DSDialect::kGemmOverwriteAttrName);
  OpBuilder b(op);
  Value c = op.getDpsInitOperand(0)->get();
  Type et = cast<MemRefType>(c.getType()).getElementType();
  Value zero = arith::ConstantOp::create(b, op.getLoc(), b.getZeroAttr(et));
  linalg::FillOp::create(b, op.getLoc(), ValueRange{zero}, ValueRange{c});
}

struct PrepareLibraryGemmsPass
    : public mlir::ds::impl::PrepareLibraryGemmsPassBase<
          PrepareLibraryGemmsPass> {
  void runOnOperation() override {
    getOperation()->walk([](linalg::LinalgOp op) {
      if (!isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op) ||
          !op.hasPureTensorSemantics())
        return;
      OpOperand *init = op.getDpsInitOperand(0);
      auto fill = init->get().getDefiningOp<linalg::FillOp>();
      if (!fill || !isZero(fill.getInputs().front()))
        return;
      auto type = cast<RankedTensorType>(init->get().getType());
      OpBuilder b(op);
      Value empty = tensor::EmptyOp::create(b, op.getLoc(), type.getShape(),
                                            type.getElementType());
      init->set(empty);
      op->setAttr(DSDialect::kGemmOverwriteAttrName, b.getUnitAttr());
    });
  }
};

struct ConvertLinalgToDSRuntimePass
    : public mlir::ds::impl::ConvertLinalgToDSRuntimePassBase<
          ConvertLinalgToDSRuntimePass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (target != "cpu" && target != "cuda") {
      module.emitError() << "convert-linalg-to-ds-runtime: unknown target '"
                         << target << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    bool cuda = target == "cuda";
    SmallVector<linalg::LinalgOp> candidates;
    module.walk([&](linalg::LinalgOp op) {
      if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op))
        candidates.push_back(op);
    });
    for (linalg::LinalgOp op : candidates)
      if (failed(rewriteMatmul(module, op, cuda)) &&
          op->hasAttr(DSDialect::kGemmOverwriteAttrName))
        restoreZeroFill(op); // Stays linalg and becomes loops.
  }
};

} // namespace
