// A safetensors file. Opening either fails with a cpx::Error or yields tensors
// whose bytes lie inside the mapping after the header, sized exactly by shape
// and dtype; whatever opens is written again by SafetensorsWriter and re-opens
// to the same names, dtypes, shapes, bytes and metadata.
#include <cpx/io/safetensors_file.hpp>
#include <cpx/io/safetensors_writer.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::optional<cpx::io::SafetensorsFile> f;
    try {
        f.emplace(cpx::io::SafetensorsFile::open(cpx_fuzz::write_file("input.safetensors", data, size)));
    } catch (const cpx::Error&) {
        return 0;  // rejected with a message: fine
    }
    const auto all = f->bytes();
    CPX_FUZZ_CHECK(all.size() == size && f->data_start() >= 8 && f->data_start() <= size);
    cpx::io::SafetensorsWriter writer;
    for (const auto& t : f->tensors()) {
        CPX_FUZZ_CHECK(f->find(t.name) == &t);
        CPX_FUZZ_CHECK(t.bytes.empty() || (t.bytes.data() >= all.data() + f->data_start() &&
                                           t.bytes.data() + t.bytes.size() <= all.data() + all.size()));
        writer.add_raw(t.name, t.dtype_name, t.shape, t.bytes);
    }
    for (const auto& [k, v] : f->metadata()) writer.add_metadata(k, v);
    const auto copy = cpx_fuzz::scratch() / "copy.safetensors";
    writer.write(copy);
    const auto g = cpx::io::SafetensorsFile::open(copy);
    CPX_FUZZ_CHECK(g.size() == f->size() && g.metadata().size() == f->metadata().size());
    for (const auto& t : f->tensors()) {
        const auto* u = g.find(t.name);
        CPX_FUZZ_CHECK(u && u->shape == t.shape && u->dtype_name == t.dtype_name);
        CPX_FUZZ_CHECK(std::equal(t.bytes.begin(), t.bytes.end(), u->bytes.begin(), u->bytes.end()));
    }
    for (const auto& [k, v] : f->metadata()) CPX_FUZZ_CHECK(g.metadata_value(k) && *g.metadata_value(k) == v);
    return 0;
}
