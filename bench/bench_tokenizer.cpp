// Tokenizer throughput on one thread: encoding and decoding a text file with a
// tokenizer.json (default: the demo model's tokenizer on its validation text),
// with the piece cache warm (steady state, as in a server) and cold (cleared
// before every pass). scripts/bench_tokenizer.sh runs this and the reference
// implementation (the `tokenizers` package, bench/python/tokenizer_peer.py) on the
// same file, one after the other. Environment: CPX_TOKENIZER (a tokenizer.json or
// its directory), CPX_TOKENIZER_TEXT (the text file).
#include <benchmark/benchmark.h>

#include <cpx/text/tokenizer.hpp>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

namespace {

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v && *v ? v : fallback;
}

const std::string& text() {
    static const std::string t = [] {
        const std::string path = env_or("CPX_TOKENIZER_TEXT", CPX_SOURCE_DIR "/data/kjv/validation.txt");
        std::ifstream in(path, std::ios::binary);
        if (!in) throw cpx::Error("cannot open " + path);
        return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }();
    return t;
}

const cpx::text::Tokenizer& tokenizer() {
    static const cpx::text::Tokenizer t =
        cpx::text::Tokenizer::from_file(env_or("CPX_TOKENIZER", CPX_SOURCE_DIR "/data/kjv/deep/tokenizer.json"));
    return t;
}

void set_rates(benchmark::State& state, std::size_t tokens) {
    state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens) * state.iterations(), benchmark::Counter::kIsRate);
    state.counters["MB/s"] = benchmark::Counter(static_cast<double>(text().size()) * state.iterations() / 1e6,
                                                benchmark::Counter::kIsRate);
}

void encode_warm(benchmark::State& state) {
    std::size_t n = tokenizer().encode(text(), false).size();
    for (auto _ : state) benchmark::DoNotOptimize(n = tokenizer().encode(text(), false).size());
    set_rates(state, n);
}

void encode_cold(benchmark::State& state) {
    std::size_t n = 0;
    for (auto _ : state) {
        tokenizer().clear_cache();
        benchmark::DoNotOptimize(n = tokenizer().encode(text(), false).size());
    }
    set_rates(state, n);
}

void decode(benchmark::State& state) {
    const auto ids = tokenizer().encode(text(), false);
    for (auto _ : state) benchmark::DoNotOptimize(tokenizer().decode(ids).size());
    set_rates(state, ids.size());
}

}  // namespace

BENCHMARK(encode_warm)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(encode_cold)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(decode)->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
    benchmark::AddCustomContext("tokenizer", env_or("CPX_TOKENIZER", "data/kjv/deep/tokenizer.json"));
    benchmark::AddCustomContext("text", env_or("CPX_TOKENIZER_TEXT", "data/kjv/validation.txt"));
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
