//===- EmulationChecks.cpp - What the emulation checks a GPU would fault on
//===//
//
// Implements EmulationChecks.h: the checks ds-emulate-gpu-kernels puts
// around a launch's loads and stores, and the emitted code that reports a
// failed one and aborts.
//
//===----------------------------------------------------------------------===//

#include "EmulationChecks.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::emulation;

namespace {

Value indexConstant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// The module that code built at `b` goes into.
ModuleOp moduleOf(OpBuilder &b) {
  Operation *op = b.getInsertionBlock()->getParentOp();
  if (auto module = dyn_cast<ModuleOp>(op))
    return module;
  return op->getParentOfType<ModuleOp>();
}

/// A load or store of the body: its buffer, indices, the alignment it
/// claims, its elements (a vector's lanes along the last index) and whether
/// it writes.
struct MemoryAccess {
  Value base;
  ValueRange indices;
  std::optional<uint64_t> alignment;
  int64_t lanes = 1;
  bool writes = false;
};

std::optional<MemoryAccess> describeAccess(Operation *op) {
  return TypeSwitch<Operation *, std::optional<MemoryAccess>>(op)
      .Case([](memref::LoadOp o) {
        return MemoryAccess{o.getMemRef(), o.getIndices(), std::nullopt, 1,
                            false};
      })
      .Case([](memref::StoreOp o) {
        return MemoryAccess{o.getMemRef(), o.getIndices(), std::nullopt, 1,
                            true};
      })
      .Case([](vector::LoadOp o) {
        return MemoryAccess{o.getBase(), o.getIndices(), o.getAlignment(),
                            o.getVectorType().getNumElements(), false};
      })
      .Case([](vector::StoreOp o) {
        return MemoryAccess{o.getBase(), o.getIndices(), o.getAlignment(),
                            o.getVectorType().getNumElements(), true};
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// The body's loads and stores, in order.
SmallVector<std::pair<Operation *, MemoryAccess>>
accessesOf(gpu::LaunchOp launch) {
  SmallVector<std::pair<Operation *, MemoryAccess>> accesses;
  launch.getBody().walk([&](Operation *op) {
    if (std::optional<MemoryAccess> access = describeAccess(op))
      accesses.push_back({op, *access});
  });
  return accesses;
}

} // namespace

/// Stops the emulation with `ds-emulate-gpu-kernels: FILE:LINE:COL: <op>
/// <what>` where `fails` holds.
LogicalResult emulation::emitCheck(OpBuilder &b, Location loc, Operation *op,
                                   Value fails, const Twine &what) {
  auto branch = scf::IfOp::create(b, loc, fails);
  OpBuilder fb = OpBuilder::atBlockTerminator(branch.thenBlock());
  return emitFatal(fb, loc,
                   "ds-emulate-gpu-kernels: " + where(op) + " " + what);
}

/// `FILE:LINE:COL: <op>`, as compilers print a location.
std::string emulation::where(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  Location loc = op->getLoc();
  if (auto file = loc->findInstanceOf<FileLineColLoc>())
    os << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn();
  else
    os << loc;
  os << ": " << op->getName().getStringRef();
  return text;
}

/// Writes `text` to standard error (unbuffered: write(2)).
LogicalResult emulation::emitWrite(OpBuilder &b, Location loc,
                                   const Twine &text) {
  FailureOr<Value> addr = stringGlobal(b, loc, text);
  if (failed(addr))
    return failure();
  writeTo2(b, loc, *addr,
           arith::ConstantIntOp::create(b, loc, text.str().size(), 64));
  return success();
}

/// The address of a constant global holding `text` (named by its hash,
/// so made once a module), with libc's write and abort declared.
FailureOr<Value> emulation::stringGlobal(OpBuilder &b, Location loc,
                                         const Twine &text) {
  ModuleOp module = moduleOf(b);
  MLIRContext *ctx = b.getContext();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  std::string str = text.str();
  std::string name =
      "__ds_emulate_msg_" +
      llvm::utohexstr(static_cast<uint64_t>(llvm::hash_value(str)));
  OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
  if (!module.lookupSymbol(name))
    LLVM::GlobalOp::create(
        mb, loc, LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8), str.size()),
        /*isConstant=*/true, LLVM::Linkage::Internal, name,
        mb.getStringAttr(str));
  // libc's write and abort, declared unless the module has them.
  auto declare = [&](StringRef fn, FunctionType type) -> LogicalResult {
    Operation *existing = module.lookupSymbol(fn);
    if (!existing) {
      func::FuncOp::create(mb, loc, fn, type).setPrivate();
      return success();
    }
    auto f = dyn_cast<func::FuncOp>(existing);
    if (f && f.getFunctionType() == type)
      return success();
    return existing->emitError("ds-emulate-gpu-kernels: the emulated "
                               "kernels call libc's '")
           << fn << "' as " << type << ", which this symbol is not";
  };
  if (failed(declare(
          "write", FunctionType::get(ctx, {b.getI32Type(), ptr, b.getI64Type()},
                                     {b.getI64Type()}))) ||
      failed(declare("abort", FunctionType::get(ctx, {}, {}))))
    return failure();
  return Value(LLVM::AddressOfOp::create(b, loc, ptr, name));
}

void emulation::writeTo2(OpBuilder &b, Location loc, Value addr, Value size) {
  Value fd = arith::ConstantIntOp::create(b, loc, 2, 32);
  func::CallOp::create(b, loc, "write", TypeRange{b.getI64Type()},
                       ValueRange{fd, addr, size});
}

/// Writes `message` to standard error and aborts.
LogicalResult emulation::emitFatal(OpBuilder &b, Location loc,
                                   const Twine &message) {
  if (failed(emitWrite(b, loc, message + "\n")))
    return failure();
  func::CallOp::create(b, loc, "abort", TypeRange{}, ValueRange{});
  return success();
}

/// Before each load and store of the body, a check that its indices are
/// in bounds, and for a vector access that claims more alignment than its
/// element's (the kernels' 16-byte vectors, VectorKernels.h), that its
/// address has it. The host runs what a GPU would not: an access past a
/// buffer's end reads or corrupts another allocation (on a GPU, another
/// buffer, or an illegal-address fault), and a misaligned vector access
/// faults ("misaligned address"). Without the checks, a kernel that
/// did either could still match its reference here.
LogicalResult emulation::checkAccesses(gpu::LaunchOp launch) {
  for (auto &[op, access] : accessesOf(launch)) {
    Value base = access.base;
    ValueRange indices = access.indices;
    std::optional<uint64_t> alignment = access.alignment;
    int64_t lanes = access.lanes;
    OpBuilder b(op);
    Location loc = op->getLoc();
    // In bounds: every index below its extent (unsigned, so a negative
    // one is not), the last one's vector too.
    Value fails = arith::ConstantIntOp::create(b, loc, 0, 1);
    for (auto [d, index] : llvm::enumerate(indices)) {
      Value last = index;
      if (d + 1 == indices.size() && lanes > 1)
        last = arith::AddIOp::create(b, loc, index,
                                     indexConstant(b, loc, lanes - 1));
      Value extent = memref::DimOp::create(b, loc, base, d);
      fails = arith::OrIOp::create(
          b, loc, fails,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, last,
                                extent));
    }
    if (!indices.empty() &&
        failed(emitCheck(b, loc, op, fails,
                         "out of bounds (a GPU reads or writes another "
                         "buffer, or faults: illegal address)")))
      return failure();
    Type element = cast<MemRefType>(base.getType()).getElementType();
    if (!alignment || !element.isIntOrFloat() ||
        *alignment * 8 <= element.getIntOrFloatBitWidth())
      continue;
    auto meta = memref::ExtractStridedMetadataOp::create(b, loc, base);
    Value linear = meta.getOffset();
    for (auto [index, stride] : llvm::zip(indices, meta.getStrides()))
      linear = arith::AddIOp::create(
          b, loc, linear, arith::MulIOp::create(b, loc, index, stride));
    Value bytes = arith::MulIOp::create(
        b, loc, linear,
        indexConstant(b, loc,
                      llvm::divideCeil(element.getIntOrFloatBitWidth(), 8)));
    Value address = arith::AddIOp::create(
        b, loc, memref::ExtractAlignedPointerAsIndexOp::create(b, loc, base),
        bytes);
    Value misaligned = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne,
        arith::AndIOp::create(
            b, loc, address,
            indexConstant(b, loc, static_cast<int64_t>(*alignment) - 1)),
        indexConstant(b, loc, 0));
    if (failed(emitCheck(b, loc, op, misaligned,
                         "claims " + Twine(*alignment) +
                             "-byte alignment at an address without it "
                             "(a GPU faults: misaligned address)")))
      return failure();
  }
  return success();
}

namespace {

/// A buffer the launch writes, and who touched each of its elements so
/// far in this launch: the block that wrote it and the block that read it
/// (-1: none; -2: several).
struct Shadow {
  Value writer, reader;
  SmallVector<Value> dims; // the buffer's extents, for row-major indices
};

/// The module's `__ds_emulate_race_check(writer, reader, element, lanes,
/// block, writes, where, whereLength)`, made on first use: for elements
/// [element, element + lanes) of a shadowed buffer, records this block as
/// their writer or reader, and stops the emulation with `where` and what
/// happened if another block wrote one, or a write meets another block's
/// read. One call an access, out of line: the checks inline at every
/// access more than doubled the emulated steps' LLVM time.
FailureOr<func::FuncOp> raceChecker(gpu::LaunchOp launch) {
  StringRef name = "__ds_emulate_race_check";
  auto module = launch->getParentOfType<ModuleOp>();
  MLIRContext *ctx = module.getContext();
  Type i32 = IntegerType::get(ctx, 32);
  Type index = IndexType::get(ctx);
  auto shadowType = MemRefType::get({ShapedType::kDynamic}, i32);
  auto type = FunctionType::get(
      ctx,
      {shadowType, shadowType, index, index, i32, IntegerType::get(ctx, 1),
       LLVM::LLVMPointerType::get(ctx), IntegerType::get(ctx, 64)},
      {});
  if (Operation *existing = module.lookupSymbol(name)) {
    auto f = dyn_cast<func::FuncOp>(existing);
    if (f && f.getFunctionType() == type)
      return f;
    return existing->emitError("ds-emulate-gpu-kernels: '")
           << name << "' is taken by another symbol";
  }
  Location loc = module.getLoc();
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  auto f = func::FuncOp::create(mb, loc, name, type);
  f.setPrivate();
  f->setAttr("no_inline", UnitAttr::get(ctx));
  OpBuilder b = OpBuilder::atBlockBegin(f.addEntryBlock());
  auto args = f.getArguments();
  Value writerShadow = args[0], readerShadow = args[1], block = args[4],
        writes = args[5];
  auto c32 = [&](OpBuilder &at, int64_t v) -> Value {
    return arith::ConstantIntOp::create(at, loc, v, 32);
  };
  auto is = [&](OpBuilder &at, Value v, int64_t c) -> Value {
    return arith::CmpIOp::create(at, loc, arith::CmpIPredicate::eq, v,
                                 c32(at, c));
  };
  auto lanes =
      scf::ForOp::create(b, loc, indexConstant(b, loc, 0), args[3],
                         indexConstant(b, loc, 1), ValueRange{c32(b, 0)});
  {
    OpBuilder lb = OpBuilder::atBlockBegin(lanes.getBody());
    Value e = arith::AddIOp::create(lb, loc, args[2], lanes.getInductionVar());
    Value writer = memref::LoadOp::create(lb, loc, writerShadow, e);
    Value reader = memref::LoadOp::create(lb, loc, readerShadow, e);
    // Another block: an id (>= 0) other than this one, or several (-2).
    auto other = [&](Value who) -> Value {
      return arith::AndIOp::create(
          lb, loc,
          arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ne, who,
                                c32(lb, -1)),
          arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ne, who, block));
    };
    Value readMet = arith::AndIOp::create(lb, loc, writes, other(reader));
    Value code = arith::SelectOp::create(
        lb, loc, other(writer), c32(lb, 1),
        arith::SelectOp::create(lb, loc, readMet, c32(lb, 2), c32(lb, 0)));
    code = arith::MaxSIOp::create(lb, loc, lanes.getRegionIterArgs()[0], code);
    // A write records its block; a read its block where none or only
    // this one read before, else "several".
    Value firstReader = arith::OrIOp::create(
        lb, loc, is(lb, reader, -1),
        arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::eq, reader,
                              block));
    Value newReader = arith::SelectOp::create(
        lb, loc, writes, reader,
        arith::SelectOp::create(lb, loc, firstReader, block, c32(lb, -2)));
    Value newWriter = arith::SelectOp::create(lb, loc, writes, block, writer);
    memref::StoreOp::create(lb, loc, newWriter, writerShadow, e);
    memref::StoreOp::create(lb, loc, newReader, readerShadow, e);
    scf::YieldOp::create(lb, loc, code);
  }
  // 1: another block wrote; 2: this write meets another block's read.
  Value code = lanes.getResult(0);
  auto failing = scf::IfOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, code, c32(b, 0)));
  {
    OpBuilder fb = OpBuilder::atBlockTerminator(failing.thenBlock());
    if (failed(emitWrite(fb, loc, "ds-emulate-gpu-kernels: ")))
      return failure();
    writeTo2(fb, loc, args[6], args[7]);
    std::string race =
        " in the same launch (blocks run in any order and at once on a "
        "GPU: a race)\n";
    Value reads = arith::XOrIOp::create(
        fb, loc, writes, arith::ConstantIntOp::create(fb, loc, 1, 1));
    std::pair<Value, std::string> messages[] = {
        {arith::AndIOp::create(fb, loc, is(fb, code, 1), reads),
         " reads an element that another block writes" + race},
        {arith::AndIOp::create(fb, loc, is(fb, code, 1), writes),
         " writes an element that another block writes" + race},
        {is(fb, code, 2),
         " writes an element that another block reads" + race}};
    for (auto &m : messages) {
      auto branch = scf::IfOp::create(fb, loc, m.first);
      OpBuilder mb = OpBuilder::atBlockTerminator(branch.thenBlock());
      if (failed(emitWrite(mb, loc, m.second)))
        return failure();
    }
    func::CallOp::create(fb, loc, "abort", TypeRange{}, ValueRange{});
  }
  func::ReturnOp::create(b, loc);
  return f;
}

} // namespace

/// Elements of a buffer that one block writes and another reads or writes
/// in the same launch: on a GPU the blocks run in any order and at once,
/// so what the reader sees depends on timing. Run one after another here,
/// the blocks would give one of those orders, and the result might match
/// by luck. So each buffer the launch stores to (defined outside it)
/// gets two shadows of its elements, and each load and store of it checks
/// and updates them. Views of a buffer taken outside the launch are
/// tracked apart from each other, and so are threads of one block.
LogicalResult emulation::checkBlockRaces(gpu::LaunchOp launch,
                                         SmallVectorImpl<Value> &buffers) {
  auto accesses = accessesOf(launch);
  llvm::MapVector<Value, Shadow> shadows;
  for (auto &[op, access] : accesses)
    if (access.writes &&
        !launch.getBody().isAncestor(access.base.getParentRegion()))
      shadows.insert({access.base, Shadow()});
  if (shadows.empty())
    return success();

  Location loc = launch.getLoc();
  OpBuilder b(launch);
  Type i32 = b.getI32Type();
  for (auto &[base, shadow] : shadows) {
    auto type = cast<MemRefType>(base.getType());
    Value count = indexConstant(b, loc, 1);
    for (int64_t d = 0; d < type.getRank(); ++d) {
      shadow.dims.push_back(b.createOrFold<memref::DimOp>(loc, base, d));
      count = b.createOrFold<arith::MulIOp>(loc, count, shadow.dims.back());
    }
    auto shadowType = MemRefType::get({ShapedType::kDynamic}, i32);
    shadow.writer = memref::AllocOp::create(b, loc, shadowType, count);
    shadow.reader = memref::AllocOp::create(b, loc, shadowType, count);
    buffers.push_back(shadow.writer);
    buffers.push_back(shadow.reader);
    Value none = arith::ConstantIntOp::create(b, loc, -1, 32);
    auto init = scf::ForOp::create(b, loc, indexConstant(b, loc, 0), count,
                                   indexConstant(b, loc, 1));
    OpBuilder ib = OpBuilder::atBlockTerminator(init.getBody());
    memref::StoreOp::create(ib, loc, none, shadow.writer,
                            init.getInductionVar());
    memref::StoreOp::create(ib, loc, none, shadow.reader,
                            init.getInductionVar());
  }

  // The block's linear id, from the launch's own arguments.
  OpBuilder bb = OpBuilder::atBlockBegin(&launch.getBody().front());
  gpu::KernelDim3 ids = launch.getBlockIds();
  gpu::KernelDim3 grid = launch.getGridSize();
  Value linear = arith::AddIOp::create(
      bb, loc, ids.x,
      arith::MulIOp::create(
          bb, loc, grid.x,
          arith::AddIOp::create(
              bb, loc, ids.y, arith::MulIOp::create(bb, loc, grid.y, ids.z))));
  Value block = arith::IndexCastOp::create(bb, loc, i32, linear);

  FailureOr<func::FuncOp> checker = raceChecker(launch);
  if (failed(checker))
    return failure();
  for (auto &[op, access] : accesses) {
    auto it = shadows.find(access.base);
    if (it == shadows.end())
      continue;
    const Shadow &shadow = it->second;
    bool writes = access.writes;
    ValueRange indices = access.indices;
    int64_t lanes = access.lanes;
    OpBuilder ob(op);
    Location at = op->getLoc();
    // Row-major element index (in bounds: checkAccesses stops first).
    Value element = indexConstant(ob, at, 0);
    for (auto [index, dim] : llvm::zip(indices, shadow.dims))
      element = arith::AddIOp::create(
          ob, at, arith::MulIOp::create(ob, at, element, dim), index);
    std::string text = where(op);
    FailureOr<Value> whereText = stringGlobal(ob, at, text);
    if (failed(whereText))
      return failure();
    func::CallOp::create(
        ob, at, *checker,
        ValueRange{shadow.writer, shadow.reader, element,
                   indexConstant(ob, at, lanes), block,
                   arith::ConstantIntOp::create(ob, at, writes, 1), *whereText,
                   arith::ConstantIntOp::create(ob, at, text.size(), 64)});
  }
  return success();
}
