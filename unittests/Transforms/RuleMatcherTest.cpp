//===- RuleMatcherTest.cpp - Which policy rule applies to an op -----------===//
//
// The matcher alone (no precision types): globs over parameter and module
// names, op and role keys, first match wins; and the located errors of
// parsing the keys from a YAML mapping.
//
//===----------------------------------------------------------------------===//

#include "ds/Transforms/RuleMatcher.h"
#include "ds/Dialect/DS/IR/DSDialect.h"
#include "ds/Dialect/DS/IR/DSOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::ds;

namespace {

RuleMatch byOp(std::initializer_list<std::string> ops) {
  RuleMatch m;
  m.ops.assign(ops);
  return m;
}
RuleMatch byRole(std::initializer_list<std::string> roles) {
  RuleMatch m;
  m.roles.assign(roles);
  return m;
}
RuleMatch byParam(std::string glob) {
  RuleMatch m;
  m.param = std::move(glob);
  return m;
}
RuleMatch byModule(std::string glob) {
  RuleMatch m;
  m.module = std::move(glob);
  return m;
}

TEST(RuleMatcher, ParamAndModuleGlobs) {
  RuleMatcher matcher;
  matcher.append(byParam("layers.*.attn.*"));
  matcher.append(byModule("blocks.[0-1].mlp"));
  // Any consumed parameter may fit the glob.
  EXPECT_EQ(matcher.match("ds.matmul", "", "",
                          {"x.bias", "layers.3.attn.q_proj.weight"}),
            std::optional<unsigned>(0));
  EXPECT_EQ(matcher.match("ds.matmul", "", "", {"mlp.fc1.weight"}),
            std::nullopt);
  // No parameter: a param glob cannot match.
  EXPECT_EQ(matcher.match("ds.matmul", "", "", {}), std::nullopt);
  EXPECT_EQ(matcher.match("ds.add", "", "blocks.1.mlp", {}),
            std::optional<unsigned>(1));
  EXPECT_EQ(matcher.match("ds.add", "", "blocks.2.mlp", {}), std::nullopt);
  // An op without `ds.module` has the empty path: only `*` takes it.
  EXPECT_EQ(matcher.match("ds.add", "", "", {}), std::nullopt);
  matcher.append(byModule("*"));
  EXPECT_EQ(matcher.match("ds.add", "", "", {}), std::optional<unsigned>(2));
}

TEST(RuleMatcher, FirstMatchWins) {
  RuleMatcher matcher;
  matcher.append(byRole({"attn.q", "attn.k"}));
  matcher.append(byOp({"ds.matmul"}));
  matcher.append(byParam("*"));
  EXPECT_EQ(matcher.size(), 3u);
  EXPECT_EQ(matcher.match("ds.matmul", "attn.k", "", {"w"}),
            std::optional<unsigned>(0));
  EXPECT_EQ(matcher.match("ds.matmul", "ffn.up", "", {"w"}),
            std::optional<unsigned>(1));
  EXPECT_EQ(matcher.match("ds.add", "ffn.up", "", {"b"}),
            std::optional<unsigned>(2));
  EXPECT_EQ(matcher.match("ds.add", "", "", {}), std::nullopt);
}

TEST(RuleMatcher, KeysOfOneRuleAllHold) {
  RuleMatch m = byOp({"ds.matmul", "ds.conv2d"});
  m.roles = {"ffn.down"};
  m.param = "*.weight";
  RuleMatcher matcher;
  matcher.append(m);
  EXPECT_EQ(matcher.match("ds.matmul", "ffn.down", "", {"fc2.weight"}),
            std::optional<unsigned>(0));
  EXPECT_EQ(matcher.match("ds.conv2d", "ffn.down", "", {"fc2.weight"}),
            std::optional<unsigned>(0));
  EXPECT_EQ(matcher.match("ds.add", "ffn.down", "", {"fc2.weight"}),
            std::nullopt);
  EXPECT_EQ(matcher.match("ds.matmul", "ffn.up", "", {"fc2.weight"}),
            std::nullopt);
  EXPECT_EQ(matcher.match("ds.matmul", "", "", {"fc2.weight"}), std::nullopt);
  EXPECT_EQ(matcher.match("ds.matmul", "ffn.down", "", {"fc2.bias"}),
            std::nullopt);
  EXPECT_EQ(matcher[0].describe(), "role ffn.down");
  EXPECT_EQ(byOp({"ds.matmul", "ds.add"}).describe(), "op ds.matmul,ds.add");
  EXPECT_EQ(byModule("a.*").describe(), "module a.*");
}

class RuleMatcherParseTest : public ::testing::Test {
protected:
  RuleMatcherParseTest() {
    DialectRegistry registry;
    registry.insert<DSDialect, func::FuncDialect>();
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
  }

  /// Parses the keys of the YAML mapping `text` into a match; errors as
  /// "line:col: message".
  FailureOr<RuleMatch> parse(StringRef text) {
    errors.clear();
    llvm::SourceMgr sm;
    llvm::yaml::Stream stream(text, sm);
    auto *map =
        dyn_cast_or_null<llvm::yaml::MappingNode>(stream.begin()->getRoot());
    if (!map)
      return failure();
    auto fail = [&](llvm::yaml::Node *n, const Twine &msg) {
      auto [line, col] = sm.getLineAndColumn(n->getSourceRange().Start);
      errors += std::to_string(line) + ":" + std::to_string(col) + ": " +
                msg.str() + "\n";
      return failure();
    };
    RuleMatch match;
    for (llvm::yaml::KeyValueNode &kv : *map) {
      SmallString<16> storage;
      StringRef key =
          cast<llvm::yaml::ScalarNode>(kv.getKey())->getValue(storage);
      if (!RuleMatch::isMatchKey(key))
        continue;
      if (failed(match.parseKey(key, kv.getValue(), &ctx, fail)))
        return failure();
    }
    return match;
  }

  MLIRContext ctx;
  std::string errors;
};

TEST_F(RuleMatcherParseTest, ParsesKeys) {
  FailureOr<RuleMatch> m = parse("{op: [matmul, ds.add], role: attn.q, "
                                 "param: 'layers.*', module: 'm.*', "
                                 "compute: bf16}");
  ASSERT_TRUE(succeeded(m)) << errors;
  EXPECT_EQ(m->ops, (SmallVector<std::string>{"ds.matmul", "ds.add"}));
  EXPECT_EQ(m->roles, (SmallVector<std::string>{"attn.q"}));
  EXPECT_EQ(m->param, "layers.*");
  EXPECT_EQ(m->module, "m.*");
  EXPECT_FALSE(m->empty());
  EXPECT_TRUE(RuleMatch().empty());
  EXPECT_FALSE(RuleMatch::isMatchKey("compute"));
}

TEST_F(RuleMatcherParseTest, LocatedErrors) {
  EXPECT_TRUE(failed(parse("op: matmull")));
  EXPECT_EQ(errors, "1:5: unknown op 'ds.matmull'\n");
  EXPECT_TRUE(failed(parse("role: attn.z")));
  EXPECT_NE(errors.find("1:7: unknown role 'attn.z'; expected one of attn.q, "
                        "attn.k"),
            std::string::npos)
      << errors;
  EXPECT_TRUE(failed(parse("\nparam: 'a[b'")));
  EXPECT_NE(errors.find("2:8: bad pattern 'a[b': "), std::string::npos)
      << errors;
  EXPECT_TRUE(failed(parse("module: [a, b]")));
  EXPECT_NE(errors.find("module must be a scalar"), std::string::npos)
      << errors;
}

TEST_F(RuleMatcherParseTest, MatchesAnOpByItsModule) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"mlir(
    func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
      %y = ds.add %x, %x {ds.module = "blocks.0.mlp"} : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
      return %y : tensor<2xf32>
    })mlir",
                                                             &ctx);
  ASSERT_TRUE(module);
  Operation *add = nullptr;
  module->walk([&](AddOp op) { add = op; });
  ASSERT_TRUE(add);
  RuleMatcher matcher;
  matcher.append(byModule("blocks.1.*"));
  matcher.append(byModule("blocks.0.*"));
  EXPECT_EQ(matcher.match(add, "", {}), std::optional<unsigned>(1));
}

} // namespace
