//===- PrecisionPolicy.cpp - Precision policies for ds-assign-precision ---===//
//
// Parses policy files with LLVM's YAML parser, which keeps the position of
// every node: each error (syntax, unknown key, role or type, FP8 for a
// reduction) becomes an MLIR diagnostic at file:line:col.
//
//===----------------------------------------------------------------------===//

#include "ds/Transforms/PrecisionPolicy.h"
#include "ds/Analysis/RoleAnalysis.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

using namespace mlir;
using namespace mlir::ds;
namespace yaml = llvm::yaml;

StringRef mlir::ds::stringifyFP8Scaling(FP8Scaling s) {
  switch (s) {
  case FP8Scaling::Delayed:
    return "delayed";
  case FP8Scaling::Current:
    return "current";
  case FP8Scaling::Block:
    return "block";
  }
  return "";
}

bool mlir::ds::isFP8(Type t) {
  return isa<Float8E4M3FNType, Float8E5M2Type>(t);
}

double mlir::ds::largestFinite(Type t) {
  auto f = cast<FloatType>(t);
  return llvm::APFloat::getLargest(f.getFloatSemantics()).convertToDouble();
}

/// Ops whose precision matters for accuracy more than for speed: they
/// accumulate over many elements or exponentiate, and stay >= BF16.
static bool isReductionLike(StringRef opName) {
  return llvm::is_contained({"ds.reduce_sum", "ds.reduce_mean", "ds.reduce_max",
                             "ds.softmax", "ds.log_softmax", "ds.layer_norm",
                             "ds.rms_norm", "ds.batch_norm", "ds.cross_entropy",
                             "ds.mse_loss", "ds.exp", "ds.log"},
                            opName);
}
static bool isReductionLikeRole(StringRef r) {
  return r == role::kReduction || r == role::kNorm || r == role::kSoftmax ||
         r == role::kLoss;
}

namespace {

/// Walks the YAML tree, reporting errors at node positions.
class Parser {
public:
  Parser(llvm::SourceMgr &sm, StringRef name, MLIRContext *ctx)
      : sm(sm), name(name), ctx(ctx) {}

  LocationAttr locOf(yaml::Node *n) { return locOf(n->getSourceRange().Start); }
  LocationAttr locOf(llvm::SMLoc at) {
    auto [line, col] = sm.getLineAndColumn(at);
    return FileLineColLoc::get(ctx, name, line, col);
  }
  LogicalResult fail(yaml::Node *n, const Twine &msg) {
    emitError(Location(locOf(n))) << msg.str();
    return failure();
  }

  FailureOr<std::string> scalar(yaml::Node *n, StringRef what) {
    auto onError = [this](yaml::Node *at, const Twine &m) {
      return fail(at, m);
    };
    return readPolicyScalar(n, what, onError);
  }
  FailureOr<SmallVector<std::string>> scalarOrList(yaml::Node *n,
                                                   StringRef what) {
    auto onError = [this](yaml::Node *at, const Twine &m) {
      return fail(at, m);
    };
    return readPolicyScalarOrList(n, what, onError);
  }
  FailureOr<double> number(yaml::Node *n, StringRef what) {
    FailureOr<std::string> s = scalar(n, what);
    if (failed(s))
      return failure();
    double v;
    if (StringRef(*s).getAsDouble(v)) {
      (void)fail(n, what + " must be a number, got '" + *s + "'");
      return failure();
    }
    return v;
  }
  FailureOr<Type> type(yaml::Node *n, StringRef what) {
    FailureOr<std::string> s = scalar(n, what);
    if (failed(s))
      return failure();
    Builder b(ctx);
    Type t = llvm::StringSwitch<Type>(*s)
                 .Cases({"f32", "fp32", "float32"}, b.getF32Type())
                 .Cases({"bf16", "bfloat16"}, b.getBF16Type())
                 .Cases({"f16", "fp16", "float16"}, b.getF16Type())
                 .Cases({"f8E4M3FN", "e4m3", "fp8_e4m3", "float8_e4m3fn"},
                        Float8E4M3FNType::get(ctx))
                 .Cases({"f8E5M2", "e5m2", "fp8_e5m2", "float8_e5m2"},
                        Float8E5M2Type::get(ctx))
                 .Default(Type());
    if (!t) {
      (void)fail(n, "unknown type '" + *s + "' for " + what +
                        "; expected f32, bf16, f16, f8E4M3FN or f8E5M2");
      return failure();
    }
    return t;
  }

  /// A rule: its match keys (RuleMatcher.h) into `match`, what it assigns
  /// into `rule`.
  LogicalResult parseRule(yaml::Node *n, unsigned index, PrecisionRule &rule,
                          RuleMatch &match);
  LogicalResult parseFP8(yaml::Node *n, FP8Settings &fp8);
  LogicalResult parseChannel(yaml::Node *n, ChannelSettings &c);
  LogicalResult parseSchedule(yaml::Node *n, ScheduleSettings &s);
  LogicalResult parseSparsityRule(yaml::Node *n, unsigned index,
                                  SparsityRule &rule, RuleMatch &match);
  LogicalResult parseQuantRule(yaml::Node *n, unsigned index, QuantRule &rule,
                               RuleMatch &match);
  LogicalResult parseRoot(yaml::Node *n, PrecisionPolicy &policy);

private:
  llvm::SourceMgr &sm;
  StringRef name;
  MLIRContext *ctx;
};

template <typename Fn>
LogicalResult forEachKey(Parser &p, yaml::Node *n, StringRef what, Fn fn) {
  auto *map = dyn_cast_or_null<yaml::MappingNode>(n);
  if (!map)
    return p.fail(n, what + " must be a mapping");
  for (yaml::KeyValueNode &kv : *map) {
    FailureOr<std::string> key = p.scalar(kv.getKey(), "a key");
    if (failed(key))
      return failure();
    if (!kv.getValue())
      return p.fail(kv.getKey(), "key '" + *key + "' has no value");
    if (failed(fn(*key, kv.getKey(), kv.getValue())))
      return failure();
  }
  return success();
}

LogicalResult Parser::parseRule(yaml::Node *n, unsigned index,
                                PrecisionRule &rule, RuleMatch &match) {
  rule.loc = locOf(n);
  auto failAt = [&](yaml::Node *at, const Twine &msg) { return fail(at, msg); };
  LogicalResult r = forEachKey(
      *this, n, "a rule", [&](StringRef key, yaml::Node *k, yaml::Node *v) {
        if (RuleMatch::isMatchKey(key))
          return match.parseKey(key, v, ctx, failAt);
        if (key == "compute" || key == "storage" || key == "grad" ||
            key == "grad-storage") {
          auto t = type(v, key);
          if (failed(t))
            return failure();
          if (key == "grad-storage" && isFP8(*t))
            return fail(v, "grad-storage must be bf16, f16 or f32: an FP8 "
                           "gradient needs a scale (give the cotangent "
                           "operand FP8 with 'grad')");
          (key == "compute"   ? rule.compute
           : key == "storage" ? rule.storage
           : key == "grad"    ? rule.grad
                              : rule.gradStorage) = *t;
          return success();
        }
        if (key == "scaling") {
          auto s = scalar(v, "scaling");
          if (failed(s))
            return failure();
          if (*s == "delayed")
            rule.scaling = FP8Scaling::Delayed;
          else if (*s == "current")
            rule.scaling = FP8Scaling::Current;
          else if (*s == "block")
            rule.scaling = FP8Scaling::Block;
          else
            return fail(v, "unknown scaling '" + *s +
                               "'; expected delayed, current or block");
          return success();
        }
        return fail(k, "unknown rule key '" + key +
                           "'; expected op, role, param, module, compute, "
                           "storage, grad, grad-storage or scaling");
      });
  if (failed(r))
    return failure();
  if (match.empty())
    return fail(n, "rule #" + Twine(index) +
                       " matches nothing: give op, role, param or module");
  if (!rule.compute && !rule.storage && !rule.grad && !rule.gradStorage)
    return fail(n, "rule #" + Twine(index) +
                       " assigns nothing: give compute, storage, grad or "
                       "grad-storage");
  // Reductions, norms, softmax and losses never go to FP8.
  bool fp8 = (rule.compute && isFP8(rule.compute)) ||
             (rule.storage && isFP8(rule.storage));
  if (fp8) {
    for (const std::string &op : match.ops)
      if (isReductionLike(op))
        return fail(n, "rule #" + Twine(index) + " maps a reduction ('" + op +
                           "') to FP8; reductions, norms, softmax, exp/log "
                           "and losses stay in at least BF16");
    for (const std::string &r : match.roles)
      if (isReductionLikeRole(r))
        return fail(n, "rule #" + Twine(index) + " maps a reduction (role '" +
                           r +
                           "') to FP8; reductions, norms, softmax and losses "
                           "stay in at least BF16");
  }
  rule.label = "rule #" + std::to_string(index) + " (" + match.describe() + ")";
  return success();
}

LogicalResult Parser::parseQuantRule(yaml::Node *n, unsigned index,
                                     QuantRule &rule, RuleMatch &match) {
  rule.loc = locOf(n);
  auto failAt = [&](yaml::Node *at, const Twine &msg) { return fail(at, msg); };
  yaml::Node *groupNode = nullptr;
  LogicalResult r = forEachKey(
      *this, n, "a quant rule",
      [&](StringRef key, yaml::Node *k, yaml::Node *v) -> LogicalResult {
        if (RuleMatch::isMatchKey(key))
          return match.parseKey(key, v, ctx, failAt);
        FailureOr<std::string> s = scalar(v, key);
        if (failed(s))
          return failure();
        if (key == "weight" || key == "activation") {
          // int<N> (signed, symmetric) for weights, uint<N> (unsigned,
          // affine) for activations, 2 <= N <= 16; qint8 / quint8 as torch
          // spells them; none.
          StringRef text = *s, prefix = key == "weight" ? "int" : "uint";
          int64_t bits = 0;
          if (text == "none")
            bits = 0;
          else if (text == (key == "weight" ? "qint8" : "quint8"))
            bits = 8;
          else if (!text.consume_front(prefix) || text.getAsInteger(10, bits) ||
                   bits < 2 || bits > 16)
            return fail(v, "unknown " + key + " scheme '" + *s +
                               "'; expected " + prefix +
                               "<bits> (2..16, e.g. " + prefix + "8) or none");
          (key == "weight" ? rule.weightBits : rule.activationBits) = bits;
          return success();
        }
        if (key == "group") {
          groupNode = v;
          if (*s == "channel") {
            rule.groupSize = -1; // explicitly per channel
            return success();
          }
          int64_t g;
          if (StringRef(*s).getAsInteger(10, g) || g <= 0)
            return fail(v, "group must be a positive integer (torchao: 32, "
                           "128 or 256) or 'channel', got '" +
                               *s + "'");
          rule.groupSize = g;
          return success();
        }
        if (key == "output") {
          if (*s != "fp8" && *s != "none")
            return fail(v, "unknown output scheme '" + *s +
                               "'; expected fp8 (E4M3 with this step's "
                               "scale) or none");
          rule.outputFP8 = *s == "fp8";
          return success();
        }
        if (key == "keep") {
          FailureOr<Type> t = type(v, "keep");
          if (failed(t))
            return failure();
          if (isFP8(*t))
            return fail(v, "keep is for the layers not quantized: bf16, f16 "
                           "or f32, got '" +
                               *s + "'");
          rule.keep = *t;
          return success();
        }
        return fail(k, "unknown quant rule key '" + key +
                           "'; expected op, role, param, module, weight, "
                           "group, activation, output or keep");
      });
  if (failed(r))
    return failure();
  std::string name = "quant rule #" + std::to_string(index);
  if (match.empty())
    return fail(n, name + " matches nothing: give op, role, param or module");
  if (rule.keep && (rule.weightBits || rule.activationBits || rule.outputFP8))
    return fail(n, name + " keeps its layers unquantized and quantizes "
                          "them too; give keep or the schemes");
  if (!rule.keep && !rule.weightBits && !rule.activationBits && !rule.outputFP8)
    return fail(n, name + " assigns nothing: give weight, activation, "
                          "output or keep");
  if (groupNode && !rule.weightBits)
    return fail(groupNode, "group is for quantized weights; this rule does "
                           "not quantize them");
  // torchao's int4 weights are per group of 256; other widths per channel
  // unless a group is given.
  if (rule.weightBits == 4 && !rule.groupSize)
    rule.groupSize = 256;
  if (rule.groupSize < 0)
    rule.groupSize = 0;
  // A loss or a reduction has nothing a grid could stand for.
  for (const std::string &op : match.ops)
    if (isReductionLike(op) && op != "ds.batch_norm")
      return fail(n, name + " quantizes '" + op +
                         "'; losses, reductions, softmax and norms are not "
                         "quantized (batch norm's output may be, with "
                         "'output: fp8')");
  for (const std::string &role : match.roles)
    if (isReductionLikeRole(role) && role != "norm")
      return fail(n, name + " quantizes role '" + role +
                         "'; losses, reductions and softmax are not "
                         "quantized");
  rule.label =
      ("quant rule #" + Twine(index) + " (" + match.describe() + ")").str();
  return success();
}

LogicalResult Parser::parseSparsityRule(yaml::Node *n, unsigned index,
                                        SparsityRule &rule, RuleMatch &match) {
  rule.loc = locOf(n);
  auto failAt = [&](yaml::Node *at, const Twine &msg) { return fail(at, msg); };
  bool given = false;
  LogicalResult r = forEachKey(
      *this, n, "a sparsity rule",
      [&](StringRef key, yaml::Node *k, yaml::Node *v) -> LogicalResult {
        if (RuleMatch::isMatchKey(key))
          return match.parseKey(key, v, ctx, failAt);
        if (key != "sparse")
          return fail(k, "unknown sparsity rule key '" + key +
                             "'; expected op, role, param, module or sparse");
        FailureOr<std::string> s = scalar(v, key);
        if (failed(s))
          return failure();
        if (*s != "true" && *s != "false")
          return fail(v, "sparse must be true or false, got '" + *s + "'");
        rule.sparse = *s == "true";
        given = true;
        return success();
      });
  if (failed(r))
    return failure();
  std::string name = "sparsity rule #" + std::to_string(index);
  if (match.empty())
    return fail(n, name + " matches nothing: give op, role, param or module");
  if (!given)
    return fail(n, name + " says nothing: give 'sparse: true' or 'false'");
  for (const std::string &op : match.ops)
    if (op != "ds.matmul")
      return fail(n, name + " matches '" + op +
                         "'; only linear layers (ds.matmul) are made "
                         "block-sparse");
  rule.label = name + " (" + match.describe() + ")";
  return success();
}

LogicalResult Parser::parseFP8(yaml::Node *n, FP8Settings &fp8) {
  return forEachKey(
      *this, n, "fp8",
      [&](StringRef key, yaml::Node *k, yaml::Node *v) -> LogicalResult {
        auto x = number(v, key);
        if (failed(x))
          return failure();
        int64_t i = static_cast<int64_t>(*x);
        if (key == "amax-history-len") {
          if (i < 1)
            return fail(v, "amax-history-len must be at least 1");
          fp8.amaxHistoryLen = i;
        } else if (key == "margin") {
          fp8.margin = i;
        } else if (key == "activation-block" || key == "weight-block") {
          if (i < 1)
            return fail(v, key + " must be at least 1");
          (key == "activation-block" ? fp8.activationBlock : fp8.weightBlock) =
              i;
        } else {
          return fail(k, "unknown fp8 key '" + key +
                             "'; expected amax-history-len, margin, "
                             "activation-block or weight-block");
        }
        return success();
      });
}

LogicalResult Parser::parseChannel(yaml::Node *n, ChannelSettings &c) {
  c.enabled = true;
  c.loc = locOf(n);
  c.high = Builder(ctx).getF32Type();
  LogicalResult r = forEachKey(
      *this, n, "channel",
      [&](StringRef key, yaml::Node *k, yaml::Node *v) -> LogicalResult {
        if (key == "role") {
          auto roles = scalarOrList(v, "role");
          if (failed(roles))
            return failure();
          for (const std::string &x : *roles)
            if (!llvm::is_contained(allRoles(), StringRef(x)))
              return fail(v, "unknown role '" + x + "'");
          c.roles = std::move(*roles);
        } else if (key == "threshold" || key == "momentum") {
          auto x = number(v, key);
          if (failed(x))
            return failure();
          if (key == "momentum" && !(*x >= 0 && *x < 1))
            return fail(v, "momentum must be in [0, 1)");
          if (key == "threshold" && !(*x >= 0))
            return fail(v, "threshold must be non-negative");
          (key == "threshold" ? c.threshold : c.momentum) = *x;
        } else if (key == "high") {
          auto t = type(v, "high");
          if (failed(t))
            return failure();
          c.high = *t;
        } else {
          return fail(k, "unknown channel key '" + key +
                             "'; expected role, threshold, momentum or high");
        }
        return success();
      });
  if (succeeded(r) && c.roles.empty())
    return fail(n, "channel needs 'role' (the layers it applies to)");
  return r;
}

LogicalResult Parser::parseSchedule(yaml::Node *n, ScheduleSettings &s) {
  s.enabled = true;
  s.loc = locOf(n);
  LogicalResult r = forEachKey(
      *this, n, "schedule",
      [&](StringRef key, yaml::Node *k, yaml::Node *v) -> LogicalResult {
        if (key != "warmup" && key != "finetune")
          return fail(k, "unknown schedule key '" + key +
                             "'; expected warmup or finetune");
        auto x = number(v, key);
        if (failed(x))
          return failure();
        if (!(*x >= 0 && *x < 1))
          return fail(v, key + " must be a fraction of the steps in [0, 1)");
        (key == "warmup" ? s.warmup : s.finetune) = *x;
        return success();
      });
  if (succeeded(r) && s.warmup + s.finetune >= 1)
    return fail(n, "warmup + finetune must leave steps for the policy");
  return r;
}

LogicalResult Parser::parseRoot(yaml::Node *n, PrecisionPolicy &policy) {
  return forEachKey(
      *this, n, "the policy",
      [&](StringRef key, yaml::Node *k, yaml::Node *v) -> LogicalResult {
        if (key == "rules") {
          auto *seq = dyn_cast<yaml::SequenceNode>(v);
          if (!seq)
            return fail(v, "rules must be a list");
          unsigned i = 0;
          for (yaml::Node &item : *seq) {
            PrecisionRule rule;
            RuleMatch match;
            if (failed(parseRule(&item, i++, rule, match)))
              return failure();
            policy.rules.push_back(std::move(rule));
            policy.matcher.append(std::move(match));
          }
          return success();
        }
        if (key == "fp8")
          return parseFP8(v, policy.fp8);
        if (key == "channel")
          return parseChannel(v, policy.channel);
        if (key == "schedule")
          return parseSchedule(v, policy.schedule);
        if (key == "quant") {
          auto *seq = dyn_cast<yaml::SequenceNode>(v);
          if (!seq)
            return fail(v, "quant must be a list of rules");
          policy.quant.enabled = true;
          unsigned i = 0;
          for (yaml::Node &item : *seq) {
            QuantRule rule;
            RuleMatch match;
            if (failed(parseQuantRule(&item, i++, rule, match)))
              return failure();
            policy.quant.rules.push_back(std::move(rule));
            policy.quant.matcher.append(std::move(match));
          }
          return success();
        }
        if (key == "sparsity") {
          auto *seq = dyn_cast<yaml::SequenceNode>(v);
          if (!seq)
            return fail(v, "sparsity must be a list of rules");
          policy.sparsity.enabled = true;
          unsigned i = 0;
          for (yaml::Node &item : *seq) {
            SparsityRule rule;
            RuleMatch match;
            if (failed(parseSparsityRule(&item, i++, rule, match)))
              return failure();
            policy.sparsity.rules.push_back(std::move(rule));
            policy.sparsity.matcher.append(std::move(match));
          }
          return success();
        }
        return fail(k, "unknown policy key '" + key +
                           "'; expected rules, fp8, channel, schedule, "
                           "quant or sparsity");
      });
}

} // namespace

FailureOr<PrecisionPolicy>
PrecisionPolicy::parse(StringRef text, StringRef bufferName, MLIRContext *ctx) {
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, bufferName),
                        llvm::SMLoc());
  // YAML syntax errors come through the source manager: make them located
  // MLIR diagnostics too.
  struct Ctx {
    MLIRContext *ctx;
    StringRef name;
    bool failed = false;
  } diagCtx{ctx, bufferName};
  sm.setDiagHandler(
      [](const llvm::SMDiagnostic &d, void *p) {
        auto *c = static_cast<Ctx *>(p);
        c->failed = true;
        emitError(FileLineColLoc::get(c->ctx, c->name, d.getLineNo(),
                                      d.getColumnNo() + 1))
            << d.getMessage();
      },
      &diagCtx);
  yaml::Stream stream(sm.getMemoryBuffer(1)->getBuffer(), sm);
  PrecisionPolicy policy;
  Parser parser(sm, bufferName, ctx);
  auto doc = stream.begin();
  if (doc == stream.end() || diagCtx.failed)
    return failure();
  yaml::Node *root = doc->getRoot();
  if (diagCtx.failed || !root)
    return failure();
  if (isa<yaml::NullNode>(root)) {
    emitError(FileLineColLoc::get(ctx, bufferName, 1, 1))
        << "the policy is empty";
    return failure();
  }
  if (failed(parser.parseRoot(root, policy)) || diagCtx.failed)
    return failure();
  return policy;
}

FailureOr<PrecisionPolicy> PrecisionPolicy::load(StringRef path,
                                                 Location errLoc) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    emitError(errLoc) << "cannot read policy '" << path
                      << "': " << buffer.getError().message();
    return failure();
  }
  return parse((*buffer)->getBuffer(), path, errLoc->getContext());
}

StringRef PrecisionPolicy::defaultText() {
  return R"(# The seeds' mapping (ds-assign-precision's default policy).
rules:
  # Attention q/k/v projections in FP8: E4M3 forward, E5M2 gradients,
  # per-tensor delayed scaling (Transformer Engine's HYBRID recipe).
  - role: [attn.q, attn.k, attn.v, attn.qkv]
    compute: f8E4M3FN
    grad: f8E5M2
    scaling: delayed
  # FFN intermediate activations in BF16.
  - role: ffn.up
    storage: bf16
  - role: ffn.act
    compute: bf16
    storage: bf16
  - role: ffn.down
    compute: bf16
# Everything else (LayerNorm, softmax, losses, reductions, master weights,
# optimizer state) stays FP32.
fp8:
  amax-history-len: 1024
  margin: 0
)";
}

std::string PrecisionPolicy::defaultQuantText(int64_t weightBits,
                                              int64_t activationBits) {
  std::string weight = "int" + std::to_string(weightBits);
  std::string activation =
      activationBits ? "uint" + std::to_string(activationBits) : "none";
  return R"(# The seeds' QAT tiers (ds-insert-fake-quant's default policy).
quant:
  # Attention projections stay in BF16: not quantized.
  - role: [attn.q, attn.k, attn.v, attn.qkv, attn.out]
    keep: bf16
  # Batch norm in "dynamic FP8": its output fake-quantized to E4M3 with
  # this step's scale.
  - op: ds.batch_norm
    output: fp8
  # Every other linear layer and convolution: torch.ao's x86 QAT qconfig.
  - op: [ds.matmul, ds.conv2d]
    weight: )" +
         weight +
         R"(
    group: channel
    activation: )" +
         activation + "\n";
}

StringRef PrecisionPolicy::defaultSparsityText() {
  return R"(# ds-sparsify-matmul's default policy.
sparsity:
  # The embedding and the head stay dense (RigL's and the seeds' choice).
  - role: [embedding, head]
    sparse: false
  # Every other linear layer gets a block-sparse weight.
  - op: ds.matmul
    sparse: true
)";
}

PrecisionPolicy PrecisionPolicy::getDefault(MLIRContext *ctx) {
  FailureOr<PrecisionPolicy> p = parse(defaultText(), "<default policy>", ctx);
  assert(succeeded(p) && "the default policy parses");
  return std::move(*p);
}

const PrecisionRule *PrecisionPolicy::match(Operation *op, StringRef role,
                                            ArrayRef<StringRef> params) const {
  std::optional<unsigned> i = matcher.match(op, role, params);
  return i ? &rules[*i] : nullptr;
}
