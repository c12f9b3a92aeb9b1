// Inputs a fuzzer or a hostile user would try, each from a finding of a
// fuzzing pass: tables whose size the file cannot justify, configs with very
// many keys, names with control bytes, symlink loops, unwritable save paths,
// and reads of unsupported dtypes. Each must end in a clear cpx::Error.
#include <doctest/doctest.h>

#include <cpx/config/presets.hpp>
#include <cpx/io/checkpoint.hpp>
#include <cpx/io/complexity_config_json.hpp>
#include <cpx/io/frequency_table.hpp>
#include <cpx/io/safetensors_writer.hpp>
#include <cpx/models/complexity/checkpoint.hpp>
#include <cpx/models/orthogonal_fill.hpp>
#include <cpx/models/prism/checkpoint.hpp>

#include <filesystem>
#include <string>

#include "counted_new.hpp"
#include "error_message.hpp"
#include "temp_dir.hpp"

using namespace cpx;
namespace fs = std::filesystem;

namespace {
using cpx::testing::message_of;
using cpx::testing::TempDir;

bool has_raw_control_bytes(const std::string& s) {
    for (unsigned char c : s)
        if ((c < 0x20 && c != '\n') || c == 0x7f) return true;
    return false;
}
}  // namespace

TEST_CASE("finding 1: a sparse frequency table read without a vocabulary cannot ask for gigabytes") {
    for (const char* text : {"2147483646\t1", "444444425 7", "4194304 1"}) {
        const std::string m = message_of([&] { (void)io::parse_frequency_text(text, "t.txt"); });
        CAPTURE(m);
        CHECK(m.find("t.txt:1: token id") != std::string::npos);
        CHECK(m.find("without a vocabulary size") != std::string::npos);
    }
    // The same ids are fine when the vocabulary says so, and ids below the limit need none.
    CHECK(io::parse_frequency_text("4194303 1", "t.txt").size() == 4194304);
    CHECK(io::parse_frequency_text("9 3", "t.txt", std::size_t{10}).at(9) == 3);
}

TEST_CASE("finding 2: config.json with very many unknown keys reads in linear time") {
    // 400,000 keys: quadratic bookkeeping took minutes here; linear takes a fraction of a second.
    std::string text = "{\"hidden_size\": 64";
    for (int i = 0; i < 400'000; ++i) text += ",\"k" + std::to_string(i) + "\":" + std::to_string(i);
    text += "}";
    const auto config = io::parse_complexity_config(text, "config.json");
    CHECK(config.unrecognized.as_object().size() == 400'000);
    CHECK(config.unrecognized.as_object().back().first == "k399999");
}

TEST_CASE("finding 3: names from files are escaped in messages (control bytes, newlines, NUL)") {
    TempDir dir;
    using C = presets::TinyComplexity;
    save_complexity_checkpoint(ComplexityWeights<C>::random(1), dir.path());
    const std::string evil = std::string("\x1b[2J\nfake line\0tail", 19);
    {
        const auto ckpt = io::Checkpoint::open(dir.path());
        io::SafetensorsWriter w;
        for (const std::string& n : ckpt.names()) {
            const auto& t = ckpt.get(n);
            w.add_raw(n, t.dtype_name, t.shape, t.bytes);
        }
        w.add(evil, {1}, std::vector<float>{1.0f});
        w.write(dir.path() / "next.safetensors");
    }
    fs::rename(dir.path() / "next.safetensors", dir.path() / "model.safetensors");
    const std::string m = message_of([&] { (void)load_complexity_checkpoint<C>(dir.path()); });
    CAPTURE(m);
    CHECK(m.find("unexpected tensor '\\x1b[2J\\nfake line\\x00tail'") != std::string::npos);
    CHECK(!has_raw_control_bytes(m));
    CHECK(m.find('\0') == std::string::npos);
    // A frequency-table line quoted in an error, and a config key.
    const std::string t = message_of([] { (void)io::parse_frequency_text(std::string("1\t2\t\x1b[31m", 8), "t"); });
    CHECK(!has_raw_control_bytes(t));
    const std::string k = message_of([] {
        (void)io::parse_complexity_config(std::string("{\"a\\u001b[2J\": 1, \"a\\u001b[2J\": 2}"), "config.json");
    });
    CAPTURE(k);
    CHECK(k.find("duplicate") != std::string::npos);
    CHECK(!has_raw_control_bytes(k));
}

TEST_CASE("finding 6: a symlink loop in a checkpoint directory is reported as such, not as missing") {
    TempDir dir;
    using C = presets::TinyComplexity;
    save_complexity_checkpoint(ComplexityWeights<C>::random(2), dir.path());
    fs::remove(dir.path() / "model.safetensors");
    fs::create_symlink(dir.path() / "model.safetensors", dir.path() / "model.safetensors");
    std::string m = message_of([&] { (void)io::Checkpoint::open(dir.path()); });
    CAPTURE(m);
    CHECK(m.find("model.safetensors") != std::string::npos);
    CHECK(m.find("symbolic link") != std::string::npos);
    CHECK(m.find("holds neither") == std::string::npos);

    TempDir dir2;
    save_complexity_checkpoint(ComplexityWeights<C>::random(2), dir2.path());
    fs::remove(dir2.path() / "config.json");
    fs::create_symlink(dir2.path() / "config.json", dir2.path() / "config.json");
    m = message_of([&] { (void)load_complexity_checkpoint<C>(dir2.path()); });
    CAPTURE(m);
    CHECK(m.find("config.json") != std::string::npos);
    CHECK(m.find("symbolic link") != std::string::npos);
    CHECK(m.find("has no config.json") == std::string::npos);
    m = message_of([&] { (void)load_prism_checkpoint<presets::TinyPrism>(dir2.path()); });
    CHECK(m.find("symbolic link") != std::string::npos);
}

TEST_CASE("finding 7: saving onto an existing file is a library error naming the path") {
    TempDir dir;
    const fs::path file = dir.path() / "a_file";
    { std::ofstream(file) << "x"; }
    const std::string m = message_of(
        [&] { save_complexity_checkpoint(ComplexityWeights<presets::TinyComplexity>::random(3), file); });
    CAPTURE(m);
    CHECK(m.find("not a cpx::Error") == std::string::npos);
    CHECK(m.find(file.string()) != std::string::npos);
    CHECK(m.find("not a directory") != std::string::npos);
    const std::string p =
        message_of([&] { save_prism_checkpoint(PrismWeights<presets::TinyPrism>::random(3), file); });
    CHECK(p.find("not a cpx::Error") == std::string::npos);
    CHECK(p.find(file.string()) != std::string::npos);
}

TEST_CASE("finding 8: reading a tensor of an unsupported dtype checks the dtype before allocating") {
    TempDir dir;
    io::SafetensorsWriter w;
    std::vector<std::byte> raw(std::size_t{1} << 22);  // 4 Mi U8 elements: 16 MiB as float
    w.add_raw("bytes", "U8", {static_cast<std::int64_t>(raw.size())}, raw);
    w.write(dir.path() / "model.safetensors");
    const auto ckpt = io::Checkpoint::open(dir.path());
    cpx::testing::largest_allocation = 0;
    std::string m;
    try {
        (void)ckpt.read_vector<float>("bytes");
    } catch (const ShapeError& e) {
        m = e.what();
    }
    CHECK(m.find("dtype U8") != std::string::npos);
    CHECK(cpx::testing::largest_allocation.load() < (std::size_t{1} << 20));
}
