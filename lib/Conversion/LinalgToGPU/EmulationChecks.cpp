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
/// far in this launch: the block (or thread) that wrote it and the one that
/// read it (see RaceScope).
struct Shadow {
  Value writer, reader;
  SmallVector<Value> dims; // the buffer's extents, for row-major indices
};

/// What a race checker tells apart. Blocks: an accessor is a block's id
/// (i32); -1 is none, -2 several. Threads: an accessor is (block << 40) |
/// (phase << 16) | thread (i64), the phase counting the block-wide
/// synchronisations the thread has passed; accessors of different blocks or
/// phases are ordered (the block check covers blocks), and the thread bits
/// all set mean several threads of that phase.
enum class RaceScope { Blocks, Threads };

/// The module's `__ds_emulate_race_check` (blocks) or
/// `__ds_emulate_thread_race_check` (threads), `(writer, reader, element,
/// lanes, me, writes, where, whereLength)`, made on first use: for
/// elements [element, element + lanes) of a shadowed buffer, records `me`
/// as their writer or reader, and stops the emulation with `where` and what
/// happened if another accessor that may run at the same time wrote one,
/// or a write meets such an accessor's read. One call an access, out of
/// line: the checks inline at every access more than doubled the emulated
/// steps' LLVM time.
FailureOr<func::FuncOp> raceChecker(gpu::LaunchOp launch, RaceScope scope) {
  bool threads = scope == RaceScope::Threads;
  StringRef name =
      threads ? "__ds_emulate_thread_race_check" : "__ds_emulate_race_check";
  auto module = launch->getParentOfType<ModuleOp>();
  MLIRContext *ctx = module.getContext();
  unsigned bits = threads ? 64 : 32;
  Type id = IntegerType::get(ctx, bits);
  Type index = IndexType::get(ctx);
  auto shadowType = MemRefType::get({ShapedType::kDynamic}, id);
  auto type = FunctionType::get(
      ctx,
      {shadowType, shadowType, index, index, id, IntegerType::get(ctx, 1),
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
  Value writerShadow = args[0], readerShadow = args[1], me = args[4],
        writes = args[5];
  auto cst = [&](OpBuilder &at, int64_t v) -> Value {
    return arith::ConstantIntOp::create(at, loc, v, bits);
  };
  auto eq = [&](OpBuilder &at, Value a, Value c) -> Value {
    return arith::CmpIOp::create(at, loc, arith::CmpIPredicate::eq, a, c);
  };
  // The accessor's block and phase (threads), which another thread's
  // access must share to race with it.
  auto phaseOf = [&](OpBuilder &at, Value who) -> Value {
    return arith::ShRSIOp::create(at, loc, who, cst(at, 16));
  };
  auto lanes =
      scf::ForOp::create(b, loc, indexConstant(b, loc, 0), args[3],
                         indexConstant(b, loc, 1), ValueRange{cst(b, 0)});
  {
    OpBuilder lb = OpBuilder::atBlockBegin(lanes.getBody());
    Value e = arith::AddIOp::create(lb, loc, args[2], lanes.getInductionVar());
    Value writer = memref::LoadOp::create(lb, loc, writerShadow, e);
    Value reader = memref::LoadOp::create(lb, loc, readerShadow, e);
    Value none = cst(lb, -1);
    Value samePhase =
        threads ? eq(lb, phaseOf(lb, reader), phaseOf(lb, me)) : Value();
    // Another accessor that may run at the same time: one (or several)
    // other than this one, and for threads in this block and phase.
    auto other = [&](Value who) -> Value {
      Value r = arith::AndIOp::create(
          lb, loc,
          arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ne, who, none),
          arith::CmpIOp::create(lb, loc, arith::CmpIPredicate::ne, who, me));
      if (threads)
        r = arith::AndIOp::create(lb, loc, r,
                                  eq(lb, phaseOf(lb, who), phaseOf(lb, me)));
      return r;
    };
    Value readMet = arith::AndIOp::create(lb, loc, writes, other(reader));
    Value code = arith::SelectOp::create(
        lb, loc, other(writer), cst(lb, 1),
        arith::SelectOp::create(lb, loc, readMet, cst(lb, 2), cst(lb, 0)));
    code = arith::MaxSIOp::create(lb, loc, lanes.getRegionIterArgs()[0], code);
    // A write records its accessor; a read its accessor where none, only
    // this one or (threads) only earlier phases read before, else
    // "several".
    Value firstReader =
        arith::OrIOp::create(lb, loc, eq(lb, reader, none), eq(lb, reader, me));
    Value several = cst(lb, -2);
    if (threads) {
      firstReader = arith::OrIOp::create(
          lb, loc, firstReader,
          arith::XOrIOp::create(lb, loc, samePhase,
                                arith::ConstantIntOp::create(lb, loc, 1, 1)));
      several = arith::OrIOp::create(lb, loc, me, cst(lb, 0xFFFF));
    }
    Value newReader = arith::SelectOp::create(
        lb, loc, writes, reader,
        arith::SelectOp::create(lb, loc, firstReader, me, several));
    Value newWriter = arith::SelectOp::create(lb, loc, writes, me, writer);
    memref::StoreOp::create(lb, loc, newWriter, writerShadow, e);
    memref::StoreOp::create(lb, loc, newReader, readerShadow, e);
    scf::YieldOp::create(lb, loc, code);
  }
  // 1: another accessor wrote; 2: this write meets another's read.
  Value code = lanes.getResult(0);
  auto failing = scf::IfOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, code, cst(b, 0)));
  {
    OpBuilder fb = OpBuilder::atBlockTerminator(failing.thenBlock());
    if (failed(emitWrite(fb, loc, "ds-emulate-gpu-kernels: ")))
      return failure();
    writeTo2(fb, loc, args[6], args[7]);
    std::string who = threads ? "another thread of its block" : "another block";
    std::string race =
        threads ? " between the same barriers (threads run in any order and "
                  "at once between barriers on a GPU: a race)\n"
                : " in the same launch (blocks run in any order and at once "
                  "on a GPU: a race)\n";
    Value reads = arith::XOrIOp::create(
        fb, loc, writes, arith::ConstantIntOp::create(fb, loc, 1, 1));
    std::pair<Value, std::string> messages[] = {
        {arith::AndIOp::create(fb, loc, eq(fb, code, cst(fb, 1)), reads),
         " reads an element that " + who + " writes" + race},
        {arith::AndIOp::create(fb, loc, eq(fb, code, cst(fb, 1)), writes),
         " writes an element that " + who + " writes" + race},
        {eq(fb, code, cst(fb, 2)),
         " writes an element that " + who + " reads" + race}};
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

/// Shadows of `bits`-bit accessors for each of `bases`, all -1, allocated
/// at `b` and appended to `buffers`; each base's extents from `dimsOf`.
void allocShadows(OpBuilder &b, Location loc,
                  llvm::MapVector<Value, Shadow> &shadows, unsigned bits,
                  function_ref<Value(OpBuilder &, Value, int64_t)> dimOf,
                  SmallVectorImpl<Value> &buffers) {
  Type id = b.getIntegerType(bits);
  for (auto &[base, shadow] : shadows) {
    auto type = cast<MemRefType>(base.getType());
    Value count = indexConstant(b, loc, 1);
    for (int64_t d = 0; d < type.getRank(); ++d) {
      shadow.dims.push_back(dimOf(b, base, d));
      count = b.createOrFold<arith::MulIOp>(loc, count, shadow.dims.back());
    }
    auto shadowType = MemRefType::get({ShapedType::kDynamic}, id);
    shadow.writer = memref::AllocOp::create(b, loc, shadowType, count);
    shadow.reader = memref::AllocOp::create(b, loc, shadowType, count);
    buffers.push_back(shadow.writer);
    buffers.push_back(shadow.reader);
    Value none = arith::ConstantIntOp::create(b, loc, -1, bits);
    auto init = scf::ForOp::create(b, loc, indexConstant(b, loc, 0), count,
                                   indexConstant(b, loc, 1));
    OpBuilder ib = OpBuilder::atBlockTerminator(init.getBody());
    memref::StoreOp::create(ib, loc, none, shadow.writer,
                            init.getInductionVar());
    memref::StoreOp::create(ib, loc, none, shadow.reader,
                            init.getInductionVar());
  }
}

/// Before each access in `accesses` of a buffer in `shadows`, a call of
/// `checker` with its row-major element and the accessor `who(builder)`.
LogicalResult
callChecker(ArrayRef<std::pair<Operation *, MemoryAccess>> accesses,
            const llvm::MapVector<Value, Shadow> &shadows, func::FuncOp checker,
            function_ref<Value(OpBuilder &, Location)> who) {
  for (auto &[op, access] : accesses) {
    auto it = shadows.find(access.base);
    if (it == shadows.end())
      continue;
    const Shadow &shadow = it->second;
    OpBuilder ob(op);
    Location at = op->getLoc();
    // Row-major element index (in bounds: checkAccesses stops first).
    Value element = indexConstant(ob, at, 0);
    for (auto [index, dim] : llvm::zip(access.indices, shadow.dims))
      element = arith::AddIOp::create(
          ob, at, arith::MulIOp::create(ob, at, element, dim), index);
    std::string text = where(op);
    FailureOr<Value> whereText = stringGlobal(ob, at, text);
    if (failed(whereText))
      return failure();
    func::CallOp::create(
        ob, at, checker,
        ValueRange{shadow.writer, shadow.reader, element,
                   indexConstant(ob, at, access.lanes), who(ob, at),
                   arith::ConstantIntOp::create(ob, at, access.writes, 1),
                   *whereText,
                   arith::ConstantIntOp::create(ob, at, text.size(), 64)});
  }
  return success();
}

/// An empty shadow for each buffer that one of `accesses` writes and
/// `tracked` accepts, in order of first access.
llvm::MapVector<Value, Shadow>
writtenBuffers(ArrayRef<std::pair<Operation *, MemoryAccess>> accesses,
               function_ref<bool(Value)> tracked) {
  llvm::MapVector<Value, Shadow> shadows;
  for (auto &[op, access] : accesses)
    if (access.writes && tracked(access.base))
      shadows.insert({access.base, Shadow()});
  return shadows;
}

/// The linear id of `ids` in `sizes`, x fastest.
Value linearId(OpBuilder &b, Location loc, gpu::KernelDim3 ids,
               gpu::KernelDim3 sizes) {
  return arith::AddIOp::create(
      b, loc, ids.x,
      arith::MulIOp::create(
          b, loc, sizes.x,
          arith::AddIOp::create(
              b, loc, ids.y, arith::MulIOp::create(b, loc, sizes.y, ids.z))));
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
  llvm::MapVector<Value, Shadow> shadows =
      writtenBuffers(accesses, [&](Value base) {
        return !launch.getBody().isAncestor(base.getParentRegion());
      });
  if (shadows.empty())
    return success();

  Location loc = launch.getLoc();
  OpBuilder b(launch);
  allocShadows(
      b, loc, shadows, 32,
      [&](OpBuilder &at, Value base, int64_t d) {
        return at.createOrFold<memref::DimOp>(loc, base, d);
      },
      buffers);
  // The block's linear id, from the launch's own arguments.
  OpBuilder bb = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value block = arith::IndexCastOp::create(
      bb, loc, bb.getI32Type(),
      linearId(bb, loc, launch.getBlockIds(), launch.getGridSize()));
  FailureOr<func::FuncOp> checker = raceChecker(launch, RaceScope::Blocks);
  if (failed(checker))
    return failure();
  return callChecker(accesses, shadows, *checker,
                     [&](OpBuilder &, Location) { return block; });
}

/// Elements of a buffer (or of shared memory) that one thread of a block
/// writes and another reads or writes between the same two block-wide
/// synchronisations: a GPU runs those threads in any order and at once, so
/// this is a race even inside one warp (Volta and later schedule a warp's
/// threads independently). The emulation runs the threads one after
/// another, last first, which hides it. Each buffer the launch stores to
/// and each shared buffer it stores to gets two shadows, and each thread a
/// count of the barriers and all-reduces it has passed (its phase); each
/// load and store checks and updates the shadows. Subgroup reductions do
/// not order memory between warps, so they end no phase. Views of a buffer
/// taken inside the launch are not tracked.
LogicalResult emulation::checkThreadRaces(gpu::LaunchOp launch,
                                          SmallVectorImpl<Value> &buffers) {
  auto accesses = accessesOf(launch);
  auto attributions = launch.getWorkgroupAttributions();
  llvm::MapVector<Value, Shadow> shadows =
      writtenBuffers(accesses, [&](Value base) {
        return !launch.getBody().isAncestor(base.getParentRegion()) ||
               llvm::is_contained(attributions, base);
      });
  if (shadows.empty())
    return success();

  Location loc = launch.getLoc();
  OpBuilder b(launch);
  allocShadows(
      b, loc, shadows, 64,
      [&](OpBuilder &at, Value base, int64_t d) -> Value {
        auto type = cast<MemRefType>(base.getType());
        if (!type.isDynamicDim(d))
          return indexConstant(at, loc, type.getDimSize(d));
        return at.createOrFold<memref::DimOp>(loc, base, d);
      },
      buffers);
  // Each thread's phase, at its linear id.
  gpu::KernelDim3 sizes = launch.getBlockSizeOperandValues();
  Value numThreads = b.createOrFold<arith::MulIOp>(
      loc, sizes.x, b.createOrFold<arith::MulIOp>(loc, sizes.y, sizes.z));
  Type i64 = b.getI64Type();
  Value phases = memref::AllocOp::create(
      b, loc, MemRefType::get({ShapedType::kDynamic}, i64), numThreads);
  buffers.push_back(phases);

  OpBuilder bb = OpBuilder::atBlockBegin(&launch.getBody().front());
  Value thread =
      linearId(bb, loc, launch.getThreadIds(), launch.getBlockSize());
  Value block = linearId(bb, loc, launch.getBlockIds(), launch.getGridSize());
  Value blockBits = arith::ShLIOp::create(
      bb, loc, arith::IndexCastOp::create(bb, loc, i64, block),
      arith::ConstantIntOp::create(bb, loc, 40, 64));
  Value threadBits = arith::IndexCastOp::create(bb, loc, i64, thread);
  memref::StoreOp::create(bb, loc, arith::ConstantIntOp::create(bb, loc, 0, 64),
                          phases, thread);
  // A block-wide synchronisation starts a phase.
  launch.getBody().walk([&](Operation *op) {
    if (!isa<gpu::BarrierOp, gpu::AllReduceOp>(op))
      return;
    OpBuilder ab(op->getContext());
    ab.setInsertionPointAfter(op);
    Value n = memref::LoadOp::create(ab, loc, phases, thread);
    memref::StoreOp::create(
        ab, loc,
        arith::AddIOp::create(ab, loc, n,
                              arith::ConstantIntOp::create(ab, loc, 1, 64)),
        phases, thread);
  });
  FailureOr<func::FuncOp> checker = raceChecker(launch, RaceScope::Threads);
  if (failed(checker))
    return failure();
  return callChecker(
      accesses, shadows, *checker, [&](OpBuilder &at, Location l) -> Value {
        Value phase = memref::LoadOp::create(at, l, phases, thread);
        Value bits = arith::OrIOp::create(
            at, l, blockBits,
            arith::ShLIOp::create(at, l, phase,
                                  arith::ConstantIntOp::create(at, l, 16, 64)));
        return arith::OrIOp::create(at, l, bits, threadBits);
      });
}
