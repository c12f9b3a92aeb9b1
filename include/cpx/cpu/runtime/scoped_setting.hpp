#pragma once
// A process-wide kernel choice set for a scope and put back after it: the vector level's cap
// (VectorIsaLimit, cpu/runtime/vector_isa.hpp) and where the decode streams fetch
// (StreamFetchChoice, cpu/kernels/prefetch_lines.hpp), for tests and comparisons.

namespace cpx::cpu {

/// Set(value) for the scope; Set must return the value it replaced.
template <class T, T (*Set)(T)>
class ScopedSetting {
public:
    explicit ScopedSetting(T value) : previous_(Set(value)) {}
    ~ScopedSetting() { Set(previous_); }
    ScopedSetting(const ScopedSetting&) = delete;
    ScopedSetting& operator=(const ScopedSetting&) = delete;

private:
    T previous_;
};

}  // namespace cpx::cpu
