#pragma once
// The message of the cpx::Error a call throws, for tests that check what a
// user would read ("(no exception)" when it throws none; another exception
// type is reported as such).

#include <exception>
#include <string>

#include <cpx/core/error.hpp>

namespace cpx::testing {

template <class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const cpx::Error& e) {
        return e.what();
    } catch (const std::exception& e) {
        return std::string("not a cpx::Error: ") + e.what();
    }
    return "(no exception)";
}

}  // namespace cpx::testing
