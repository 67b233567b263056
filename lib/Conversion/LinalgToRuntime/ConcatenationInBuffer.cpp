//===- ConcatenationInBuffer.cpp - Parts written where they are joined ----===//
//
// See ConcatenationInBuffer.h. The slices are given to the parts' producers
// as `bufferization.to_tensor restrict writable` views rather than as
// tensor.extract_slice ops of the concatenation (upstream's empty tensor
// elimination): one-shot analysis does not know that two slices of one
// tensor are disjoint, so writing a part in place while an earlier link
// writes the tensor counts as a conflict and brings the copy back.
//
//===----------------------------------------------------------------------===//

#include "ConcatenationInBuffer.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

/// A part its producer can write in the concatenation's buffer.
struct PartInPlace {
  /// The part as its producer makes it (the link's source, reshapes
  /// stripped).
  Value part;
  /// The init that becomes the part's slice.
  OpOperand *init = nullptr;
  /// When set, `init` holds this fill, which other ops read too: the part
  /// gets a fill of its own.
  linalg::FillOp sharedFill;
};

bool isReshape(Operation *op) {
  return isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op);
}

/// Whether `op` (tied to `init`) writes its result without reading `init`:
/// a fill, an elementwise generic whose payload ignores its output.
bool ignoresInit(DestinationStyleOpInterface op, OpOperand *init) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op.getOperation());
  return linalgOp && !linalgOp.payloadUsesValueFromOperand(init);
}

/// How the link's `source` can be computed in its slice, if it can: see
/// buildConcatenationInBuffer.
std::optional<PartInPlace> findPartInPlace(Value source, Block *block) {
  Value v = source;
  while (isReshape(v.getDefiningOp())) {
    if (!v.hasOneUse())
      return std::nullopt;
    v = v.getDefiningOp()->getOperand(0);
  }
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape() || type.getRank() == 0)
    return std::nullopt;
  // A reduction's output stays a buffer of its own: the kernel builders
  // fold column sums into the row kernels and cast-transposes that read
  // their operand only when it is (and a bias gradient is a small copy).
  // GEMMs (cuBLASLt, oneDNN) write any strided view.
  auto producer = v.getDefiningOp<linalg::LinalgOp>();
  if (!producer || (producer.getNumReductionLoops() != 0 &&
                    !linalg::isaContractionOpInterface(producer)))
    return std::nullopt;
  PartInPlace found;
  found.part = v;
  while (true) {
    auto result = dyn_cast<OpResult>(v);
    auto op = result ? dyn_cast<DestinationStyleOpInterface>(result.getOwner())
                     : nullptr;
    if (!v.hasOneUse() || !op || !op.hasPureTensorSemantics() ||
        op->getBlock() != block)
      return std::nullopt;
    OpOperand *init = op.getTiedOpOperand(result);
    Value initValue = init->get();
    found.init = init;
    if (initValue.getDefiningOp<tensor::EmptyOp>() || ignoresInit(op, init))
      return found;
    // A zero fill that CSE shared between GEMMs: this part gets its own.
    auto fill = initValue.getDefiningOp<linalg::FillOp>();
    if (fill && !initValue.hasOneUse()) {
      found.sharedFill = fill;
      return found;
    }
    v = initValue;
  }
}

/// The slice [offset, offset + size) of the 1-D `buffer`, viewed in
/// `shape` (row-major, as tensor reshapes are).
Value sliceView(OpBuilder &b, Location loc, Value buffer, int64_t offset,
                ArrayRef<int64_t> shape) {
  int64_t size = ShapedType::getNumElements(shape);
  Value slice = memref::SubViewOp::create(
      b, loc, buffer, ArrayRef<OpFoldResult>{b.getIndexAttr(offset)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(size)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)});
  if (shape.size() == 1)
    return slice;
  ReassociationIndices all;
  for (int64_t i = 0, e = shape.size(); i < e; ++i)
    all.push_back(i);
  return memref::ExpandShapeOp::create(b, loc, shape, slice,
                                       ArrayRef<ReassociationIndices>{all});
}

/// Erases `op` and then the reshapes that only it used.
void eraseWithReshapes(Operation *op) {
  SmallVector<Value> sources(op->getOperands());
  op->erase();
  for (Value source : sources) {
    Operation *def = source.getDefiningOp();
    if (isReshape(def) && def->use_empty())
      eraseWithReshapes(def);
  }
}

} // namespace

Value mlir::ds::buildConcatenationInBuffer(Value concatenation,
                                           bool partsInPlace) {
  SmallVector<tensor::InsertSliceOp> links;
  for (Value v = concatenation;
       auto link = v.getDefiningOp<tensor::InsertSliceOp>();
       v = link.getDest()) {
    if (v != concatenation && !v.hasOneUse())
      return {};
    links.push_back(link);
  }
  std::reverse(links.begin(), links.end());
  auto empty = links.empty()
                   ? nullptr
                   : links.front().getDest().getDefiningOp<tensor::EmptyOp>();
  if (!empty || !empty.getType().hasStaticShape())
    return {};
  RankedTensorType type = empty.getType();
  Block *block = links.back()->getBlock();
  if (llvm::any_of(links, [&](tensor::InsertSliceOp link) {
        return link->getBlock() != block;
      }))
    return {};

  // Which parts their producers write in place, and the first such writer.
  SmallVector<std::optional<PartInPlace>> inPlace;
  Operation *firstWriter = links.front();
  for (tensor::InsertSliceOp link : links) {
    bool contiguous = type.getRank() == 1 && link.hasUnitStride() &&
                      link.getSourceType().hasStaticShape() &&
                      !ShapedType::isDynamic(link.getStaticOffsets()[0]);
    inPlace.push_back(contiguous && partsInPlace
                          ? findPartInPlace(link.getSource(), block)
                          : std::nullopt);
    if (inPlace.back()) {
      Operation *writer = inPlace.back()->init->getOwner();
      if (writer->isBeforeInBlock(firstWriter))
        firstWriter = writer;
    }
  }

  Location loc = empty.getLoc();
  OpBuilder b(firstWriter);
  Value buffer = memref::AllocOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()));
  tensor::InsertSliceOp last = links.back();
  for (auto [link, part] : llvm::zip_equal(links, inPlace)) {
    if (!part)
      continue;
    auto partType = cast<RankedTensorType>(part->part.getType());
    Operation *writer = part->init->getOwner();
    b.setInsertionPoint(writer);
    Value view = sliceView(b, link.getLoc(), buffer, link.getStaticOffsets()[0],
                           partType.getShape());
    Value slice = bufferization::ToTensorOp::create(b, link.getLoc(), partType,
                                                    view, /*restrict=*/true,
                                                    /*writable=*/true);
    if (part->sharedFill)
      slice = linalg::FillOp::create(b, part->sharedFill.getLoc(),
                                     part->sharedFill.value(), slice)
                  .getResult(0);
    Value replaced = part->init->get();
    part->init->set(slice);
    if (auto unused = replaced.getDefiningOp<tensor::EmptyOp>();
        unused && unused->use_empty())
      unused.erase();
    // The part is now in the buffer: this keeps it, and bufferization
    // makes it a copy of the slice onto itself, which folds away.
    b.setInsertionPoint(last);
    auto keep = bufferization::MaterializeInDestinationOp::create(
        b, link.getLoc(), TypeRange(), part->part, view);
    keep.setRestrict(true);
    keep.setWritable(true);
  }
  // The other parts are copied in, into the buffer's tensor.
  b.setInsertionPoint(last);
  Value joined = bufferization::ToTensorOp::create(b, loc, type, buffer,
                                                   /*restrict=*/true,
                                                   /*writable=*/true);
  for (auto [link, part] : llvm::zip_equal(links, inPlace))
    if (!part)
      joined = tensor::InsertSliceOp::create(
          b, link.getLoc(), link.getSource(), joined, link.getMixedOffsets(),
          link.getMixedSizes(), link.getMixedStrides());
  concatenation.replaceAllUsesWith(joined);
  for (tensor::InsertSliceOp link : llvm::reverse(links))
    eraseWithReshapes(link);
  if (empty->use_empty())
    empty.erase();
  return buffer;
}
