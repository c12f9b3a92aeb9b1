#pragma once
// Typed access to the members of a JSON object (a config.json), with errors
// that name the file and the key, and a record of which keys were read so the
// rest can be kept as "unrecognised". A null value reads as absent.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cpx/core/error.hpp"
#include "cpx/io/json.hpp"
#include "cpx/io/mapped_file.hpp"

namespace cpx::io {

class JsonFields {
public:
    /// `source` names the document in messages (a path or "config.json").
    JsonFields(const Json& object, std::string source) : object_(&object), source_(std::move(source)) {
        if (!object.is_object())
            raise<FormatError>(source_, ": expected a JSON object at the top level, found ", object.kind_name());
    }

    /// The raw value of `key` (marked as read), or nullptr when absent.
    const Json* raw(std::string_view key) {
        read_.emplace(key);
        return object_->find(key);
    }

    std::optional<std::int64_t> integer(std::string_view key) {
        const Json* v = present(key);
        if (!v) return std::nullopt;
        if (!v->is_integer()) wrong(key, "an integer", *v);
        return v->as_int64();
    }
    std::optional<double> number(std::string_view key) {
        const Json* v = present(key);
        if (!v) return std::nullopt;
        if (!v->is_number()) wrong(key, "a number", *v);
        return v->as_double();
    }
    std::optional<bool> boolean(std::string_view key) {
        const Json* v = present(key);
        if (!v) return std::nullopt;
        if (!v->is_bool()) wrong(key, "true or false", *v);
        return v->as_bool();
    }
    std::optional<std::string> string(std::string_view key) {
        const Json* v = present(key);
        if (!v) return std::nullopt;
        if (!v->is_string()) wrong(key, "a string", *v);
        return v->as_string();
    }
    /// An object value (null/absent: nullopt).
    std::optional<Json> object(std::string_view key) {
        const Json* v = present(key);
        if (!v) return std::nullopt;
        if (!v->is_object()) wrong(key, "an object", *v);
        return *v;
    }

    /// The members never read, in file order.
    Json unread() const {
        // The source object's keys are unique already: collect, do not re-check each
        // insert (set() would make this quadratic in the number of unknown keys).
        Json::Object rest;
        for (const auto& member : object_->as_object())
            if (!read_.contains(member.first)) rest.push_back(member);
        return Json(std::move(rest));
    }

    [[noreturn]] void wrong(std::string_view key, std::string_view expected, const Json& found) const {
        raise<FormatError>(source_, ": key '", key, "' must be ", expected, ", found ", found.kind_name(), " ",
                           found.dump());
    }
    const std::string& source() const noexcept { return source_; }

private:
    const Json* object_;
    std::string source_;
    std::set<std::string, std::less<>> read_;

    const Json* present(std::string_view key) {
        const Json* v = raw(key);
        return v && !v->is_null() ? v : nullptr;
    }
};

/// Sets `key` of object `o` to the value of `v`, or to null when `v` is empty.
template <class T>
void set_or_null(Json& o, std::string_view key, const std::optional<T>& v) {
    o.set(std::string(key), v ? Json(*v) : Json(nullptr));
}

/// Sets `key` of object `o` only when `v` holds a value.
template <class T>
void set_if(Json& o, std::string_view key, const std::optional<T>& v) {
    if (v) o.set(std::string(key), Json(*v));
}

/// Throws ShapeError "<source> does not match the compiled configuration (N problems):" with one line each.
inline void throw_config_problems(std::string_view source, const std::vector<std::string>& problems) {
    if (problems.empty()) return;
    std::string msg = std::string(source) + " does not match the compiled configuration (" +
                      std::to_string(problems.size()) + (problems.size() == 1 ? " problem):" : " problems):");
    for (const std::string& p : problems) msg += "\n  " + p;
    throw ShapeError(msg);
}

}  // namespace cpx::io
