//===- QuantizedExport.cpp - The int8 model ds-run exports ----------------===//
//
// Implements QuantizedExport.h: reads the quantized values off the integer
// inference steps before they are lowered, and writes the export directory
// from the runner's tensors after training.
//
//===----------------------------------------------------------------------===//

#include "ds/Runner/QuantizedExport.h"

#include "ds/Dialect/DS/IR/DSOps.h"
#include "ds/Dialect/DS/IR/TrainingContract.h"
#include "ds/Runner/Checkpoint.h"
#include "ds/Runner/Report.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cmath>

using namespace ::ds::runner;
using mlir::BlockArgument;
using mlir::DenseElementsAttr;
using mlir::FunctionOpInterface;
using mlir::Operation;
using mlir::Value;
namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

std::vector<QuantizedValue>
ds::runner::describeQuantized(FunctionOpInterface integer,
                              FunctionOpInterface weights) {
  std::vector<QuantizedValue> out;
  auto scalar = [](Value v) -> std::optional<double> {
    DenseElementsAttr attr;
    if (!mlir::matchPattern(v, mlir::m_Constant(&attr)) || !attr.isSplat() ||
        !mlir::isa<mlir::FloatType>(attr.getElementType()))
      return std::nullopt;
    return attr.getSplatValue<llvm::APFloat>().convertToDouble();
  };
  // A ds.quantize whose scale and zero point are state (a zero point may be
  // shifted by a constant: an unsigned 8-bit grid stored in i8) and whose
  // grid is constant, described into `v`; false otherwise.
  auto read = [&](mlir::ds::QuantizeOp q, const mlir::ds::TrainingContract &c,
                  QuantizedValue &v) {
    double shift = 0;
    Value zp = q.getZeroPoint();
    if (auto sub = zp.getDefiningOp<mlir::ds::SubOp>())
      if (std::optional<double> k = scalar(sub.getRhs())) {
        shift = *k;
        zp = sub.getLhs();
      }
    auto scaleArg = mlir::dyn_cast<BlockArgument>(q.getScale());
    auto zpArg = mlir::dyn_cast<BlockArgument>(zp);
    std::optional<double> lo = scalar(q.getQmin()), hi = scalar(q.getQmax());
    if (!scaleArg || !zpArg || !lo || !hi)
      return false;
    const mlir::ds::ContractArg &s = c.args[scaleArg.getArgNumber()];
    if (!s.state)
      return false;
    v.layer = s.state.getOf().str();
    v.scaleKey = s.name;
    v.zeroPointKey = c.args[zpArg.getArgNumber()].name;
    v.qmin = int64_t(*lo + shift);
    v.qmax = int64_t(*hi + shift);
    v.axis = q.getAxis();
    return true;
  };
  mlir::FailureOr<mlir::ds::TrainingContract> ic =
      mlir::ds::TrainingContract::fromFunction(integer);
  if (mlir::failed(ic))
    return out;
  // Weights: the preparation step's ds.quantize, each the update of an
  // int8 state of the inference step.
  llvm::StringMap<size_t> byInt8Key;
  if (weights) {
    mlir::FailureOr<mlir::ds::TrainingContract> wc =
        mlir::ds::TrainingContract::fromFunction(weights);
    if (mlir::failed(wc))
      return out;
    Operation *ret = weights.getFunctionBody().front().getTerminator();
    for (auto [i, res] : llvm::enumerate(wc->results)) {
      auto q = ret->getOperand(i).getDefiningOp<mlir::ds::QuantizeOp>();
      QuantizedValue v;
      if (res.role != mlir::ds::ResultRole::Update || !q || !read(q, *wc, v))
        continue;
      v.weight = true;
      v.int8Key = wc->args[res.argIndex].name;
      byInt8Key[v.int8Key] = out.size();
      out.push_back(std::move(v));
    }
  }
  // Per layer (each ds.quantized_matmul): how its weight is stored, and the
  // quantizer of the activation it reads (one quantizer may serve several
  // layers, the Q, K and V projections: each layer gets it).
  llvm::StringSet<> inputsDone;
  integer.walk([&](mlir::ds::QuantizedMatMulOp mm) {
    std::string layer;
    if (auto arg = mlir::dyn_cast<BlockArgument>(mm.getRhs())) {
      auto it = byInt8Key.find(ic->args[arg.getArgNumber()].name);
      if (it == byInt8Key.end())
        return;
      QuantizedValue &w = out[it->second];
      w.transposed = mm.getTransposeRhs();
      layer = w.layer;
    } else if (auto q = mm.getRhs().getDefiningOp<mlir::ds::QuantizeOp>()) {
      // A weight not split off (no preparation step): described here.
      QuantizedValue w;
      if (!read(q, *ic, w))
        return;
      w.weight = true;
      w.transposed = mm.getTransposeRhs();
      layer = w.layer;
      out.push_back(std::move(w));
    }
    auto xq = mm.getLhs().getDefiningOp<mlir::ds::QuantizeOp>();
    QuantizedValue x;
    if (layer.empty() || !xq || !read(xq, *ic, x) ||
        !inputsDone.insert(layer).second)
      return;
    x.layer = layer;
    x.weight = false;
    out.push_back(std::move(x));
  });
  return out;
}

namespace {

/// "fc1" for the weight "fc1.weight": the module torch.ao names.
std::string moduleOf(llvm::StringRef weight) {
  weight.consume_back(".weight");
  return weight.str();
}

/// The parameters of one grid as torch.ao names them: dtype and qscheme.
std::pair<const char *, const char *> torchNames(const QuantizedValue &v,
                                                 bool symmetric) {
  const char *dtype = v.qmin >= 0 ? "quint8" : "qint8";
  const char *scheme =
      v.axis ? (symmetric ? "per_channel_symmetric" : "per_channel_affine")
             : (symmetric ? "per_tensor_symmetric" : "per_tensor_affine");
  return {dtype, scheme};
}

/// Writes `t` to dir/name, failing with the file's name.
llvm::Error writeFile(llvm::StringRef dir, llvm::StringRef name,
                      const HostTensor &t) {
  llvm::SmallString<256> p(dir);
  path::append(p, name);
  return writeNpyAtomic(p, t);
}

/// Fills `tmp` with the export.
llvm::Error
populate(llvm::StringRef tmp, const std::vector<QuantizedValue> &values,
         llvm::function_ref<const HostTensor *(llvm::StringRef key)> lookup,
         llvm::ArrayRef<std::pair<std::string, const HostTensor *>> params,
         llvm::ArrayRef<std::pair<std::string, const HostTensor *>> buffers,
         llvm::ArrayRef<std::string> left, llvm::json::Object info) {
  auto missing = [](llvm::StringRef key) {
    return llvm::createStringError("no tensor for '" + key + "'");
  };
  llvm::json::Object layers;
  llvm::StringSet<> quantizedWeights;
  int64_t int8Bytes = 0, replacedBytes = 0, scaleBytes = 0;
  for (const QuantizedValue &v : values) {
    const HostTensor *scale = lookup(v.scaleKey);
    const HostTensor *zp = lookup(v.zeroPointKey);
    if (!scale)
      return missing(v.scaleKey);
    if (!zp)
      return missing(v.zeroPointKey);
    // Zero points are integral (f32 state); torch.ao keeps them as int64.
    HostTensor zpInt(DType::I64, zp->shape);
    bool symmetric = true;
    for (int64_t i = 0; i < zp->numElements(); ++i) {
      int64_t z = int64_t(std::llround(zp->getDouble(i)));
      zpInt.setInt(i, z);
      symmetric &= z == 0;
    }
    std::string mod = moduleOf(v.layer);
    llvm::json::Object &layer = *layers.try_emplace(mod, llvm::json::Object{})
                                     .first->second.getAsObject();
    auto [dtype, scheme] = torchNames(v, symmetric);
    std::string prefix = v.weight ? "weight" : "input";
    layer[prefix + "_dtype"] = dtype;
    layer[prefix + "_qscheme"] = scheme;
    layer[prefix + "_quant_min"] = v.qmin;
    layer[prefix + "_quant_max"] = v.qmax;
    if (v.axis)
      layer[prefix + "_axis"] = *v.axis;
    if (!v.weight) {
      // Per tensor: the numbers themselves.
      layer["input_scale"] = scale->getDouble(0);
      layer["input_zero_point"] = zpInt.getInt(0);
      continue;
    }
    if (v.int8Key.empty())
      return llvm::createStringError(
          "the weight of '" + v.layer +
          "' was not prepared as int8 state (ds-convert-fake-quant's "
          "prepare-weights)");
    const HostTensor *q = lookup(v.int8Key);
    if (!q)
      return missing(v.int8Key);
    // The indices as the grid has them: an unsigned grid was stored
    // shifted by -128 in i8.
    HostTensor indices = *q;
    if (v.qmin >= 0) {
      indices = HostTensor(DType::U8, q->shape);
      for (int64_t i = 0; i < q->numElements(); ++i)
        indices.setInt(i, q->getInt(i) + (v.qmax > 127 ? 128 : 0));
    }
    // torch.ao's layers keep weights [out, in]; a layer that multiplies by
    // a [in, out] weight has it transposed, its channel axis with it.
    if (!v.transposed && indices.shape.size() == 2) {
      HostTensor t(indices.dtype, {indices.shape[1], indices.shape[0]});
      for (int64_t i = 0; i < indices.shape[0]; ++i)
        for (int64_t j = 0; j < indices.shape[1]; ++j)
          t.setInt(j * indices.shape[0] + i,
                   indices.getInt(i * indices.shape[1] + j));
      indices = std::move(t);
      if (v.axis)
        layer["weight_axis"] = 1 - *v.axis;
    }
    std::string files[3] = {v.layer + ".int8.npy", mod + ".weight_scale.npy",
                            mod + ".weight_zero_point.npy"};
    if (llvm::Error e = writeFile(tmp, files[0], indices))
      return e;
    if (llvm::Error e = writeFile(tmp, files[1], *scale))
      return e;
    if (llvm::Error e = writeFile(tmp, files[2], zpInt))
      return e;
    layer["weight"] = files[0];
    layer["weight_scale"] = files[1];
    layer["weight_zero_point"] = files[2];
    quantizedWeights.insert(v.layer);
    int8Bytes += int64_t(indices.sizeInBytes());
    replacedBytes += indices.numElements() * 4;
    scaleBytes += int64_t(scale->sizeInBytes() + zpInt.sizeInBytes());
  }
  llvm::json::Object others, bufferFiles;
  for (const auto &[name, t] : params) {
    if (quantizedWeights.contains(name))
      continue;
    std::string file = name + ".npy";
    if (llvm::Error e = writeFile(tmp, file, *t))
      return e;
    others[name] = file;
  }
  for (const auto &[name, t] : buffers) {
    std::string file = name + ".npy";
    if (llvm::Error e = writeFile(tmp, file, *t))
      return e;
    bufferFiles[name] = file;
  }
  llvm::json::Array leftArray;
  for (const std::string &l : left)
    leftArray.push_back(l);
  info["format"] = "ds-mlir quantized model";
  info["version"] = 1;
  info["layers"] = std::move(layers);
  info["parameters"] = std::move(others);
  info["buffers"] = std::move(bufferFiles);
  info["left_in_f32"] = std::move(leftArray);
  info["bytes"] = llvm::json::Object{{"int8_weights", int8Bytes},
                                     {"as_f32", replacedBytes},
                                     {"scales_and_zero_points", scaleBytes}};
  llvm::SmallString<256> index(tmp);
  path::append(index, kQuantizedIndexFile);
  return writeJsonAtomic(index, llvm::json::Value(std::move(info)));
}

} // namespace

llvm::Error ds::runner::writeQuantizedExport(
    llvm::StringRef dir, const std::vector<QuantizedValue> &values,
    llvm::function_ref<const HostTensor *(llvm::StringRef key)> lookup,
    llvm::ArrayRef<std::pair<std::string, const HostTensor *>> params,
    llvm::ArrayRef<std::pair<std::string, const HostTensor *>> buffers,
    llvm::ArrayRef<std::string> left, llvm::json::Object info) {
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError("--export-quantized " + dir + ": " + what);
  };
  bool exists = false;
  llvm::Expected<std::string> resolved =
      resolveReplaceableDir(dir, kQuantizedIndexFile, "an export", exists);
  if (!resolved)
    return fail(llvm::toString(resolved.takeError()));
  llvm::SmallString<256> target(*resolved);
  llvm::StringRef parent = path::parent_path(target);
  if (std::error_code ec = fs::create_directories(parent))
    return fail(ec.message());
  std::string name = path::filename(target).str();
  removeStaleTemporaries(parent, name);
  llvm::SmallString<256> tmp;
  if (std::error_code ec =
          fs::createUniqueDirectory(parent + "/." + name + ".tmp", tmp))
    return fail(ec.message());
  if (llvm::Error e = populate(tmp, values, lookup, params, buffers, left,
                               std::move(info))) {
    fs::remove_directories(tmp);
    return fail(llvm::toString(std::move(e)));
  }
  if (llvm::Error e = installDirectory(tmp, target, exists))
    return fail(llvm::toString(std::move(e)));
  return llvm::Error::success();
}
