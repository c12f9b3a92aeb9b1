#pragma once
// Errors the library reports. Input validation never uses assert: every bad
// input becomes an exception whose message names the offending thing.

#include <stdexcept>
#include <string>
#include <sstream>
#include <utility>

namespace cpx {

/// Base of every error the library throws.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Shapes, dtypes or sizes that do not match the compiled configuration.
class ShapeError : public Error { public: using Error::Error; };

/// Token ids outside the vocabulary, sequences past the context, caches too small.
class InputError : public Error { public: using Error::Error; };

/// Malformed, truncated or inconsistent files (checkpoints, frequency tables, JSON).
class FormatError : public Error { public: using Error::Error; };

/// Failures reported by the CUDA runtime or its libraries.
class CudaError : public Error { public: using Error::Error; };

namespace detail {
template <class... Parts>
std::string concat(Parts&&... parts) {
    std::ostringstream out;
    (out << ... << std::forward<Parts>(parts));
    return out.str();
}
}  // namespace detail

/// Throws `E` with the parts streamed into one message.
template <class E = Error, class... Parts>
[[noreturn]] void raise(Parts&&... parts) {
    throw E(detail::concat(std::forward<Parts>(parts)...));
}

/// Throws `E` with the message parts when `condition` is false.
template <class E = Error, class... Parts>
void require(bool condition, Parts&&... parts) {
    if (!condition) raise<E>(std::forward<Parts>(parts)...);
}

}  // namespace cpx
