// Memory-mapped files and the validating safetensors reader, on byte buffers
// built by hand here (independently of the library's writer).
#include <doctest/doctest.h>

#include <cpx/io/mapped_file.hpp>
#include <cpx/io/safetensors.hpp>

#include "temp_dir.hpp"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/stat.h>
#ifdef __linux__
#include <fstream>
#include <sys/resource.h>
#include <unistd.h>
#endif

using cpx::DType;
using cpx::Error;
using cpx::FormatError;
using cpx::ShapeError;
using cpx::io::MappedFile;
using cpx::io::SafetensorsFile;
using cpx::testing::TempDir;

namespace {

std::vector<std::byte> le_u64(std::uint64_t v) {
    std::vector<std::byte> out(8);
    for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
    return out;
}

/// A safetensors file: 8-byte little-endian header length (the true one unless
/// `declared_length` lies), the header text, then `data`.
std::vector<std::byte> safetensors_bytes(std::string_view header, const std::vector<std::byte>& data,
                                         std::optional<std::uint64_t> declared_length = {}) {
    std::vector<std::byte> out = le_u64(declared_length.value_or(header.size()));
    for (char c : header) out.push_back(static_cast<std::byte>(c));
    out.insert(out.end(), data.begin(), data.end());
    return out;
}

std::vector<std::byte> iota_bytes(std::size_t n) {
    std::vector<std::byte> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(i * 7 + 3);
    return v;
}

/// The message of the exception opening `bytes` as a safetensors file raises.
std::string open_error(const TempDir& dir, const std::vector<std::byte>& bytes, std::string& path_out) {
    const auto path = dir.write("bad.safetensors", bytes);
    path_out = path.string();
    try {
        SafetensorsFile::open(path);
    } catch (const FormatError& e) {
        return e.what();
    }
    return "(no FormatError)";
}

}  // namespace

// ------------------------------------------------------------------ MappedFile

TEST_CASE("a mapped file shows exactly the file's bytes, at an address that survives moves") {
    TempDir dir;
    const auto content = iota_bytes(1000);
    const auto path = dir.write("data.bin", content);
    MappedFile f(path);
    REQUIRE(f.size() == 1000);
    CHECK(std::memcmp(f.bytes().data(), content.data(), 1000) == 0);
    CHECK(f.path() == path);
    const std::byte* before = f.bytes().data();
    MappedFile moved(std::move(f));
    CHECK(moved.bytes().data() == before);
    CHECK(f.empty());
    MappedFile assigned;
    assigned = std::move(moved);
    CHECK(assigned.bytes().data() == before);
    CHECK(assigned.size() == 1000);
}

TEST_CASE("an empty file maps to an empty span") {
    TempDir dir;
    const MappedFile f(dir.write("empty.bin", std::string_view{}));
    CHECK(f.size() == 0);
    CHECK(f.bytes().empty());
}

TEST_CASE("mapping a missing file or a directory fails with an error naming the path") {
    TempDir dir;
    const auto missing = dir / "nope.safetensors";
    CHECK_THROWS_WITH_AS(MappedFile{missing}, ("cannot open '" + missing.string() + "': No such file or directory").c_str(),
                         Error);
    CHECK_THROWS_WITH_AS(MappedFile{dir.path()},
                         ("cannot open '" + dir.path().string() + "': it is a directory, not a file").c_str(), Error);
}

TEST_CASE("mapping a FIFO fails instead of waiting for a writer") {
    TempDir dir;
    const auto fifo = dir / "pipe";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH_AS(MappedFile{fifo}, ("cannot open '" + fifo.string() + "': not a regular file").c_str(), Error);
}

#ifdef __linux__
TEST_CASE("a file the process has no address space left for fails to map, naming the path and the reason") {
    // A 1 GiB sparse file (no disk blocks) mapped under an address-space limit 256 MiB above what
    // the process uses now: room for the test's own allocations, not for the mapping.
    TempDir dir;
    const auto path = dir.write("large.bin", std::vector<std::byte>(1));
    std::filesystem::resize_file(path, std::uintmax_t{1} << 30);
    std::uint64_t pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    REQUIRE(pages > 0);
    rlimit old{};
    REQUIRE(::getrlimit(RLIMIT_AS, &old) == 0);
    const rlim_t cap = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + (rlim_t{256} << 20);
    if (old.rlim_cur != RLIM_INFINITY && old.rlim_cur < cap) {
        MESSAGE("the address space is already limited below what this test needs: skipped");
        return;
    }
    rlimit capped = old;
    capped.rlim_cur = cap;
    REQUIRE(::setrlimit(RLIMIT_AS, &capped) == 0);
    std::string message = "(no error)";
    try {
        const MappedFile file(path);
    } catch (const Error& e) {
        message = e.what();
    }
    REQUIRE(::setrlimit(RLIMIT_AS, &old) == 0);
    CHECK(message == "cannot open '" + path.string() + "': mmap failed: " + std::strerror(ENOMEM));
}
#endif

// ------------------------------------------------------------------ reading valid files

TEST_CASE("a hand-built file opens with names in header order, dtypes, shapes, bytes and metadata") {
    TempDir dir;
    const auto data = iota_bytes(4 * 6 + 2 * 4 + 8 * 2);
    const std::string header =
        R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
        R"("__metadata__":{"format":"pt","note":"x"},)"
        R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},)"
        R"("ids":{"dtype":"I64","shape":[2],"data_offsets":[32,48]}})";
    const auto f = SafetensorsFile::open(dir.write("m.safetensors", safetensors_bytes(header, data)));
    CHECK(f.names() == std::vector<std::string>{"w", "b", "ids"});
    CHECK(f.size() == 3);
    CHECK(f.data_start() == 8 + header.size());
    const auto* w = f.find("w");
    REQUIRE(w != nullptr);
    CHECK(w->dtype == DType::f32);
    CHECK(w->dtype_name == "F32");
    CHECK(w->shape == std::vector<std::int64_t>{2, 3});
    CHECK(w->numel() == 6);
    CHECK(w->shape_str() == "[2, 3]");
    REQUIRE(w->bytes.size() == 24);
    CHECK(std::memcmp(w->bytes.data(), data.data(), 24) == 0);
    const auto* ids = f.find("ids");
    REQUIRE(ids != nullptr);
    CHECK(ids->dtype == DType::i64);
    CHECK(std::memcmp(ids->bytes.data(), data.data() + 32, 16) == 0);
    CHECK(f.find("b")->dtype == DType::bf16);
    CHECK(f.find("absent") == nullptr);
    REQUIRE(f.metadata().size() == 2);
    CHECK(f.metadata()[0] == std::pair<std::string, std::string>{"format", "pt"});
    CHECK(*f.metadata_value("note") == "x");
    CHECK(f.metadata_value("other") == nullptr);
}

TEST_CASE("scalars, empty tensors and space-padded headers are valid") {
    TempDir dir;
    const std::string header = R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                               R"("e":{"dtype":"F16","shape":[0,5],"data_offsets":[4,4]}}     )";
    const auto f = SafetensorsFile::open(dir.write("m.safetensors", safetensors_bytes(header, iota_bytes(4))));
    CHECK(f.find("s")->numel() == 1);
    CHECK(f.find("s")->shape_str() == "[]");
    CHECK(f.find("e")->numel() == 0);
    CHECK(f.find("e")->bytes.empty());
}

TEST_CASE("valid dtypes the library does not compute with are listed, and reading them fails clearly") {
    TempDir dir;
    const std::string header = R"({"d":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},)"
                               R"("u":{"dtype":"U8","shape":[3],"data_offsets":[16,19]},)"
                               R"("q":{"dtype":"F4","shape":[2],"data_offsets":[19,20]}})";
    const auto f = SafetensorsFile::open(dir.write("m.safetensors", safetensors_bytes(header, iota_bytes(20))));
    const auto* d = f.find("d");
    REQUIRE(d != nullptr);
    CHECK_FALSE(d->known_dtype());
    CHECK(d->dtype == cpx::io::unknown_dtype);
    CHECK(d->dtype != DType::f32);
    CHECK(d->dtype_name == "F64");
    CHECK(f.find("u")->bytes.size() == 3);
    CHECK(f.find("q")->bytes.size() == 1);  // two 4-bit elements share a byte
    std::vector<float> out(2);
    CHECK_THROWS_WITH_AS(cpx::io::read_tensor(*d, std::span<float>(out)),
                         "tensor 'd' has dtype F64, which cannot be read as float (readable: F32, BF16, F16)",
                         ShapeError);
    std::vector<std::int64_t> ints(3);
    CHECK_THROWS_WITH_AS(cpx::io::read_tensor(*f.find("u"), std::span<std::int64_t>(ints)),
                         "tensor 'u' has dtype U8, which cannot be read as int64 (readable: I64, I32)", ShapeError);
}

TEST_CASE("a file written by the reference safetensors implementation reads back the values it was given") {
    // tests/data/io/reference_writer.safetensors: written by the Python package safetensors 0.8.0
    // (safetensors.serialize) from the values below, so reader and writer here are checked
    // against an implementation other than this library's.
    const auto ckpt = cpx::io::Checkpoint::open(std::filesystem::path(CPX_TEST_DATA_DIR) / "io" /
                                                "reference_writer.safetensors");
    CHECK(ckpt.names() == std::vector<std::string>{"bytes", "double", "h16", "ids", "layers.0.b16", "layers.0.w",
                                                   "small"});
    const auto& file = ckpt.files()[0];
    CHECK(*file.metadata_value("format") == "pt");
    CHECK(*file.metadata_value("producer") == "safetensors 0.8.0");

    CHECK(ckpt.expect("layers.0.w", {2, 3}).dtype == DType::f32);
    CHECK(ckpt.read_vector<float>("layers.0.w") == std::vector<float>{0.5f, -1.25f, 3.0e-8f, 65504.0f, -0.0f, 1.0e20f});
    const auto b16 = ckpt.read_vector<cpx::bf16>("layers.0.b16");
    const std::uint16_t b16_bits[] = {0x3f80, 0xc060, 0x3dcd, 0x7f80, 0x0001, 0x8000, 0x7fc1};
    REQUIRE(b16.size() == 7);
    for (std::size_t i = 0; i < 7; ++i) CHECK(b16[i].bits == b16_bits[i]);
    CHECK(ckpt.read_vector<float>("layers.0.b16")[1] == -3.5f);
    CHECK(ckpt.expect("h16", {5, 1}).dtype == DType::f16);
    const auto h16 = ckpt.read_vector<float>("h16");
    CHECK(h16[0] == 1.0f);
    CHECK(h16[1] == 0x1p-24f);  // the smallest fp16 subnormal
    CHECK(h16[2] == 65504.0f);
    CHECK(h16[3] == -std::numeric_limits<float>::infinity());
    CHECK(ckpt.read_vector<cpx::fp16>("h16")[4].bits == 0x3554);  // 0.333 rounded to fp16 (0.33300781)
    CHECK(ckpt.read_vector<std::int64_t>("ids") ==
          std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min(), std::int64_t{1} << 40, 7});
    CHECK(ckpt.read_vector<std::int32_t>("small") == std::vector<std::int32_t>{-5, 2147483647});
    CHECK(ckpt.get("double").dtype_name == "F64");
    CHECK(ckpt.get("double").shape.empty());
    CHECK(ckpt.get("bytes").dtype_name == "U8");
    CHECK_FALSE(ckpt.get("bytes").known_dtype());
}

// ------------------------------------------------------------------ malformed files

TEST_CASE("every malformed file is rejected with a message naming the file and the tensor") {
    TempDir dir;
    struct Case {
        const char* what;
        std::vector<std::byte> bytes;
        std::string message;  // after "safetensors file '<path>': "
    };
    const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
    const Case cases[] = {
        {"shorter than the length field", {std::byte{1}, std::byte{2}, std::byte{3}},
         "truncated: the file has 3 bytes, fewer than the 8-byte header length"},
        {"header length beyond the file size", safetensors_bytes("{}", {}, 1000),
         "header length 1000 exceeds the 2 bytes that follow it (file truncated, or not a safetensors file)"},
        {"absurd header length", safetensors_bytes("{}", {}, std::uint64_t{1} << 63),
         "header length 9223372036854775808 exceeds the 2 bytes that follow it (file truncated, or not a "
         "safetensors file)"},
        {"header not JSON", safetensors_bytes("{\"a\": [1, 2}", {}), ""},
        {"header not an object", safetensors_bytes("[]", {}), "header must be a JSON object, found array"},
        {"unknown dtype", safetensors_bytes(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", iota_bytes(8)),
         "tensor 'a': unknown dtype 'Q4'"},
        {"dtype not a string", safetensors_bytes(R"({"a":{"dtype":32,"shape":[2],"data_offsets":[0,8]}})", iota_bytes(8)),
         "tensor 'a': dtype must be a string, found number"},
        {"missing data_offsets", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2]}})", iota_bytes(8)),
         "tensor 'a': needs dtype, shape and data_offsets"},
        {"unexpected entry key",
         safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"strides":[1]}})", iota_bytes(8)),
         "tensor 'a': unexpected key 'strides'"},
        {"entry not an object", safetensors_bytes(R"({"a":[1]})", {}), "tensor 'a': entry must be an object, found array"},
        {"negative dimension", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,8]}})", iota_bytes(8)),
         "tensor 'a': negative dimension -1 in shape [2,-1]"},
        {"fractional dimension", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", iota_bytes(8)),
         "tensor 'a': shape must hold integers, found 2.0"},
        {"numel overflow",
         safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", iota_bytes(8)),
         "tensor 'a': element count of shape [4294967296, 4294967296] overflows 64 bits"},
        {"byte size overflow",
         safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]}})", iota_bytes(8)),
         "tensor 'a': element count of shape [4611686018427387904] overflows 64 bits"},
        {"shape and offsets disagree", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", iota_bytes(8)),
         "tensor 'a': shape [3] of F32 needs 12 bytes but data_offsets [0, 8] span 8"},
        {"offsets past the data region (a lying header)",
         safetensors_bytes(R"({"a":{"dtype":"F32","shape":[250000000000],"data_offsets":[0,1000000000000]}})", iota_bytes(8)),
         "tensor 'a': data_offsets [0, 1000000000000] reach past the end of the data region (8 bytes): the file is "
         "truncated or its header is wrong"},
        {"offsets in reverse", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", iota_bytes(8)),
         "tensor 'a': data_offsets [8, 0] end before they begin"},
        {"negative offset", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", iota_bytes(8)),
         "tensor 'a': data_offsets must hold non-negative integers, found -8"},
        {"three offsets", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", iota_bytes(8)),
         "tensor 'a': data_offsets must be [begin, end], found [0,4,8]"},
        {"overlapping tensors",
         safetensors_bytes("{" + ok_entry + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", iota_bytes(12)),
         "tensors 'a' and 'b' overlap: 'b' begins at byte 4 of the data region, before 'a' ends at 8"},
        {"gap between tensors",
         safetensors_bytes("{" + ok_entry + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})", iota_bytes(16)),
         "bytes [8, 12) of the data region belong to no tensor (before 'b')"},
        {"trailing bytes", safetensors_bytes("{" + ok_entry + "}", iota_bytes(10)),
         "the data region has 10 bytes but the tensors cover only 8"},
        {"truncated data", safetensors_bytes("{" + ok_entry + "}", iota_bytes(5)),
         "tensor 'a': data_offsets [0, 8] reach past the end of the data region (5 bytes): the file is truncated or "
         "its header is wrong"},
        {"metadata not strings", safetensors_bytes(R"({"__metadata__":{"step":100}})", {}),
         "__metadata__ value of 'step' must be a string, found number"},
        {"sub-byte dtype that does not fill whole bytes",
         safetensors_bytes(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", iota_bytes(2)),
         "tensor 'a': 3 elements of F4 do not fill whole bytes"},
        {"duplicate tensor names",
         safetensors_bytes("{" + ok_entry + "," + ok_entry + "}", iota_bytes(8)), ""},
    };
    for (const Case& c : cases) {
        CAPTURE(c.what);
        std::string path;
        const std::string msg = open_error(dir, c.bytes, path);
        const std::string prefix = "safetensors file '" + path + "': ";
        if (c.message.empty()) {  // JSON errors: check the prefix and the parser's line:column
            CHECK(msg.rfind(prefix + "header is not valid JSON: " + path + " (header):1:", 0) == 0);
        } else {
            CHECK(msg == prefix + c.message);
        }
    }
}

TEST_CASE("a header longer than the reader's limit is refused before it is parsed") {
    // A sparse file (its length field, then a hole): the declared header fits the file but is
    // over max_header_bytes, which bounds what a hostile file can make the JSON parser hold.
    TempDir dir;
    const std::uint64_t header_len = SafetensorsFile::max_header_bytes + 1;
    const auto path = dir.write("huge_header.safetensors", le_u64(header_len));
    std::filesystem::resize_file(path, 8 + header_len);
    std::string message;
    try {
        SafetensorsFile::open(path);
    } catch (const FormatError& e) {
        message = e.what();
    }
    CHECK(message == "safetensors file '" + path.string() + "': header length " + std::to_string(header_len) +
                         " exceeds the limit of " + std::to_string(SafetensorsFile::max_header_bytes) + " bytes");
}

TEST_CASE("a valid file cut short anywhere is rejected, never read out of bounds") {
    TempDir dir;
    const std::string header = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                               R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]}})";
    const auto full = safetensors_bytes(header, iota_bytes(22));
    REQUIRE_NOTHROW(SafetensorsFile::open(dir.write("full.safetensors", full)));
    for (std::size_t keep = 0; keep < full.size(); ++keep) {
        CAPTURE(keep);
        const std::vector<std::byte> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(keep));
        CHECK_THROWS_AS(SafetensorsFile::open(dir.write("cut.safetensors", cut)), FormatError);
    }
}
