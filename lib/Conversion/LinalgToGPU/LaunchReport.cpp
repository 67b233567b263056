//===- LaunchReport.cpp - What each launch of a step moves and computes ---===//
//
// Implements ds-gpu-launch-report (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "ds/Conversion/Passes.h"
#include "ds/Dialect/DS/IR/DSDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cmath>
#include <cstring>
#include <optional>

namespace mlir::ds {
#define GEN_PASS_DEF_GPULAUNCHREPORTPASS
#include "ds/Conversion/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;

namespace {

/// Bytes of a memref of static shape; nullopt for any other type.
std::optional<int64_t> staticBytes(Type type) {
  auto m = dyn_cast<MemRefType>(type);
  if (!m || !m.hasStaticShape())
    return std::nullopt;
  Type e = m.getElementType();
  int64_t bits = e.isIntOrFloat() ? e.getIntOrFloatBitWidth()
                 : e.isIndex()    ? 64
                                  : -1;
  if (bits < 0)
    return std::nullopt;
  return m.getNumElements() * ((bits + 7) / 8);
}

/// The memref a library call's operand was cast from (the runtime takes
/// dynamic shapes; the step's buffers have static ones).
Value castSource(Value v) {
  while (auto c = v.getDefiningOp<memref::CastOp>())
    v = c.getSource();
  return v;
}

/// `file:line` of the first file location in `loc`, or "".
std::string where(Location loc) {
  std::string out;
  loc->walk([&](Location l) {
    if (auto f = dyn_cast<FileLineColLoc>(l)) {
      out = (llvm::sys::path::filename(f.getFilename().getValue()) + ":" +
             Twine(f.getLine()))
                .str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return out;
}

/// One line of the report: a kernel launch, a library GEMM, a copy, a
/// collective staged through the host or one on NCCL.
struct Row {
  enum Kind { Kernel, Gemm, Copy, Staged, Nccl } kind;
  std::string shape; // grid x block, or the GEMM's batch x M x N x K
  int64_t read = 0, written = 0;
  double flops = 0;
  double peakTflops = 0; // of the GEMM's operand width
  bool complete = true;  // every buffer it touches has a static size
  /// Inside host control flow (a top-k wait's loop over the ranks whose
  /// slots the runtime gathered, a branch on it): run as many times as the
  /// runtime decides, so not counted.
  bool conditional = false;
  Location loc;
  std::string kernel; // a launch's kernel name (ds-name-gpu-kernels), if any
};

/// The distinct buffers a launch reads and writes, each counted once at its
/// full (view's) size: the DRAM traffic of a kernel that streams its
/// operands, as the step's fused elementwise and reduction kernels do. A
/// buffer the body writes before it reads it (in the order of its code)
/// counts as written only: a row group's later members read what an earlier
/// one wrote of their row, from the cache.
Row launchRow(gpu::LaunchOp launch) {
  Row row{Row::Kernel, "", 0, 0, 0, 0, true, false, launch.getLoc(), ""};
  auto extent = [](Value v) {
    std::optional<int64_t> c = getConstantIntValue(v);
    return c ? std::to_string(*c) : std::string("?");
  };
  gpu::KernelDim3 grid = launch.getGridSizeOperandValues();
  gpu::KernelDim3 block = launch.getBlockSizeOperandValues();
  row.shape = extent(grid.x) + "," + extent(grid.y) + "," + extent(grid.z) +
              " x " + extent(block.x) + "," + extent(block.y) + "," +
              extent(block.z);
  if (FlatSymbolRefAttr name = launch.getFunctionAttr())
    row.kernel = name.getValue().str();
  llvm::SetVector<Value> reads, writes;
  llvm::DenseSet<Value> writtenFirst;
  // The part of each buffer read: a masked load (MaskedReads.h) reads what
  // its `ds.read_fraction` says, any other all of it; the same for writes
  // and `ds.write_fraction` (UnreadRowTails.h).
  DenseMap<Value, double> readFraction, writeFraction;
  auto fractionOf = [](Operation *op, StringRef name) {
    auto f = op->getAttrOfType<FloatAttr>(name);
    return f ? f.getValueAsDouble() : 1.0;
  };
  launch.getBody().walk([&](MemoryEffectOpInterface op) {
    SmallVector<MemoryEffects::EffectInstance> effects;
    op.getEffects(effects);
    for (const MemoryEffects::EffectInstance &e : effects) {
      Value v = e.getValue();
      if (!v || !isa<MemRefType>(v.getType()))
        continue;
      // Buffers defined inside the kernel (shared memory, registers) are
      // not DRAM traffic.
      if (launch->isProperAncestor(v.getParentBlock()->getParentOp()) ||
          v.getParentBlock()->getParentOp() == launch)
        continue;
      if (isa<MemoryEffects::Read>(e.getEffect())) {
        if (writtenFirst.contains(v))
          continue;
        reads.insert(v);
        double &f = readFraction.try_emplace(v, 0.0).first->second;
        f = std::max(f, fractionOf(op, ds::DSDialect::kReadFractionAttrName));
      } else if (isa<MemoryEffects::Write>(e.getEffect())) {
        writes.insert(v);
        double &f = writeFraction.try_emplace(v, 0.0).first->second;
        f = std::max(f, fractionOf(op, ds::DSDialect::kWriteFractionAttrName));
        if (!reads.contains(v))
          writtenFirst.insert(v);
      }
    }
  });
  auto total = [&](const llvm::SetVector<Value> &values, int64_t &bytes,
                   bool read) {
    for (Value v : values) {
      std::optional<int64_t> b = staticBytes(v.getType());
      double fraction = (read ? readFraction : writeFraction).lookup_or(v, 1.0);
      if (b)
        bytes += static_cast<int64_t>(std::llround(*b * fraction));
      else
        row.complete = false;
    }
  };
  total(reads, row.read, /*read=*/true);
  total(writes, row.written, /*read=*/false);
  return row;
}

/// A library GEMM (dsrt_cuda_matmul_*): C[b, M, N] from A[bA, M or K, K or
/// M] and B; K is A's elements over bA x M, whatever A's layout.
std::optional<Row> gemmRow(func::CallOp call) {
  if (!call.getCallee().starts_with("dsrt_cuda_matmul") ||
      call.getNumOperands() < 3)
    return std::nullopt;
  Row row{Row::Gemm, "", 0, 0, 0, 0, true, false, call.getLoc(), ""};
  auto typeOf = [&](unsigned i) {
    return dyn_cast<MemRefType>(castSource(call.getOperand(i)).getType());
  };
  MemRefType a = typeOf(0), b = typeOf(1), c = typeOf(2);
  if (!a || !b || !c || !a.hasStaticShape() || !b.hasStaticShape() ||
      !c.hasStaticShape() || a.getRank() != 3 || c.getRank() != 3) {
    row.complete = false;
    return row;
  }
  int64_t batch = c.getDimSize(0), m = c.getDimSize(1), n = c.getDimSize(2);
  int64_t k = a.getNumElements() / (a.getDimSize(0) * m);
  // The callee's suffix names the operand types (f32, bf16, f8, e5m2_e4m3).
  row.shape = std::to_string(batch) + " x " + std::to_string(m) + "x" +
              std::to_string(n) + "x" + std::to_string(k) + " " +
              call.getCallee().drop_front(strlen("dsrt_cuda_matmul_")).str();
  row.flops = 2.0 * batch * m * n * k;
  row.read = *staticBytes(a) + *staticBytes(b);
  row.written = *staticBytes(c);
  return row;
}

/// Whether `op` is a start that NCCL runs on the step's own buffer: an
/// uncompressed start in place, or an fp16/bf16 start (its 16-bit bucket).
bool startsInPlace(Operation *op) {
  auto start = dyn_cast_or_null<func::CallOp>(op);
  return start &&
         (start.getCallee().starts_with(
              "dsrt_cuda_allreduce_start_in_place_") ||
          start.getCallee().starts_with("dsrt_cuda_allreduce_start_half_"));
}

/// A collective staged through the host (a dsrt_cuda_* call other than a
/// GEMM): "read" is what it copies to the host, "written" what it copies
/// back. Its output is a start's third buffer (the new residual; a
/// PowerSGD state comes back at the wait, counted there as the bucket's
/// size is not), a send and a start the device encoded (three tiers'
/// codes and scales, top-k's slots) have none, and every other call's is
/// its last. An fp16/bf16 start stages its f32 bucket alone (its 16-bit
/// one is NCCL's); a top-k start its count and probe (topKParkingRow), and
/// a top-k take its sparse mean, whose size is known at run time only.
std::optional<Row> stagedRow(func::CallOp call) {
  StringRef name = call.getCallee();
  // A query: how many ranks' top-k slots NCCL gathered.
  if (!name.consume_front("dsrt_cuda_") || name.starts_with("matmul") ||
      name.starts_with("allreduce_ranks_topk"))
    return std::nullopt;
  Row row{Row::Staged, name.str(), 0, 0, 0, 0, true, false, call.getLoc(), ""};
  SmallVector<Value> buffers;
  for (Value v : call.getOperands())
    if (isa<MemRefType>(v.getType()))
      buffers.push_back(castSource(v));
  // A rank's gathered top-k slots, copied on the device into the step's.
  if (name.starts_with("allreduce_slots_topk")) {
    row.kind = Row::Copy;
    row.shape.clear();
    for (Value buffer : buffers) {
      std::optional<int64_t> bytes = staticBytes(buffer.getType());
      row.complete &= bytes.has_value();
      row.read += bytes.value_or(0);
    }
    row.written = row.read;
    return row;
  }
  if (name.starts_with("allreduce_start_half"))
    buffers.resize(1);
  if (name.starts_with("allreduce_start_topk"))
    buffers.erase(buffers.begin(), buffers.begin() + 2);
  // A top-k take copies its U elements (a size known at run time), or the
  // whole mean into its last buffer when more than half are not zero.
  if (name.starts_with("allreduce_take_topk"))
    buffers.resize(std::min<size_t>(buffers.size(), 2));
  bool noOutput = name.starts_with("send") ||
                  name.starts_with("allreduce_take_topk") ||
                  name.starts_with("allreduce_start_half") ||
                  name.starts_with("allreduce_start_three_tier") ||
                  name.starts_with("allreduce_start_topk");
  int output = noOutput                              ? -1
               : name.starts_with("allreduce_start") ? 2
                                                     : int(buffers.size()) - 1;
  for (auto [i, buffer] : llvm::enumerate(buffers)) {
    std::optional<int64_t> bytes = staticBytes(buffer.getType());
    row.complete &= bytes.has_value();
    (int(i) == output ? row.written : row.read) += bytes.value_or(0);
  }
  return row;
}

/// A top-k start's slots (indices and values), which the runtime copies on
/// the device into its own memory on the step stream: the used ones reach
/// the host later, on the staging thread's stream, beside the step's
/// kernels (dsrt_cuda_allreduce_start_topk_f32), so the step stream pays
/// for the device copy only.
std::optional<Row> topKParkingRow(func::CallOp call) {
  if (!call.getCallee().starts_with("dsrt_cuda_allreduce_start_topk") ||
      call.getNumOperands() < 2)
    return std::nullopt;
  Row row{Row::Copy, "", 0, 0, 0, 0, true, false, call.getLoc(), ""};
  for (Value v : call.getOperands().take_front(2)) {
    std::optional<int64_t> bytes = staticBytes(castSource(v).getType());
    row.complete &= bytes.has_value();
    row.read += bytes.value_or(0);
  }
  row.written = row.read;
  return row;
}

/// Whether the runtime runs `call` (a dsrt_cuda_* collective) on NCCL when
/// it can (lib/Runtime/CommNccl.cpp): the uncompressed starts (scheme 0)
/// and their waits, the blocking all-reduces and the broadcasts.
bool servedByNccl(func::CallOp call) {
  auto uncompressedStart = [](Operation *op) {
    auto start = dyn_cast_or_null<func::CallOp>(op);
    if (startsInPlace(start))
      return true;
    if (!start ||
        !start.getCallee().starts_with("dsrt_cuda_allreduce_start_") ||
        start.getCallee().contains("powersgd") || start.getNumOperands() < 4)
      return false;
    APInt scheme;
    return matchPattern(start.getOperand(3), m_ConstantInt(&scheme)) &&
           scheme.isZero();
  };
  StringRef name = call.getCallee();
  if (name.starts_with("dsrt_cuda_allreduce_start_"))
    return uncompressedStart(call);
  if (name.starts_with("dsrt_cuda_allreduce_wait_"))
    return call.getNumOperands() > 0 &&
           uncompressedStart(call.getOperand(0).getDefiningOp());
  return name.starts_with("dsrt_cuda_allreduce_f") ||
         name.starts_with("dsrt_cuda_broadcast_");
}

/// `staged` as NCCL runs it: a start copies the bucket into the runtime's
/// buffer and a wait copies the mean out, on the device, unless the start
/// runs in place (its wait's output is its bucket); the blocking calls
/// move nothing but over the network, which is not counted.
Row ncclRow(func::CallOp call, const Row &staged) {
  Row row = staged;
  row.kind = Row::Nccl;
  row.read = row.written = 0;
  StringRef name = call.getCallee();
  if (startsInPlace(call) ||
      (name.starts_with("dsrt_cuda_allreduce_wait_") &&
       startsInPlace(call.getOperand(0).getDefiningOp())))
    return row;
  bool start = name.starts_with("dsrt_cuda_allreduce_start_");
  if (start || name.starts_with("dsrt_cuda_allreduce_wait_")) {
    Value buffer = castSource(call.getOperand(start ? 0 : 1));
    std::optional<int64_t> bytes = staticBytes(buffer.getType());
    row.complete = bytes.has_value();
    row.read = row.written = bytes.value_or(0);
  }
  return row;
}

struct GPULaunchReportPass
    : public mlir::ds::impl::GPULaunchReportPassBase<GPULaunchReportPass> {
  using Base::Base;

  void runOnOperation() override {
    std::unique_ptr<llvm::ToolOutputFile> file;
    llvm::raw_ostream *os = &llvm::errs();
    if (output != "-") {
      std::string error;
      file = openOutputFile(output, &error);
      if (!file) {
        // At the module's location, without the module printed after it.
        emitError(getOperation().getLoc(), "ds-gpu-launch-report: cannot "
                                           "write '")
            << output << "': " << error;
        return signalPassFailure();
      }
      os = &file->os();
    }
    if (bandwidth <= 0 || f32Tflops <= 0 || bf16Tflops <= 0 || fp8Tflops <= 0 ||
        hostBandwidth <= 0) {
      emitError(getOperation().getLoc(),
                "ds-gpu-launch-report: the bandwidth and peaks must be "
                "positive");
      return signalPassFailure();
    }
    if (collectives != "nccl" && collectives != "host") {
      emitError(getOperation().getLoc(), "ds-gpu-launch-report: collectives='")
          << collectives << "' (expected nccl or host)";
      return signalPassFailure();
    }
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (!f.isExternal())
        report(f, *os);
    if (file)
      file->keep();
  }

  void report(func::FuncOp f, llvm::raw_ostream &os) {
    SmallVector<Row> rows;
    f.walk([&](Operation *op) {
      // What the walk adds for `op` below, under host control flow or not.
      size_t first = rows.size();
      auto mark = llvm::make_scope_exit([&] {
        bool conditional = op->getParentOfType<scf::ForOp>() ||
                           op->getParentOfType<scf::IfOp>();
        for (size_t i = first; i < rows.size(); ++i)
          rows[i].conditional = conditional;
      });
      if (auto launch = dyn_cast<gpu::LaunchOp>(op)) {
        rows.push_back(launchRow(launch));
        return WalkResult::skip();
      }
      if (auto call = dyn_cast<func::CallOp>(op)) {
        if (std::optional<Row> r = gemmRow(call)) {
          // The tensor cores' peak for the operands' width.
          Type e = getElementTypeOrSelf(castSource(call.getOperand(0)));
          unsigned bits = e.isIntOrFloat() ? e.getIntOrFloatBitWidth() : 32;
          r->peakTflops = bits <= 8    ? fp8Tflops
                          : bits <= 16 ? bf16Tflops
                                       : f32Tflops;
          rows.push_back(*r);
        } else if (std::optional<Row> r = stagedRow(call)) {
          rows.push_back(collectives == "nccl" && servedByNccl(call)
                             ? ncclRow(call, *r)
                             : *r);
          if (std::optional<Row> parked = topKParkingRow(call))
            rows.push_back(*parked);
        }
      }
      if (auto copy = dyn_cast<gpu::MemcpyOp>(op)) {
        Row r{Row::Copy, "", 0, 0, 0, 0, true, false, copy.getLoc(), ""};
        std::optional<int64_t> src = staticBytes(copy.getSrc().getType());
        std::optional<int64_t> dst = staticBytes(copy.getDst().getType());
        r.complete = src && dst;
        r.read = src.value_or(0);
        r.written = dst.value_or(0);
        rows.push_back(r);
      }
      return WalkResult::advance();
    });
    if (rows.empty())
      return;

    const double bytesPerUs = bandwidth * 1e3; // GB/s -> bytes per us
    auto boundUs = [&](const Row &r) {
      if (r.kind == Row::Staged)
        return (r.read + r.written) / (hostBandwidth * 1e3);
      double memory = (r.read + r.written) / bytesPerUs;
      double compute = r.flops > 0 ? r.flops / (r.peakTflops * 1e6) : 0.0;
      return std::max(memory, compute);
    };
    int counts[5] = {0, 0, 0, 0, 0};
    double bytes[5] = {0, 0, 0, 0, 0}, bound[5] = {0, 0, 0, 0, 0}, flops = 0;
    bool complete = true;
    for (const Row &r : rows) {
      counts[r.kind] += 1;
      if (r.conditional) {
        complete = false;
        continue;
      }
      bytes[r.kind] += r.read + r.written;
      bound[r.kind] += boundUs(r);
      flops += r.flops;
      complete &= r.complete;
    }

    os << "ds-gpu-launch-report: @" << f.getSymName() << ": " << counts[0]
       << " kernel launches, " << counts[1] << " library GEMMs, " << counts[2]
       << " copies";
    if (counts[Row::Staged])
      os << ", " << counts[Row::Staged] << " collectives staged on the host";
    if (counts[Row::Nccl])
      os << ", " << counts[Row::Nccl] << " on NCCL";
    os << "\n";
    os << llvm::format("%5s  %-6s  %-30s  %10s  %10s  %9s  %9s  %s\n", "#",
                       "kind", "grid x block / b x MxNxK", "read MB",
                       "written MB", "GFLOP", "bound us", "location [kernel]");
    const char *kinds[] = {"kernel", "gemm", "copy", "staged", "nccl"};
    for (auto [i, r] : llvm::enumerate(rows)) {
      std::string gflop =
          r.flops > 0 ? llvm::formatv("{0:f2}", r.flops / 1e9).str() : "-";
      os << llvm::format(
          "%5zu  %-6s  %-30s  %10.3f  %10.3f  %9s  %9.2f  %s%s%s\n", i + 1,
          kinds[r.kind], r.shape.c_str(), r.read / 1e6, r.written / 1e6,
          gflop.c_str(), boundUs(r), where(r.loc).c_str(),
          r.kernel.empty() ? "" : ("  " + r.kernel).c_str(),
          r.conditional ? " (as the runtime decides: not counted)"
          : r.complete  ? ""
                        : " (a dynamic size: not counted)");
    }
    os << llvm::format("  kernels: %d, %.1f MB moved: %.1f us at %g GB/s\n",
                       counts[0], bytes[0] / 1e6, bound[0],
                       bandwidth.getValue());
    os << llvm::format("  GEMMs: %d, %.1f GFLOP, %.1f MB moved: %.1f us at "
                       "%g / %g / %g TFLOP/s (FP8 / 16-bit / 32-bit)\n",
                       counts[1], flops / 1e9, bytes[1] / 1e6, bound[1],
                       fp8Tflops.getValue(), bf16Tflops.getValue(),
                       f32Tflops.getValue());
    os << llvm::format("  copies: %d, %.1f MB moved: %.1f us\n", counts[2],
                       bytes[2] / 1e6, bound[2]);
    if (counts[Row::Staged])
      os << llvm::format("  collectives: %d, %.1f MB to and from the host: "
                         "%.1f us at %g GB/s (the network not counted)\n",
                         counts[3], bytes[3] / 1e6, bound[3],
                         hostBandwidth.getValue());
    if (counts[Row::Nccl])
      os << llvm::format("  NCCL: %d, %.1f MB copied on the device: %.1f us "
                         "(the network not counted)\n",
                         counts[4], bytes[4] / 1e6, bound[4]);
    os << llvm::format("  bound: %.1f us per call, without launch gaps%s\n",
                       bound[0] + bound[1] + bound[2] + bound[3] + bound[4],
                       complete ? "" : " (some sizes dynamic: not counted)");
  }
};

} // namespace
