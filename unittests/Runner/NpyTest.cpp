//===- NpyTest.cpp - Host tensors and .npy files --------------------------===//

#include "ds/Runner/Npy.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "TempDir.h"
#include "gtest/gtest.h"

#include <cmath>
#include <cstring>

using namespace ds::runner;

namespace {

using ds::runner::testing::TempDir;

void writeBytes(const std::string &path, llvm::StringRef bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  ASSERT_FALSE(ec) << ec.message();
  os << bytes;
}

/// The message of `err`, consuming it ("" for success).
std::string message(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}
template <typename T> std::string message(llvm::Expected<T> &value) {
  return value ? std::string() : llvm::toString(value.takeError());
}

const DType kAllDTypes[] = {DType::F16, DType::BF16, DType::F32,
                            DType::F64, DType::I8,   DType::I32,
                            DType::I64, DType::U8,   DType::Bool};

/// A tensor of `dtype` with distinct, exactly representable values.
HostTensor sample(DType dtype, llvm::ArrayRef<int64_t> shape) {
  HostTensor t(dtype, shape);
  for (int64_t i = 0, e = t.numElements(); i < e; ++i) {
    if (isFloat(dtype))
      t.setDouble(i, (i - 7) * 0.25);
    else if (dtype == DType::Bool)
      t.setInt(i, i % 3 == 0);
    else if (dtype == DType::U8)
      t.setInt(i, 200 + i % 50);
    else
      t.setInt(i, (i - 7) * 3);
  }
  return t;
}

TEST(Npy, DTypeNames) {
  for (DType dtype : kAllDTypes)
    EXPECT_EQ(parseDType(dtypeName(dtype)), dtype) << dtypeName(dtype).str();
  EXPECT_EQ(dtypeName(DType::F32), "f32");
  EXPECT_EQ(dtypeName(DType::BF16), "bf16");
  EXPECT_EQ(parseDType("i64"), DType::I64);
  EXPECT_EQ(parseDType("u8"), DType::U8);
  EXPECT_EQ(parseDType("f128"), std::nullopt);
  EXPECT_EQ(elementSize(DType::BF16), 2u);
  EXPECT_EQ(elementSize(DType::I64), 8u);
  EXPECT_EQ(elementSize(DType::Bool), 1u);
  EXPECT_EQ(formatShape({32, 16}), "[32, 16]");
  EXPECT_EQ(formatShape({}), "[]");
  EXPECT_EQ(numElements({}), 1);
  EXPECT_EQ(numElements({2, 0, 3}), 0);
}

TEST(Npy, HalfConversions) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00); // Rounds to infinity.
  EXPECT_EQ(floatToHalf(0.1f), 0x2E66);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -26)), 0x0000); // Below half ulp.
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
  // Every non-NaN half survives half -> float -> half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF))
      continue;
    ASSERT_EQ(floatToHalf(halfToFloat(uint16_t(h))), h) << h;
  }
}

TEST(Npy, Bf16Conversions) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(bf16ToFloat(0x3F80), 1.0f);
  float tieDown, tieUp;
  uint32_t a = 0x3F808000, b = 0x3F818000; // Exactly halfway cases.
  std::memcpy(&tieDown, &a, 4);
  std::memcpy(&tieUp, &b, 4);
  EXPECT_EQ(floatToBf16(tieDown), 0x3F80); // To even.
  EXPECT_EQ(floatToBf16(tieUp), 0x3F82);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
}

TEST(Npy, RoundTripEveryDType) {
  TempDir dir;
  for (DType dtype : kAllDTypes) {
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{3, 5}, {7}, {}, {2, 0, 4}}) {
      HostTensor t = sample(dtype, shape);
      std::optional<DType> expect;
      if (dtype == DType::BF16)
        expect = DType::BF16; // bf16 is only readable when asked for.
      llvm::Expected<HostTensor> back = decodeNpy(encodeNpy(t), "mem", expect);
      ASSERT_TRUE(bool(back)) << message(back);
      EXPECT_EQ(*back, t) << dtypeName(dtype).str() << formatShape(shape);

      std::string path = dir.file("t.npy");
      ASSERT_EQ(message(writeNpyAtomic(path, t)), "");
      llvm::Expected<HostTensor> fromFile = readNpy(path, expect);
      ASSERT_TRUE(bool(fromFile)) << message(fromFile);
      EXPECT_EQ(*fromFile, t);
    }
  }
  // Values survive, not just bytes.
  HostTensor f = sample(DType::F32, {3});
  EXPECT_EQ(f.values<float>()[0], -1.75f);
  EXPECT_EQ(f.getDouble(2), -1.25);
}

TEST(Npy, HeaderLikeNumpy) {
  std::string bytes = encodeNpy(HostTensor(DType::F32, {5}));
  // numpy.save(np.zeros(5, np.float32)): v1.0, header padded to 64 bytes.
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(bytes.size(), 128u + 20u);
  EXPECT_EQ(bytes.substr(10, 57),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }");
  EXPECT_EQ(bytes[127], '\n');
  std::string two = encodeNpy(HostTensor(DType::I64, {2, 3}));
  EXPECT_NE(two.find("'descr': '<i8'"), std::string::npos);
  EXPECT_NE(two.find("'shape': (2, 3)"), std::string::npos);
  EXPECT_NE(encodeNpy(HostTensor(DType::F64, {})).find("'shape': ()"),
            std::string::npos);
  EXPECT_NE(encodeNpy(HostTensor(DType::Bool, {1})).find("'|b1'"),
            std::string::npos);
}

/// An .npy file assembled by hand with a 4-byte header length.
std::string handMade(char major, llvm::StringRef dict, llvm::StringRef data) {
  std::string header = dict.str();
  while ((12 + header.size() + 1) % 16)
    header += ' ';
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += major;
  out += '\0';
  for (int b = 0; b < 4; ++b)
    out += char((header.size() >> (8 * b)) & 0xff);
  return out + header + data.str();
}

TEST(Npy, ReadsHandWrittenV2AndV3) {
  TempDir dir;
  int64_t values[6] = {1, -2, 3, -4, 5, 1ll << 40};
  llvm::StringRef data(reinterpret_cast<const char *>(values), sizeof(values));
  std::string path = dir.file("v2.npy");
  writeBytes(path, handMade(2,
                            "{\"descr\": \"<i8\", \"fortran_order\": False, "
                            "\"shape\": (2, 3)}",
                            data));
  llvm::Expected<HostTensor> t = readNpy(path);
  ASSERT_TRUE(bool(t)) << message(t);
  EXPECT_EQ(t->dtype, DType::I64);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t->getInt(1), -2);
  EXPECT_EQ(t->getInt(5), 1ll << 40);

  llvm::Expected<HostTensor> v3 = decodeNpy(
      handMade(3, "{'shape': (6,), 'fortran_order': False, 'descr': '<i8', }",
               data),
      "v3");
  ASSERT_TRUE(bool(v3)) << message(v3);
  EXPECT_EQ(v3->shape, (std::vector<int64_t>{6}));
  EXPECT_EQ(v3->bytes, t->bytes);
}

TEST(Npy, LongHeaderUsesV2) {
  HostTensor t(DType::F32, std::vector<int64_t>(25000, 1));
  t.setDouble(0, 3.5);
  std::string bytes = encodeNpy(t);
  EXPECT_EQ(bytes[6], '\x02');
  llvm::Expected<HostTensor> back = decodeNpy(bytes, "long");
  ASSERT_TRUE(bool(back)) << message(back);
  EXPECT_EQ(*back, t);
}

TEST(Npy, Errors) {
  TempDir dir;
  std::string good = encodeNpy(sample(DType::F32, {4, 4}));
  auto readError = [&](llvm::StringRef name, llvm::StringRef bytes,
                       std::optional<DType> expect = {}) {
    std::string path = dir.file(name);
    writeBytes(path, bytes);
    llvm::Expected<HostTensor> t = readNpy(path, expect);
    EXPECT_FALSE(bool(t)) << name.str();
    std::string msg = message(t);
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg; // Names the file.
    return msg.substr(path.size() + 2);
  };

  EXPECT_EQ(readError("magic.npy", "PK\x03\x04 this is a zip file"),
            "not an .npy file (bad magic)");
  EXPECT_EQ(readError("empty.npy", ""), "not an .npy file (bad magic)");

  std::string fortran = good;
  size_t pos = fortran.find("False");
  fortran.replace(pos, 5, "True ");
  EXPECT_NE(readError("fortran.npy", fortran).find("Fortran-order"),
            std::string::npos);

  EXPECT_EQ(readError("short.npy", good.substr(0, good.size() - 5)),
            "truncated data: shape [4, 4] (f32) needs 64 bytes, file has 59");
  EXPECT_NE(readError("long.npy", good + "xx").find("unexpected 2 bytes"),
            std::string::npos);
  EXPECT_NE(
      readError("header.npy", good.substr(0, 40)).find("truncated header"),
      std::string::npos);

  std::string big = good;
  big.replace(big.find("<f4"), 3, ">f4");
  EXPECT_NE(readError("big.npy", big).find("big-endian"), std::string::npos);

  std::string complex = good;
  complex.replace(complex.find("<f4"), 3, "<c8");
  EXPECT_EQ(readError("complex.npy", complex), "unsupported dtype '<c8'");

  EXPECT_EQ(readError("tokens.npy", good, DType::I64),
            "expected dtype i64, got f32");

  std::string u2 = encodeNpy(sample(DType::BF16, {2}));
  EXPECT_NE(readError("u2.npy", u2).find("unsupported dtype '<u2'"),
            std::string::npos);

  std::string garbled = good;
  garbled.replace(garbled.find("'shape'"), 7, "'shope'");
  EXPECT_NE(readError("garbled.npy", garbled).find("malformed .npy header"),
            std::string::npos);

  llvm::Expected<HostTensor> missing = readNpy(dir.file("none.npy"));
  EXPECT_NE(message(missing).find("cannot read"), std::string::npos);
}

TEST(Npy, CheckTensor) {
  HostTensor t(DType::F32, {32, 15});
  EXPECT_EQ(message(checkTensor(t, DType::F32, {32, 15}, "x")), "");
  EXPECT_EQ(message(checkTensor(t, DType::F32, {-1, 15}, "x")), "");
  EXPECT_EQ(message(checkTensor(t, DType::F32, {32, 16},
                                "data file x.npy for input 'x'")),
            "data file x.npy for input 'x': expected shape [32, 16] (f32), "
            "got [32, 15] (f32)");
  EXPECT_EQ(message(checkTensor(t, DType::F64, {32, 15}, "w")),
            "w: expected shape [32, 15] (f64), got [32, 15] (f32)");
  EXPECT_EQ(message(checkTensor(t, DType::F32, {32}, "w")),
            "w: expected shape [32] (f32), got [32, 15] (f32)");
}

} // namespace
