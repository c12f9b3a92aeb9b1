// A sharded checkpoint's model.safetensors.index.json, next to two fixed valid
// shards. Opening either fails with a cpx::Error or maps every name it lists
// to a tensor of the shard it names, readable as float when its dtype allows.
#include <cpx/io/checkpoint.hpp>
#include <cpx/io/safetensors_writer.hpp>

#include <cstdint>
#include <vector>

#include "fuzz_support.hpp"

namespace {
const std::filesystem::path& checkpoint_dir() {
    static const std::filesystem::path dir = [] {
        const auto d = cpx_fuzz::scratch() / "sharded";
        std::filesystem::create_directories(d);
        cpx::io::SafetensorsWriter a, b;
        a.add("a.weight", {2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
        a.add("a.bias", {3}, std::vector<float>{0.5f, -1, 2});
        b.add("b.table", {4}, std::vector<std::int64_t>{0, 1, 2, 3});
        a.write(d / "model-00001-of-00002.safetensors");
        b.write(d / "model-00002-of-00002.safetensors");
        return d;
    }();
    return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto& dir = checkpoint_dir();
    {
        std::ofstream out(dir / "model.safetensors.index.json", std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    try {
        const auto ckpt = cpx::io::Checkpoint::open(dir);
        CPX_FUZZ_CHECK(ckpt.sharded());
        for (const std::string& name : ckpt.names()) {
            const auto& t = ckpt.get(name);
            CPX_FUZZ_CHECK(t.name == name);
            if (t.dtype == cpx::DType::f32) {
                const auto v = ckpt.read_vector<float>(name);
                CPX_FUZZ_CHECK(static_cast<std::int64_t>(v.size()) == t.numel());
            }
        }
    } catch (const cpx::Error&) {
    }
    return 0;
}
