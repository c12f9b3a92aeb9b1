// The .npy reader and writer against files written by numpy itself
// (tests/data/npy, made by make_npy_fixtures.py there).
#include <doctest/doctest.h>

#include <cpx/io/npy.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "temp_dir.hpp"

using namespace cpx::io;

namespace {
const std::string dir = CPX_TEST_DATA_DIR "/npy/";

std::vector<unsigned char> file_bytes(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::filesystem::path temp_path(const std::string& name) {
    return std::filesystem::temp_directory_path() / ("cpx_test_npy_" + name);
}
}  // namespace

TEST_CASE("reads numpy's 1-D int64, int32, float32 and float64 arrays") {
    const NpyArray i64 = read_npy(dir + "counts_i64.npy");
    CHECK(i64.type == NpyType::i64);
    CHECK(i64.shape == std::vector<std::int64_t>{4});
    CHECK(i64.values<std::int64_t>() == std::vector<std::int64_t>{5, 0, 12, 7});
    CHECK(read_npy(dir + "counts_i32.npy").values<std::int32_t>() == std::vector<std::int32_t>{5, 0, 12, 7});
    CHECK(read_npy(dir + "counts_f32.npy").values<float>() == std::vector<float>{5, 0, 12, 7});
    CHECK(read_npy(dir + "counts_f64.npy").values<double>() == std::vector<double>{5, 0, 12, 7});
}

TEST_CASE("reads a 2-D float32 array in row-major order") {
    const NpyArray a = read_npy(dir + "logits_f32_2x3.npy");
    CHECK(a.shape == std::vector<std::int64_t>{2, 3});
    CHECK(a.values<float>() == std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f});
}

TEST_CASE("reads format version 2.0 and empty arrays") {
    CHECK(read_npy(dir + "counts_i64_v2.npy").values<std::int64_t>() == std::vector<std::int64_t>{5, 0, 12, 7});
    const NpyArray empty = read_npy(dir + "empty_i64.npy");
    CHECK(empty.shape == std::vector<std::int64_t>{0});
    CHECK(empty.elements() == 0);
}

TEST_CASE("the writer produces numpy's exact bytes for 1-D int64 and 2-D float32") {
    const std::vector<std::int64_t> counts{5, 0, 12, 7};
    const std::int64_t n = 4;
    CHECK(encode_npy<std::int64_t>(counts, std::span<const std::int64_t>(&n, 1)) ==
          file_bytes(dir + "counts_i64.npy"));
    const std::vector<float> logits{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
    const std::vector<std::int64_t> shape{2, 3};
    CHECK(encode_npy<float>(logits, shape) == file_bytes(dir + "logits_f32_2x3.npy"));
}

TEST_CASE("write_npy then read_npy round-trips float32 logits [T, V]") {
    const std::size_t tokens = 3, vocab = 37;
    std::vector<float> logits(tokens * vocab);
    for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i) * 0.25f - 3.0f;
    const auto path = temp_path("logits.npy");
    write_npy<float>(path, logits, {static_cast<std::int64_t>(tokens), static_cast<std::int64_t>(vocab)});
    const NpyArray back = read_npy(path);
    std::filesystem::remove(path);
    CHECK(back.shape == std::vector<std::int64_t>{3, 37});
    CHECK(back.values<float>() == logits);
    // The data starts on a 64-byte boundary, as numpy lays it out.
    CHECK((encode_npy<float>(logits, std::vector<std::int64_t>{3, 37}).size() - logits.size() * 4) % 64 == 0);
}

TEST_CASE("the writer checks that the shape matches the data") {
    const std::vector<double> v(5, 1.0);
    CHECK_THROWS_WITH_AS(encode_npy<double>(v, std::vector<std::int64_t>{2, 3}),
                         "npy: the shape holds 6 elements but 5 were given", cpx::ShapeError);
}

TEST_CASE("values<T> refuses a type other than the stored one") {
    CHECK_THROWS_WITH_AS(read_npy(dir + "counts_f32.npy").values<double>("counts"),
                         "counts: holds dtype '<f4', not the requested '<f8'", cpx::FormatError);
}

TEST_CASE("unsupported layouts and dtypes are rejected with their reason") {
    CHECK_THROWS_WITH_AS(read_npy(dir + "big_endian_i8.npy"),
                         doctest::Contains("big-endian dtype '>i8' is not supported"), cpx::FormatError);
    CHECK_THROWS_WITH_AS(read_npy(dir + "fortran_f32_2x3.npy"),
                         doctest::Contains("Fortran-order arrays are not supported"), cpx::FormatError);
    CHECK_THROWS_WITH_AS(read_npy(dir + "uint8.npy"), doctest::Contains("unsupported dtype '|u1'"), cpx::FormatError);
}

TEST_CASE("damaged files are rejected: magic, truncation, trailing bytes, header syntax") {
    const std::vector<unsigned char> good = file_bytes(dir + "counts_i64.npy");
    std::vector<unsigned char> bad = good;
    bad[1] = 'X';
    CHECK_THROWS_WITH_AS(parse_npy(bad, "x.npy"), "x.npy: not a .npy file (missing the \\x93NUMPY magic)",
                         cpx::FormatError);
    bad = good;
    bad.pop_back();
    CHECK_THROWS_WITH_AS(parse_npy(bad, "x.npy"), "x.npy: truncated data: the shape needs 32 bytes, the file has 31",
                         cpx::FormatError);
    bad = good;
    bad.push_back(0);
    CHECK_THROWS_WITH_AS(parse_npy(bad, "x.npy"), "x.npy: 1 unexpected bytes after the 32 bytes of data",
                         cpx::FormatError);
    bad = good;
    bad.resize(40);
    CHECK_THROWS_WITH_AS(parse_npy(bad, "x.npy"), doctest::Contains("truncated .npy header"), cpx::FormatError);
    bad = good;
    const std::string key = "'shape'";
    auto it = std::search(bad.begin(), bad.end(), key.begin(), key.end());
    REQUIRE(it != bad.end());
    *(it + 1) = 'z';  // 'zhape': an unknown key
    CHECK_THROWS_WITH_AS(parse_npy(bad, "x.npy"), doctest::Contains("unknown key 'zhape'"), cpx::FormatError);
    bad[6] = 9;
    CHECK_THROWS_WITH_AS(parse_npy(bad, "x.npy"), "x.npy: unsupported .npy format version 9.0", cpx::FormatError);
}

namespace {
/// A version 1.0 .npy file with the given header dictionary (padded as numpy pads it) and
/// `data_bytes` zero bytes of data.
std::vector<unsigned char> npy_with_header(std::string header, std::size_t data_bytes) {
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::string preamble("\x93NUMPY\x01\x00", 8);
    preamble.push_back(static_cast<char>(header.size() & 0xff));
    preamble.push_back(static_cast<char>(header.size() >> 8));
    const std::string bytes = preamble + header;
    // Built from one string: GCC 12 misreads an insert after a braced list as out of bounds.
    std::vector<unsigned char> f(bytes.begin(), bytes.end());
    f.resize(f.size() + data_bytes, 0);
    return f;
}
}  // namespace

TEST_CASE("headers missing a key, with a bad value or an impossible shape are rejected with their reason") {
    // The well-formed header first, so that each failure below is its one change.
    const auto good = parse_npy(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24), "g.npy");
    CHECK(good.shape == std::vector<std::int64_t>{2, 3});
    const auto rejected = [](const std::string& header, const std::string& reason) {
        CAPTURE(header);
        CHECK_THROWS_WITH_AS(parse_npy(npy_with_header(header, 24), "x.npy"), doctest::Contains(reason.c_str()), cpx::FormatError);
    };
    rejected("{'descr': '<f4', 'fortran_order': False, }", "lacks one of 'descr', 'fortran_order', 'shape'");
    rejected("{'fortran_order': False, 'shape': (2, 3), }", "lacks one of 'descr', 'fortran_order', 'shape'");
    rejected("{'descr': '<f4', 'fortran_order': maybe, 'shape': (2, 3), }", "expected True or False");
    rejected("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", "expected a non-negative dimension");
    rejected("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 3), }", "dimension too large");
    rejected("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4611686018427387904), }",
             "shape too large");
    rejected("{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3), }", "expected");
    rejected("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", "bad .npy header");
}

TEST_CASE("a missing file is an error naming it") {
    CHECK_THROWS_WITH_AS(read_npy(dir + "no_such_file.npy"),
                         ("cannot open '" + dir + "no_such_file.npy': No such file or directory").c_str(), cpx::Error);
    CHECK_THROWS_WITH_AS(MappedNpy(dir + "no_such_file.npy"), doctest::Contains("no_such_file.npy"), cpx::Error);
}

TEST_CASE("read_npy reads a pipe (`<(command)`) to its end") {
    const cpx::testing::TempDir folder;
    const std::vector<unsigned char> bytes = file_bytes(dir + "logits_f32_2x3.npy");
    const NpyArray a = cpx::testing::read_through_pipe(
        folder / "logits.fifo", std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
        [](const auto& pipe) { return read_npy(pipe); });
    CHECK(a.shape == std::vector<std::int64_t>{2, 3});
    CHECK(a.values<float>() == std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f});
}

TEST_CASE("parse_npy_view and MappedNpy see the data where it lies; NpyArray owns a copy") {
    const std::vector<float> want{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
    const std::vector<unsigned char> file = file_bytes(dir + "logits_f32_2x3.npy");
    const NpyView view = parse_npy_view(file, "logits.npy");
    CHECK(view.bytes.data() == file.data() + (file.size() - 24));
    CHECK(view.bytes.size() == 24);
    CHECK(view.shape == std::vector<std::int64_t>{2, 3});
    CHECK(view.values<float>() == want);
    const NpyArray copy(view);
    CHECK(copy.bytes.data() != view.bytes.data());
    CHECK(copy.values<float>() == want);

    MappedNpy mapped(dir + "logits_f32_2x3.npy");
    const unsigned char* at = mapped.view().bytes.data();
    const MappedNpy moved(std::move(mapped));  // the mapping moves with the object, the bytes stay put
    CHECK(moved.view().bytes.data() == at);
    CHECK(moved.view().values<float>() == want);
    CHECK(moved.view().shape == read_npy(dir + "logits_f32_2x3.npy").shape);
    CHECK_THROWS_WITH_AS(MappedNpy(dir + "uint8.npy"), doctest::Contains("unsupported dtype '|u1'"), cpx::FormatError);
}
