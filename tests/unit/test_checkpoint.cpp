// Checkpoints (single file, directory, sharded index), typed reads with dtype
// conversion, the all-problems validator, and the safetensors writer.
#include <doctest/doctest.h>

#include <cpx/io/safetensors.hpp>
#include <cpx/io/safetensors_writer.hpp>

#include "temp_dir.hpp"
#include "test_support.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using cpx::bf16;
using cpx::DType;
using cpx::Error;
using cpx::FormatError;
using cpx::fp16;
using cpx::ShapeError;
using cpx::io::Checkpoint;
using cpx::io::CheckpointValidator;
using cpx::io::Json;
using cpx::io::SafetensorsFile;
using cpx::io::SafetensorsWriter;
using cpx::testing::TempDir;

namespace {

std::uint32_t bits_of(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

std::vector<float> values_with_specials(std::size_t n, std::uint64_t seed) {
    std::vector<float> v = cpx::testing::random_normal(n, seed, 3.0f);
    const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65520.0f, 1e-8f, -3e-5f, 6.1e-5f,
                              3.0e38f, std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                              1.00390625f, 1.01171875f, 2049.0f};
    v.insert(v.end(), std::begin(specials), std::end(specials));
    return v;
}

/// Every 16-bit pattern once: all bf16 / fp16 values, NaNs and subnormals included.
std::vector<std::uint16_t> all_16bit_patterns() {
    std::vector<std::uint16_t> v(65536);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint16_t>(i);
    return v;
}

/// dir/model.safetensors with "f32" (the given values), "bf16" and "f16" (every 16-bit pattern, the
/// F16 tensor in the given shape): the typed-read tests' file.
void write_typed_tensors(const TempDir& dir, const std::vector<float>& f32, const std::vector<std::uint16_t>& patterns,
                         std::vector<std::int64_t> f16_shape = {65536}) {
    SafetensorsWriter w;
    w.add("f32", {static_cast<std::int64_t>(f32.size())}, f32);
    w.add("bf16", DType::bf16, {65536}, patterns.data());
    w.add("f16", DType::f16, std::move(f16_shape), patterns.data());
    w.write(dir / "model.safetensors");
}

// "t<i>" (built with append: GCC 12 warns falsely on "literal" + std::string at -O3).
std::string tensor_name(int i) {
    std::string s = "t";
    s.append(std::to_string(i));
    return s;
}

std::string file_header(const std::filesystem::path& p) {
    const auto bytes = cpx::testing::read_bytes(p);
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    return std::string(reinterpret_cast<const char*>(bytes.data() + 8), static_cast<std::size_t>(n));
}

}  // namespace

// ------------------------------------------------------------------ writer

TEST_CASE("the writer round-trips every library dtype, shapes and metadata") {
    TempDir dir;
    const std::vector<float> f32 = cpx::testing::random_normal(6, 1);
    std::vector<bf16> b16(5);
    std::vector<fp16> h16(4);
    for (std::size_t i = 0; i < b16.size(); ++i) b16[i] = bf16::from_bits(static_cast<std::uint16_t>(0x3f80 + 3 * i));
    for (std::size_t i = 0; i < h16.size(); ++i) h16[i] = fp16::from_bits(static_cast<std::uint16_t>(0x3c00 + 5 * i));
    const std::vector<std::int64_t> i64{-1, std::numeric_limits<std::int64_t>::max(), 7};
    const std::vector<std::int32_t> i32{std::numeric_limits<std::int32_t>::min(), 0};
    SafetensorsWriter w;
    w.add("f32", {2, 3}, f32);
    w.add("b16", {5}, b16);
    w.add("h16", {2, 2}, h16);
    w.add("i64", {3}, i64);
    w.add("i32", {1, 2}, i32);
    const double f64[] = {0.1, -2.0};
    w.add_raw("f64", "F64", {2}, std::as_bytes(std::span<const double>(f64)));
    w.add_metadata("format", "pt");
    const auto path = dir / "m.safetensors";
    w.write(path);

    const auto f = SafetensorsFile::open(path);
    CHECK(f.size() == 6);
    CHECK(f.find("f64")->dtype_name == "F64");
    CHECK(std::memcmp(f.find("f64")->bytes.data(), f64, 16) == 0);
    CHECK(*f.metadata_value("format") == "pt");
    auto same_bytes = [&](const char* name, const void* want, std::size_t n, DType dtype,
                          std::vector<std::int64_t> shape) {
        CAPTURE(name);
        const auto* t = f.find(name);
        REQUIRE(t != nullptr);
        CHECK(t->dtype == dtype);
        CHECK(t->shape == shape);
        REQUIRE(t->bytes.size() == n);
        CHECK(std::memcmp(t->bytes.data(), want, n) == 0);
    };
    same_bytes("f32", f32.data(), 24, DType::f32, {2, 3});
    same_bytes("b16", b16.data(), 10, DType::bf16, {5});
    same_bytes("h16", h16.data(), 8, DType::f16, {2, 2});
    same_bytes("i64", i64.data(), 24, DType::i64, {3});
    same_bytes("i32", i32.data(), 8, DType::i32, {1, 2});
}

TEST_CASE("written files have an 8-byte aligned data start and every tensor aligned to its element size") {
    TempDir dir;
    SafetensorsWriter w;
    const std::vector<std::uint16_t> odd(3, 0x1234);
    w.add("a_bf16_odd", DType::bf16, {3}, odd.data());  // 6 bytes: would misalign what follows
    w.add("b_f32", {2}, std::vector<float>{1.0f, 2.0f});
    w.add("c_i64", {1}, std::vector<std::int64_t>{5});
    w.add("d_f16", DType::f16, {1}, odd.data());
    w.write(dir / "m.safetensors");
    const auto f = SafetensorsFile::open(dir / "m.safetensors");
    CHECK(f.data_start() % 8 == 0);
    // Widest elements first, then by name; offsets contiguous from 0.
    CHECK(f.names() == std::vector<std::string>{"c_i64", "b_f32", "a_bf16_odd", "d_f16"});
    std::size_t offset = 0;
    for (const auto& name : f.names()) {
        const auto* t = f.find(name);
        const auto start = static_cast<std::size_t>(t->bytes.data() - (f.tensors()[0].bytes.data()));
        CHECK(start == offset);
        CHECK((f.data_start() + start) % cpx::dtype_size(t->dtype) == 0);
        offset += t->bytes.size();
    }
    const std::string header = file_header(dir / "m.safetensors");
    CHECK(header.size() % 8 == 0);
    CHECK(header.find_first_not_of(' ', header.rfind('}') + 1) == std::string::npos);
}

TEST_CASE("the written file does not depend on the order of add()") {
    TempDir dir;
    const auto a = cpx::testing::random_normal(4, 2), b = cpx::testing::random_normal(3, 3);
    SafetensorsWriter w1, w2;
    w1.add("x", {4}, a);
    w1.add("y", {3}, b);
    w1.add_metadata("k2", "v2");
    w1.add_metadata("k1", "v1");
    w2.add_metadata("k1", "v1");
    w2.add("y", {3}, b);
    w2.add("x", {4}, a);
    w2.add_metadata("k2", "v2");
    w1.write(dir / "1.safetensors");
    w2.write(dir / "2.safetensors");
    CHECK(cpx::testing::read_bytes(dir / "1.safetensors") == cpx::testing::read_bytes(dir / "2.safetensors"));
    CHECK_FALSE(std::filesystem::exists(dir / "1.safetensors.tmp"));
}

TEST_CASE("the writer rejects duplicate or reserved names and data that does not match the shape") {
    SafetensorsWriter w;
    const std::vector<float> v(4);
    w.add("a", {4}, v);
    CHECK_THROWS_WITH_AS(w.add("a", {4}, v), "tensor 'a' was already added", Error);
    CHECK_THROWS_WITH_AS(w.add("__metadata__", {4}, v), "'__metadata__' is reserved and cannot name a tensor", Error);
    CHECK_THROWS_WITH_AS(w.add("b", {2, 3}, v), "tensor 'b': shape [2, 3] needs 6 elements, got 4", ShapeError);
    CHECK_THROWS_WITH_AS(w.add("c", {-4}, v), "tensor 'c': negative dimension in shape [-4]", ShapeError);
    const std::vector<std::byte> raw(12);
    CHECK_THROWS_WITH_AS(w.add_raw("d", "F64", {2}, raw), "tensor 'd': shape [2] of F64 needs 16 bytes, got 12",
                         ShapeError);
    CHECK_THROWS_WITH_AS(w.add_raw("e", "Q4", {2}, raw), "tensor 'e': unknown safetensors dtype 'Q4'", ShapeError);
    CHECK(w.size() == 1);
}

// ------------------------------------------------------------------ typed reads and conversions

TEST_CASE("float reads copy F32 and widen BF16 and F16 bit-exactly, for every 16-bit pattern") {
    TempDir dir;
    const auto f32 = values_with_specials(1000, 4);
    const auto patterns = all_16bit_patterns();
    write_typed_tensors(dir, f32, patterns, {256, 256});
    const auto ckpt = Checkpoint::open(dir.path());

    auto out = cpx::testing::poisoned<float>(f32.size());
    ckpt.read("f32", std::span<float>(out));
    CHECK(std::memcmp(out.data(), f32.data(), f32.size() * 4) == 0);

    const auto from_bf16 = ckpt.read_vector<float>("bf16");
    const auto from_f16 = ckpt.read_vector<float>("f16");
    REQUIRE(from_bf16.size() == 65536);
    REQUIRE(from_f16.size() == 65536);
    std::size_t bf16_wrong = 0, f16_wrong = 0;
    for (std::size_t i = 0; i < 65536; ++i) {
        bf16_wrong += bits_of(from_bf16[i]) != bits_of(bf16::from_bits(patterns[i]).to_float());
        f16_wrong += bits_of(from_f16[i]) != bits_of(fp16::from_bits(patterns[i]).to_float());
    }
    CHECK(bf16_wrong == 0);
    CHECK(f16_wrong == 0);
}

TEST_CASE("bf16 reads copy BF16 and round F32 and F16 exactly as cpx::bf16 does") {
    TempDir dir;
    const auto f32 = values_with_specials(5000, 5);
    const auto patterns = all_16bit_patterns();
    write_typed_tensors(dir, f32, patterns);
    const auto ckpt = Checkpoint::open(dir / "model.safetensors");

    const auto a = ckpt.read_vector<bf16>("f32");
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < f32.size(); ++i) wrong += a[i].bits != bf16::from_float(f32[i]).bits;
    CHECK(wrong == 0);
    const auto b = ckpt.read_vector<bf16>("bf16");
    CHECK(std::memcmp(b.data(), patterns.data(), 2 * 65536) == 0);
    const auto c = ckpt.read_vector<bf16>("f16");
    wrong = 0;
    for (std::size_t i = 0; i < 65536; ++i)
        wrong += c[i].bits != bf16::from_float(fp16::from_bits(patterns[i]).to_float()).bits;
    CHECK(wrong == 0);
}

TEST_CASE("fp16 reads copy F16 and round F32 and BF16 exactly as cpx::fp16 does") {
    TempDir dir;
    const auto f32 = values_with_specials(5000, 6);
    const auto patterns = all_16bit_patterns();
    write_typed_tensors(dir, f32, patterns);
    const auto ckpt = Checkpoint::open(dir.path());
    const auto a = ckpt.read_vector<fp16>("f32");
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < f32.size(); ++i) wrong += a[i].bits != fp16::from_float(f32[i]).bits;
    CHECK(wrong == 0);
    const auto b = ckpt.read_vector<fp16>("bf16");
    wrong = 0;
    for (std::size_t i = 0; i < 65536; ++i)
        wrong += b[i].bits != fp16::from_float(bf16::from_bits(patterns[i]).to_float()).bits;
    CHECK(wrong == 0);
    const auto c = ckpt.read_vector<fp16>("f16");
    CHECK(std::memcmp(c.data(), patterns.data(), 2 * 65536) == 0);
}

TEST_CASE("integer reads convert between I64 and I32, checking the int32 range") {
    TempDir dir;
    const std::vector<std::int64_t> small{0, -5, 2147483647, -2147483648LL};
    const std::vector<std::int64_t> big{1, 2147483648LL};
    const std::vector<std::int32_t> i32{3, -4, 2147483647};
    SafetensorsWriter w;
    w.add("small", {4}, small);
    w.add("big", {2}, big);
    w.add("i32", {3}, i32);
    w.write(dir / "model.safetensors");
    const auto ckpt = Checkpoint::open(dir.path());
    CHECK(ckpt.read_vector<std::int32_t>("small") == std::vector<std::int32_t>{0, -5, 2147483647, -2147483647 - 1});
    CHECK(ckpt.read_vector<std::int64_t>("small") == small);
    CHECK(ckpt.read_vector<std::int64_t>("i32") == std::vector<std::int64_t>{3, -4, 2147483647});
    CHECK(ckpt.read_vector<std::int32_t>("i32") == i32);
    std::vector<std::int32_t> out(2);
    CHECK_THROWS_WITH_AS(ckpt.read("big", std::span<std::int32_t>(out)),
                         (ckpt.context() + "tensor 'big' element 1 is 2147483648, outside the int32 range").c_str(),
                         ShapeError);
}

TEST_CASE("reads check the element count and the dtype, naming the checkpoint and the tensor") {
    TempDir dir;
    SafetensorsWriter w;
    w.add("w", {2, 3}, std::vector<float>(6, 1.0f));
    w.add("ids", {3}, std::vector<std::int64_t>{1, 2, 3});
    w.write(dir / "model.safetensors");
    const auto ckpt = Checkpoint::open(dir.path());
    const std::string at = "checkpoint '" + dir.path().string() + "': ";
    std::vector<float> five(5);
    CHECK_THROWS_WITH_AS(ckpt.read("w", std::span<float>(five)),
                         (at + "tensor 'w' [2, 3] has 6 elements, the destination holds 5").c_str(), ShapeError);
    std::vector<float> three(3);
    CHECK_THROWS_WITH_AS(ckpt.read("ids", std::span<float>(three)),
                         (at + "tensor 'ids' has dtype I64, which cannot be read as float (readable: F32, BF16, F16)")
                             .c_str(),
                         ShapeError);
    std::vector<std::int64_t> six(6);
    CHECK_THROWS_WITH_AS(ckpt.read("w", std::span<std::int64_t>(six)),
                         (at + "tensor 'w' has dtype F32, which cannot be read as int64 (readable: I64, I32)").c_str(),
                         ShapeError);
    CHECK_THROWS_WITH_AS(ckpt.read("nope", std::span<float>(three)), (at + "missing tensor 'nope'").c_str(), ShapeError);
}

// ------------------------------------------------------------------ Checkpoint::open and expect

TEST_CASE("a checkpoint opens from a directory, a .safetensors file, and prefers model.safetensors") {
    TempDir dir;
    SafetensorsWriter single, sharded;
    single.add("only_in_single", {1}, std::vector<float>{1.0f});
    sharded.add("only_in_shards", {1}, std::vector<float>{2.0f});
    single.write(dir / "model.safetensors");
    CHECK(Checkpoint::open(dir.path()).names() == std::vector<std::string>{"only_in_single"});
    CHECK_FALSE(Checkpoint::open(dir.path()).sharded());
    CHECK(Checkpoint::open(dir / "model.safetensors").contains("only_in_single"));
    sharded.write_sharded(dir.path(), 1 << 20);
    CHECK(Checkpoint::open(dir.path()).contains("only_in_single"));  // both present: the single file wins
    std::filesystem::remove(dir / "model.safetensors");
    CHECK(Checkpoint::open(dir.path()).contains("only_in_shards"));
    CHECK(Checkpoint::open(dir.path()).sharded());
}

TEST_CASE("a directory without a checkpoint and a missing file are errors naming the path") {
    TempDir dir;
    CHECK_THROWS_WITH_AS(Checkpoint::open(dir.path()),
                         ("checkpoint directory '" + dir.path().string() +
                          "' holds neither model.safetensors nor model.safetensors.index.json")
                             .c_str(),
                         Error);
    const auto missing = dir / "x.safetensors";
    CHECK_THROWS_WITH_AS(Checkpoint::open(missing),
                         ("cannot open '" + missing.string() + "': No such file or directory").c_str(), Error);
}

TEST_CASE("expect returns the tensor with the right shape and names expected and found shapes otherwise") {
    TempDir dir;
    SafetensorsWriter w;
    w.add("x", {2, 3}, std::vector<float>(6));
    w.write(dir / "model.safetensors");
    const auto ckpt = Checkpoint::open(dir.path());
    CHECK(ckpt.expect("x", {2, 3}).numel() == 6);
    CHECK_THROWS_WITH_AS(ckpt.expect("x", {3, 2}),
                         (ckpt.context() + "tensor 'x': expected shape [3, 2], found [2, 3]").c_str(), ShapeError);
    CHECK_THROWS_WITH_AS(ckpt.expect("y", {1}), (ckpt.context() + "missing tensor 'y'").c_str(), ShapeError);
}

// ------------------------------------------------------------------ validator

TEST_CASE("the validator reports every missing tensor, wrong shape and wrong dtype at once") {
    TempDir dir;
    SafetensorsWriter w;
    w.add("embed", {10, 4}, std::vector<float>(40));
    w.add("norm", {5}, std::vector<float>(5));
    w.add("table", {10}, std::vector<float>(10));
    w.add("extra", {1}, std::vector<float>(1));
    w.write(dir / "model.safetensors");
    const auto ckpt = Checkpoint::open(dir.path());
    CheckpointValidator v(ckpt);
    CHECK(v.expect("embed", {10, 4}) != nullptr);
    CHECK(v.expect("norm", {4}) == nullptr);
    CHECK(v.expect("layers.0.q", {4, 4}) == nullptr);
    CHECK(v.expect_dtype_in("layers.0.q", {DType::f32}) == nullptr);  // already reported missing: once only
    CHECK(v.expect_dtype_in("table", {DType::i64, DType::i32}) == nullptr);
    CHECK(v.expect_dtype_in("embed", {DType::f32, DType::bf16}) != nullptr);
    v.note("num_experts 3 does not divide 10");
    CHECK_FALSE(v.ok());
    CHECK(v.problems().size() == 4);
    CHECK(v.unexpected_names() == std::vector<std::string>{"extra"});
    CHECK_THROWS_WITH_AS(v.throw_if_errors("TinyModel"),
                         ("TinyModel: checkpoint '" + dir.path().string() +
                          "' has 4 problems:\n"
                          "  tensor 'norm': expected shape [4], found [5]\n"
                          "  missing tensor 'layers.0.q'\n"
                          "  tensor 'table': dtype F32 is not one of I64, I32\n"
                          "  num_experts 3 does not divide 10")
                             .c_str(),
                         ShapeError);
}

TEST_CASE("the validator is silent when everything matches, and raises FormatError for file problems") {
    TempDir dir;
    SafetensorsWriter w;
    w.add("a", {2}, std::vector<float>(2));
    w.write(dir / "model.safetensors");
    const auto ckpt = Checkpoint::open(dir.path());
    CheckpointValidator good(ckpt);
    good.expect("a", {2});
    CHECK(good.ok());
    CHECK_NOTHROW(good.throw_if_errors("M"));
    CheckpointValidator bad(ckpt);
    bad.note_format("token_to_expert copies differ between layers 0 and 3");
    CHECK_THROWS_AS(bad.throw_if_errors("M"), FormatError);
}

// ------------------------------------------------------------------ sharded checkpoints

TEST_CASE("sharded writing splits tensors by size and the checkpoint reads them all back") {
    TempDir dir;
    SafetensorsWriter w;
    std::vector<std::vector<float>> data;
    for (int i = 0; i < 7; ++i) {
        data.push_back(cpx::testing::random_normal(10 + static_cast<std::size_t>(i), 100 + static_cast<std::uint64_t>(i)));
        w.add(tensor_name(i), {static_cast<std::int64_t>(data.back().size())}, data.back());
    }
    w.add("big", {64}, std::vector<float>(64, 2.0f));  // 256 bytes: more than a shard, gets one of its own
    const auto shards = w.write_sharded(dir.path(), 120);
    // tI holds 40 + 4I bytes. In name order, at most 120 bytes a shard: big | t0 t1 | t2 t3 | t4 t5 | t6.
    REQUIRE(shards.size() == 5);
    CHECK(shards[0].filename() == "model-00001-of-00005.safetensors");
    CHECK(shards[4].filename() == "model-00005-of-00005.safetensors");
    CHECK(SafetensorsFile::open(shards[0]).names() == std::vector<std::string>{"big"});
    CHECK(SafetensorsFile::open(shards[1]).names() == std::vector<std::string>{"t0", "t1"});

    const Json index = cpx::io::parse_json(cpx::io::read_text_file(dir / "model.safetensors.index.json"));
    CHECK(index.find("metadata")->find("total_size")->as_int64() == static_cast<std::int64_t>(w.data_bytes()));
    const auto& map = index.find("weight_map")->as_object();
    REQUIRE(map.size() == 8);
    CHECK(map[0].first == "big");
    CHECK(map[0].second.as_string() == "model-00001-of-00005.safetensors");
    CHECK(map[7].first == "t6");
    CHECK(map[7].second.as_string() == "model-00005-of-00005.safetensors");

    for (const auto& opened : {Checkpoint::open(dir.path()), Checkpoint::open(dir / "model.safetensors.index.json")}) {
        CHECK(opened.sharded());
        CHECK(opened.files().size() == 5);
        CHECK(opened.size() == 8);
        for (int i = 0; i < 7; ++i) CHECK(opened.read_vector<float>(tensor_name(i)) == data[static_cast<std::size_t>(i)]);
        CHECK(opened.read_vector<float>("big") == std::vector<float>(64, 2.0f));
    }
}

TEST_CASE("a sharded checkpoint with a missing shard or a tensor missing from its shard is rejected") {
    TempDir dir;
    SafetensorsWriter w;
    for (int i = 0; i < 4; ++i) w.add(tensor_name(i), {4}, std::vector<float>(4, static_cast<float>(i)));
    w.write_sharded(dir.path(), 32);  // two tensors per shard
    const auto index_path = dir / "model.safetensors.index.json";
    const std::string where = "shard index '" + index_path.string() + "'";
    const std::string good_index = cpx::io::read_text_file(index_path);

    SUBCASE("a shard file is gone") {
        std::filesystem::remove(dir / "model-00002-of-00002.safetensors");
        CHECK_THROWS_WITH_AS(Checkpoint::open(dir.path()),
                             (where + ": shard 'model-00002-of-00002.safetensors' (holding tensor 't2') does not exist")
                                 .c_str(),
                             FormatError);
    }
    SUBCASE("the index maps tensors to shards that do not hold them") {
        dir.write("model.safetensors.index.json",
                  R"({"weight_map": {"t0": "model-00001-of-00002.safetensors", "t3": "model-00001-of-00002.safetensors",)"
                  R"( "t9": "model-00002-of-00002.safetensors"}})");
        CHECK_THROWS_WITH_AS(Checkpoint::open(dir.path()),
                             (where + ": 2 mapped tensor(s) missing from their shards:\n"
                                      "  't3' is not in model-00001-of-00002.safetensors\n"
                                      "  't9' is not in model-00002-of-00002.safetensors")
                                 .c_str(),
                             FormatError);
    }
    SUBCASE("the index names a shard outside the directory") {
        dir.write("model.safetensors.index.json", R"({"weight_map": {"t0": "../model-00001-of-00002.safetensors"}})");
        CHECK_THROWS_WITH_AS(Checkpoint::open(dir.path()),
                             (where + ": shard '../model-00001-of-00002.safetensors' of tensor 't0' must be a relative "
                                      "path inside the checkpoint directory")
                                 .c_str(),
                             FormatError);
    }
    SUBCASE("the index has no weight_map") {
        dir.write("model.safetensors.index.json", R"({"metadata": {}})");
        CHECK_THROWS_WITH_AS(Checkpoint::open(dir.path()),
                             (where + ": needs a \"weight_map\" object {tensor name: shard file}").c_str(), FormatError);
    }
    SUBCASE("the index is not JSON") {
        dir.write("model.safetensors.index.json", "{\"weight_map\": ");
        CHECK_THROWS_WITH_AS(Checkpoint::open(dir.path()),
                             (index_path.string() + ":1:16: syntax error while parsing value - unexpected end of input; "
                                                     "expected '[', '{', or a literal")
                                 .c_str(),
                             FormatError);
    }
    SUBCASE("a shard is corrupt") {
        dir.write("model-00001-of-00002.safetensors", std::string_view("\x02\0\0\0\0\0\0\0{}x", 11));
        CHECK_THROWS_AS(Checkpoint::open(dir.path()), FormatError);
    }
    SUBCASE("tensors of a shard that the index does not map are not part of the checkpoint") {
        dir.write("model.safetensors.index.json",
                  R"({"weight_map": {"t0": "model-00001-of-00002.safetensors"}})");
        const auto ckpt = Checkpoint::open(dir.path());
        CHECK(ckpt.names() == std::vector<std::string>{"t0"});
        CHECK_FALSE(ckpt.contains("t1"));
    }
    CHECK(good_index.find("\"weight_map\"") != std::string::npos);
}
