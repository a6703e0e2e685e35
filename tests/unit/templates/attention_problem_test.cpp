#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "attention/problem.h"
#include "errors.h"

namespace evo::attention {
namespace {

TEST(ShapeTest, ParsesFourDimensionsWithEqualSequences) {
  Shape s = parse_shape("2x16x1000x128");
  EXPECT_EQ(s.batch, 2);
  EXPECT_EQ(s.heads, 16);
  EXPECT_EQ(s.seq_q, 1000);
  EXPECT_EQ(s.seq_k, 1000);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_FALSE(s.causal);
}

TEST(ShapeTest, ParsesSeparateQueryAndKeyLengths) {
  Shape s = parse_shape("1x8x512x1024x64");
  EXPECT_EQ(s.seq_q, 512);
  EXPECT_EQ(s.seq_k, 1024);
  EXPECT_EQ(s.head_dim, 64);
}

TEST(ShapeTest, CausalSuffixAndDefault) {
  EXPECT_TRUE(parse_shape("1x8x512x64:causal").causal);
  EXPECT_FALSE(parse_shape("1x8x512x64:nc", true).causal);
  EXPECT_TRUE(parse_shape("1x8x512x64", true).causal);
  EXPECT_FALSE(parse_shape("1x8x512x64", false).causal);
  EXPECT_TRUE(parse_shape("  1x8x512x64:causal ").causal);
}

// Parsed (stored runs keep loading), but refused where a shape is to be tuned or evaluated: the
// diagonal is aligned bottom-right, so more queries than keys leave rows with no key.
TEST(ShapeTest, CausalWithMoreQueriesThanKeysIsRefusedForTuning) {
  const Shape s = parse_shape("1x8x512x256x64:causal");
  try {
    require_servable_causal(s, "1x8x512x256x64:causal");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "shape '1x8x512x256x64:causal': causal needs seq_q <= seq_k (512 > 256: the diagonal is "
              "aligned bottom-right, so the first rows would see no key)");
  }
  EXPECT_NO_THROW(require_servable_causal(parse_shape("1x8x512x256x64"), "1x8x512x256x64"));
  EXPECT_NO_THROW(require_servable_causal(parse_shape("1x8x512x64:causal"), "1x8x512x64:causal"));
  EXPECT_NO_THROW(require_servable_causal(parse_shape("1x8x1x4096x64:causal"), "1x8x1x4096x64:causal"));
  EXPECT_EQ(parse_shape("1x8x512x4096x64:causal").causal_shift(), 3584);
}

TEST(ShapeTest, KvHeadsSuffixGroupsTheQueryHeads) {
  const Shape s = parse_shape("4x32x4096x128:causal:bf16:kv8");
  EXPECT_EQ(s.heads, 32);
  EXPECT_EQ(s.heads_kv, 8);
  EXPECT_EQ(s.text(), "4x32x4096x128:kv8:causal:bf16") << "one canonical order";
  EXPECT_EQ(parse_shape("1x8x512x64").heads_kv, 8) << "as many as the query heads where none is named";
  EXPECT_EQ(parse_shape("1x8x512x64:kv8").text(), "1x8x512x64") << "equal heads print no suffix";
  EXPECT_NE(parse_shape("1x8x512x64:kv2"), parse_shape("1x8x512x64"));
  EXPECT_EQ(parse_shape("1x32x1x4096x128:kv1").heads_kv, 1) << "multi-query";
  // A shape built in code with its heads set and its K/V heads not is not grouped by accident.
  Shape built;
  built.heads = 16;
  EXPECT_EQ(built.kv_heads(), 16);
  EXPECT_EQ(built.text(), "1x16x512x64");
  EXPECT_EQ(built, parse_shape("1x16x512x64"));
  EXPECT_EQ(to_problem(built), to_problem(parse_shape("1x16x512x64")));
  EXPECT_EQ(shape_to_proto(built).heads_kv(), 0);
  // K and V of 8 heads are a quarter of Q's bytes: 2 bytes x 128 x (2 x 32 x 1 + 2 x 8 x 4096).
  EXPECT_DOUBLE_EQ(parse_shape("1x32x1x4096x128:kv8").bytes_moved(), 2.0 * 128 * (2 * 32 * 1 + 2 * 8 * 4096));
}

TEST(ShapeTest, KvHeadsThatDoNotDivideTheQueryHeadsAreRefused) {
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"1x32x512x64:kv5", "K/V heads 5 do not divide the 32 query heads"},
           {"1x8x512x64:kv16", "K/V heads 16 do not divide the 8 query heads"},
           {"1x8x512x64:kv0", "K/V heads must be at least 1"},
           {"1x8x512x64:kv2:kv4", "more than one ':kv' suffix"},
           {"1x8x512x64:kvx", "unknown suffix ':kvx'"}}) {
    try {
      parse_shape(text);
      ADD_FAILURE() << text << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("malformed shape '" + text + "': ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

TEST(ShapeTest, KvHeadsTravelAsZeroWhenEqualAndAreCheckedOnArrival) {
  const Shape gqa = parse_shape("2x32x2048x128:kv8");
  EXPECT_EQ(shape_to_proto(gqa).heads_kv(), 8);
  EXPECT_EQ(shape_from_proto(shape_to_proto(gqa)), gqa);
  const Shape mha = parse_shape("2x32x2048x128");
  EXPECT_EQ(shape_to_proto(mha).heads_kv(), 0) << "as a peer from before grouped queries sends it";
  EXPECT_EQ(shape_from_proto(shape_to_proto(mha)), mha);
  v1::Shape bad = shape_to_proto(mha);
  bad.set_heads_kv(5);
  EXPECT_THROW(shape_from_proto(bad), InputError);
  bad.set_heads_kv(-1);
  EXPECT_THROW(shape_from_proto(bad), InputError);
}

TEST(ShapeTest, TextRoundTrips) {
  for (const char* t : {"1x8x512x64", "1x8x512x1024x64:causal", "3x5x7x9:causal", "1x1x1x1", "1x8x512x64:bf16",
                        "2x16x4096x128:causal:bf16", "1x32x512x4096x128:kv8:causal:bf16", "64x32x1x1024x128:kv8:bf16",
                        "4x16x2048x64:causal:e4m3"}) {
    Shape s = parse_shape(t);
    EXPECT_EQ(s.text(), t);
    EXPECT_EQ(parse_shape(s.text()), s);
  }
}

TEST(ShapeTest, DtypeSuffixInEitherOrderAndDefault) {
  EXPECT_EQ(parse_shape("1x8x512x64").dtype, DType::kF16);
  EXPECT_EQ(parse_shape("1x8x512x64:bf16").dtype, DType::kBF16);
  for (const char* t : {"1x8x512x64:causal:bf16", "1x8x512x64:bf16:causal"}) {
    const Shape s = parse_shape(t);
    EXPECT_TRUE(s.causal) << t;
    EXPECT_EQ(s.dtype, DType::kBF16) << t;
    EXPECT_EQ(s.text(), "1x8x512x64:causal:bf16") << "one canonical text for " << t;
  }
  EXPECT_EQ(parse_shape("1x8x512x64", false, DType::kBF16).dtype, DType::kBF16);
  EXPECT_EQ(parse_shape("1x8x512x64:fp16", false, DType::kBF16).dtype, DType::kF16) << "a suffix wins";
  EXPECT_EQ(parse_shape("1x8x512x64:fp16").text(), "1x8x512x64") << "fp16 prints no suffix";
  EXPECT_FALSE(parse_shape("1x8x512x64:bf16") == parse_shape("1x8x512x64"));
}

TEST(ShapeTest, DtypeNamesRoundTrip) {
  for (DType d : {DType::kF16, DType::kBF16, DType::kE4M3}) {
    EXPECT_EQ(parse_dtype(dtype_name(d)), d);
    EXPECT_EQ(dtype_from_proto(dtype_to_proto(d)), d);
  }
  EXPECT_EQ(dtype_name(DType::kBF16), "bf16");
  EXPECT_EQ(dtype_to_proto(DType::kE4M3), v1::DTYPE_E4M3);
}

// FP8 inputs: a byte an element for Q, K and V, a bf16 O; the wire carries the dtype.
TEST(ShapeTest, E4m3MovesBytesInAndBf16Out) {
  const Shape s = parse_shape("1x32x512x4096x128:kv8:e4m3");
  EXPECT_EQ(s.dtype, DType::kE4M3);
  EXPECT_DOUBLE_EQ(s.bytes_moved(), 128.0 * ((1 + 2) * 32 * 512 + 2 * 1 * 8 * 4096));
  EXPECT_EQ(shape_from_proto(shape_to_proto(s)), s);
  EXPECT_EQ(output_dtype(DType::kE4M3), DType::kBF16);
  EXPECT_EQ(input_bytes(DType::kE4M3), 1);
  EXPECT_EQ(input_bytes(DType::kBF16), 2);
}

// The same sentence wherever a dtype is named: a flag, a shape's suffix, a space's list.
TEST(ShapeTest, AnUnknownDtypeNamesTheAcceptedOnes) {
  try {
    parse_shape("1x8x512x64:fp8");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "unknown dtype 'fp8' in shape '1x8x512x64:fp8': expected fp16, bf16 or e4m3");
  }
  try {
    parse_dtype("float16");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "unknown dtype 'float16': expected fp16, bf16 or e4m3");
  }
  EXPECT_THROW(parse_dtype(""), InputError);
  EXPECT_THROW(parse_dtype("BF16"), InputError);
}

TEST(ShapeTest, FlopsHalvedForCausal) {
  EXPECT_DOUBLE_EQ(parse_shape("1x8x512x64").flops(), 4.0 * 8 * 512 * 512 * 64);
  EXPECT_DOUBLE_EQ(parse_shape("1x8x512x64:causal").flops(), 2.0 * 8 * 512 * 512 * 64);
  // Bottom-right over a cache: 256 rows see 256..511 of the 512 keys, 256 * 512 - 256^2 / 2 pairs.
  EXPECT_DOUBLE_EQ(parse_shape("1x8x256x512x64:causal").flops(), 4.0 * 8 * 64 * (256.0 * 512 - 256.0 * 256 / 2));
}

// Each malformed form, with a piece of the message it must carry.
TEST(ShapeTest, RejectsEveryMalformedForm) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "expected BxHxSxD"},
      {"1x8x512", "expected BxHxSxD"},
      {"17,300x8x64", "expected BxHxSxD"},
      {"17++300x8x64", "empty sequence length"},
      {"17+0x8x64", "sequence length must be at least 1"},
      {"17+300/x8x64", "empty key length"},
      {"17+300/4096/2x8x64", "'4096/2' is not a positive integer"},
      {"17+300x8", "expected BxHxSxD"},
      {"1x8x512x64x64x2", "expected BxHxSxD"},
      {"1x8x512x", "empty head_dim"},
      {"x8x512x64", "empty batch"},
      {"1xx512x64", "empty heads"},
      {"1x8xabcx64", "'abc' is not a positive integer"},
      {"1x8x-512x64", "is not a positive integer"},
      {"1x8x+512x64", "is not a positive integer"},
      {"1x8x5 12x64", "is not a positive integer"},
      {"1x8x512.5x64", "is not a positive integer"},
      {"0x8x512x64", "batch must be at least 1"},
      {"1x0x512x64", "heads must be at least 1"},
      {"1x8x512x0x64", "seq_k must be at least 1"},
      {"1x8x1048577x64", "exceeds 2^20"},
      {"1x8x99999999999999999999x64", "exceeds 2^20"},
      {"1x8x512x64:causual", "unknown suffix ':causual'"},
      {"1x8x512x64:", "unknown suffix"},
      {"1x8x512x64:causal:", "unknown suffix"},
      {"1x8x512x64:bf16:bogus", "unknown suffix ':bogus' (expected ':causal', ':nc', ':kvN' or a dtype: fp16, bf16 or e4m3)"},
      {"1x8x512x64:causal:nc", "more than one of ':causal' and ':nc'"},
      {"1x8x512x64:causal:causal", "more than one of ':causal' and ':nc'"},
      {"1x8x512x64:bf16:fp16", "more than one dtype suffix"},
      {"1x8x512x64:bf16:bf16", "more than one dtype suffix"},
      {"1X8X512X64", "expected BxHxSxD"},
      {"1024x1024x2048x1", "2^31 elements"},   // exactly 2^31
      {"1x1x1x4096x524288", "2^31 elements"},  // the key tensor is the large one
  };
  for (const auto& [text, message] : cases) {
    try {
      parse_shape(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos)
          << "'" << text << "' -> " << e.what();
      EXPECT_NE(std::string(e.what()).find("malformed shape '" + std::string(text) + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(ShapeTest, APackedBatchListsItsSequences) {
  const Shape s = parse_shape("17+300/4096+3000x32x128:kv8:causal:bf16");
  ASSERT_TRUE(s.varlen());
  EXPECT_EQ(s.lens_q, (std::vector<int>{17, 300, 3000}));
  EXPECT_EQ(s.lens_k, (std::vector<int>{17, 4096, 3000}));
  // The search space and the grid read the count and the longest lengths.
  EXPECT_EQ(s.batch, 3);
  EXPECT_EQ(s.seq_q, 3000);
  EXPECT_EQ(s.seq_k, 4096);
  EXPECT_EQ(s.total_q(), 17 + 300 + 3000);
  EXPECT_EQ(s.total_k(), 17 + 4096 + 3000);
  EXPECT_EQ(s.heads, 32);
  EXPECT_EQ(s.heads_kv, 8);
  EXPECT_EQ(s.text(), "17+300/4096+3000x32x128:kv8:causal:bf16");
  // One sequence says it is a list by its '/'.
  EXPECT_EQ(parse_shape("3000/3000x8x64").text(), "3000/3000x8x64");
  EXPECT_EQ(parse_shape("3000/3000x8x64").batch, 1);
  // FLOPs and bytes are each sequence's own, summed.
  const double pairs = (17.0 * 17 - 17.0 * 17 / 2) + (300.0 * 4096 - 300.0 * 300 / 2) + (3000.0 * 3000 - 3000.0 * 3000 / 2);
  EXPECT_DOUBLE_EQ(s.flops(), 4.0 * 32 * 128 * pairs);
  EXPECT_DOUBLE_EQ(s.bytes_moved(), 2.0 * 128 * (2.0 * 32 * (17 + 300 + 3000) + 2.0 * 8 * (17 + 4096 + 3000)));
  // A packed batch differs from the dense batch of its longest lengths.
  EXPECT_NE(s, parse_shape("3x32x3000x4096x128:kv8:causal:bf16"));
}

TEST(ShapeTest, APackedBatchTravelsAndComesBackWhole) {
  const Shape s = parse_shape("1/4096+16/1024x32x128:kv8:causal:bf16");
  const v1::Shape wire = shape_to_proto(s);
  EXPECT_EQ(wire.seq_lens_q_size(), 2);
  EXPECT_EQ(shape_from_proto(wire), s);
  EXPECT_EQ(shape_of(to_problem(s)), s);
  EXPECT_EQ(to_problem(s).value("VARLEN"), 1);
  EXPECT_EQ(to_problem(parse_shape("1x8x512x64")).value("VARLEN"), 0);

  v1::Shape uneven = wire;
  uneven.add_seq_lens_q(5);
  EXPECT_THROW(shape_from_proto(uneven), InputError);
  v1::Shape zero = wire;
  zero.set_seq_lens_k(0, 0);
  EXPECT_THROW(shape_from_proto(zero), InputError);
}

TEST(ShapeTest, APackedSequenceWithMoreQueriesThanKeysIsRefusedForTuning) {
  const Shape s = parse_shape("17+300/200x8x64:causal");
  try {
    require_servable_causal(s, "17+300/200x8x64:causal");
    ADD_FAILURE() << "accepted a causal sequence of 300 queries over 200 keys";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("in sequence 1 (300 > 200"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(require_servable_causal(parse_shape("17+300/200x8x64"), "non-causal"));
}

TEST(ShapeTest, AcceptsTheLargestAllowedTensor) {
  // 2^31 - 2^20 elements: just under the limit.
  EXPECT_NO_THROW(parse_shape("1x2047x1024x1024"));
  EXPECT_NO_THROW(parse_shape("1x1x1048576x1"));
}

}  // namespace
}  // namespace evo::attention
