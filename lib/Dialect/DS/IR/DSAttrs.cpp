//===- DSAttrs.cpp - ds attributes ----------------------------------------===//
//
// Parsing, printing and verification of `#ds.init` and `#ds.state`.
//
//===----------------------------------------------------------------------===//

#include "ds/Dialect/DS/IR/DSAttrs.h"
#include "ds/Dialect/DS/IR/DSDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ds;

#include "ds/Dialect/DS/IR/DSEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ds/Dialect/DS/IR/DSAttrs.cpp.inc"

void DSDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ds/Dialect/DS/IR/DSAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// InitAttr
//===----------------------------------------------------------------------===//

static bool kindTakesValue(InitKind kind) {
  return kind == InitKind::constant || kind == InitKind::normal ||
         kind == InitKind::uniform;
}

bool InitAttr::takesValue() const { return kindTakesValue(getKind()); }

Attribute InitAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(loc, "unknown init kind '")
        << keyword
        << "'; expected one of zeros, ones, constant, normal, uniform, file";
    return {};
  }
  double value = 0.0;
  bool hasValue = succeeded(parser.parseOptionalComma());
  if (hasValue && parser.parseFloat(value))
    return {};
  if (parser.parseGreater())
    return {};
  if (hasValue != kindTakesValue(*kind)) {
    parser.emitError(loc, "init kind '")
        << keyword << "' "
        << (hasValue ? "takes no value" : "needs a value, e.g. <")
        << (hasValue ? "" : keyword) << (hasValue ? "" : ", 0.02>");
    return {};
  }
  return parser.getChecked<InitAttr>(loc, parser.getContext(), *kind,
                                     llvm::APFloat(value));
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyInitKind(getKind());
  if (takesValue()) {
    printer << ", ";
    printer.printFloat(getValue());
  }
  printer << '>';
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, llvm::APFloat apValue) {
  double value = apValue.convertToDouble();
  // A constant may be +-inf: the range observers of QAT start there, as
  // torch.ao's min/max buffers do. NaN never; scales must be finite.
  if (std::isnan(value) || (kind != InitKind::constant && std::isinf(value)))
    return emitError() << "init value must be "
                       << (kind == InitKind::constant
                               ? "a number (+-inf allowed)"
                               : "finite");
  if ((kind == InitKind::normal || kind == InitKind::uniform) && value < 0)
    return emitError() << "init '" << stringifyInitKind(kind)
                       << "' needs a non-negative scale, got " << value;
  if (!kindTakesValue(kind) && value != 0.0)
    return emitError() << "init '" << stringifyInitKind(kind)
                       << "' takes no value";
  return success();
}

//===----------------------------------------------------------------------===//
// StateAttr
//===----------------------------------------------------------------------===//

LogicalResult StateAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                StringRef kind, StringRef of) {
  if (kind.empty())
    return emitError() << "state kind must not be empty";
  if (kind.contains('@'))
    return emitError() << "state kind '" << kind << "' must not contain '@'";
  return success();
}

std::string StateAttr::getKey() const {
  if (getOf().empty())
    return getKind().str();
  return (getKind() + "@" + getOf()).str();
}
