#pragma once
// Typed access to the members of a JSON object (a config.json), with errors
// that name the file and the key, and a record of which keys were read so the
// rest can be kept as "unrecognised". A null value reads as absent.
//
// A model family's config keys are one table (a tuple of config_key /
// custom_key entries, in the order files list them); read_keys, write_keys and
// key_name walk it, so each key's name is spelled once.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
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

    /// The value of `key` as T (std::int64_t, double, bool, std::string or a Json object).
    template <class T>
    std::optional<T> get(std::string_view key) {
        if constexpr (std::is_same_v<T, std::int64_t>) return integer(key);
        else if constexpr (std::is_same_v<T, double>) return number(key);
        else if constexpr (std::is_same_v<T, bool>) return boolean(key);
        else if constexpr (std::is_same_v<T, std::string>) return string(key);
        else if constexpr (std::is_same_v<T, Json>) return object(key);
        else static_assert(sizeof(T) == 0, "config keys hold int64, double, bool, string or an object");
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

/// A config key held by one optional member of the parsed struct `Config`.
template <class Config, class T>
struct ConfigKey {
    std::string_view name;
    std::optional<T> Config::*member;
    bool null_when_unset;  ///< written as null when unset (a file's own keys), else left out (extensions)
};

/// A key of the family's own files: written, as null when unset.
template <class Config, class T>
constexpr ConfigKey<Config, T> config_key(std::string_view name, std::optional<T> Config::*member) {
    return {name, member, true};
}

/// A key written only when set (an extension, or a family whose files leave unset keys out).
template <class Config, class T>
constexpr ConfigKey<Config, T> key_when_set(std::string_view name, std::optional<T> Config::*member) {
    return {name, member, false};
}

/// Another name for a key (an inference code's spelling): read into the same
/// member, an error when both names are given with different values, never written.
template <class Config, class T>
struct AliasKey {
    std::string_view name;
    std::optional<T> Config::*member;
};

template <class Config, class T>
constexpr AliasKey<Config, T> alias_key(std::string_view name, std::optional<T> Config::*member) {
    return {name, member};
}

/// A key read and written by its own functions (e.g. a nested object), which get its name.
template <class Config>
struct CustomKey {
    std::string_view name;
    void (*read)(JsonFields&, Config&, std::string_view name);
    void (*write)(Json&, const Config&, std::string_view name);
};

template <class Config>
constexpr CustomKey<Config> custom_key(std::string_view name, void (*read)(JsonFields&, Config&, std::string_view),
                                       void (*write)(Json&, const Config&, std::string_view)) {
    return {name, read, write};
}

/// The name of the key the table `keys` stores in `member`.
template <class Keys, class Config, class T>
constexpr std::string_view key_name(const Keys& keys, std::optional<T> Config::*member) {
    std::string_view found;
    std::apply(
        [&](const auto&... k) {
            auto match = [&](const auto& key) {
                if constexpr (std::is_same_v<std::remove_cvref_t<decltype(key)>, ConfigKey<Config, T>>)
                    if (key.member == member) found = key.name;
            };
            (match(k), ...);
        },
        keys);
    if (found.empty()) throw std::logic_error("a config member without a key in its table");
    return found;
}

template <class Config, class T, class Keys>
void read_key(JsonFields& f, Config& c, const ConfigKey<Config, T>& k, const Keys&) {
    c.*k.member = f.get<T>(k.name);
}
template <class Config, class T, class Keys>
void read_key(JsonFields& f, Config& c, const AliasKey<Config, T>& k, const Keys& keys) {
    const std::optional<T> v = f.get<T>(k.name);
    if (!v) return;
    std::optional<T>& primary = c.*k.member;
    if (primary && *primary != *v)
        raise<FormatError>(f.source(), ": ", key_name(keys, k.member), " ", Json(*primary).dump(), " and ", k.name,
                           " ", Json(*v).dump(), " disagree");
    primary = v;
}
template <class Config, class Keys>
void read_key(JsonFields& f, Config& c, const CustomKey<Config>& k, const Keys&) {
    k.read(f, c, k.name);
}
template <class Config, class T>
void write_key(Json& o, const Config& c, const ConfigKey<Config, T>& k) {
    const std::optional<T>& v = c.*k.member;
    if (v) o.set(std::string(k.name), Json(*v));
    else if (k.null_when_unset) o.set(std::string(k.name), Json(nullptr));
}
template <class Config, class T>
void write_key(Json&, const Config&, const AliasKey<Config, T>&) {}
template <class Config>
void write_key(Json& o, const Config& c, const CustomKey<Config>& k) {
    k.write(o, c, k.name);
}

/// Reads every key of the table `keys` from `f` into `c`, in table order.
template <class Config, class Keys>
void read_keys(JsonFields& f, Config& c, const Keys& keys) {
    std::apply([&](const auto&... k) { (read_key(f, c, k, keys), ...); }, keys);
}

/// Writes every key of the table `keys` from `c` into the object `o`, in table order.
template <class Config, class Keys>
void write_keys(Json& o, const Config& c, const Keys& keys) {
    std::apply([&](const auto&... k) { (write_key(o, c, k), ...); }, keys);
}

/// Parses config.json text into `Config` through its key table; keys the table
/// does not know go to `Config::unrecognized`, in file order.
template <class Config, class Keys>
Config parse_config(std::string_view text, std::string_view source, const Keys& keys) {
    const Json doc = parse_json(text, source);
    JsonFields f(doc, std::string(source));
    Config c;
    read_keys(f, c, keys);
    c.unrecognized = f.unread();
    return c;
}

/// The JSON object of `c`: the table's keys in order, then `c.unrecognized`.
template <class Config, class Keys>
Json config_to_json(const Config& c, const Keys& keys) {
    Json o = Json::object();
    write_keys(o, c, keys);
    for (const auto& [k, v] : c.unrecognized.as_object()) o.set(k, v);
    return o;
}

/// The lines of a family's config_mismatches, one per key whose checkpoint value contradicts
/// the compiled configuration or asks for what the library cannot run, in the order checked:
///   "n_head: checkpoint 8, compiled 4"
///   "rope_theta: checkpoint 10000.0<absent_note>, compiled 500000.0"   (the key absent)
///   "num_hidden_layers: absent, compiled 12"                          (a key files must give)
///   "sliding_window: 4096 is not supported (only full causal attention)"
/// `absent_note` says where a missing key's value came from (the family's defaults).
template <class Config, class Keys>
class ConfigComparison {
public:
    ConfigComparison(const Config& c, const Keys& keys, std::string_view absent_note)
        : c_(c), keys_(keys), absent_note_(absent_note) {}

    /// The name of the key stored in `member`.
    template <class T>
    std::string name(std::optional<T> Config::*member) const {
        return std::string(key_name(keys_, member));
    }
    /// What an absent key's line says after its value.
    std::string_view absent_note() const { return absent_note_; }
    /// A value as the lines write it (JSON).
    template <class T>
    static std::string text(const T& v) {
        return Json(v).dump();
    }

    /// "key: checkpoint <found><note>, compiled <compiled>".
    template <class Found, class Compiled>
    void differ(std::string_view key, const Found& found, const Compiled& compiled, std::string_view note = {}) {
        lines_.push_back(std::string(key) + ": checkpoint " + text(found) + std::string(note) + ", compiled " +
                         text(compiled));
    }
    /// The same for the key stored in `member`.
    template <class T, class Found, class Compiled>
    void differ(std::optional<T> Config::*member, const Found& found, const Compiled& compiled,
                std::string_view note = {}) {
        differ(name(member), found, compiled, note);
    }
    /// A key every file must give.
    template <class T>
    void required(std::optional<T> Config::*member, const std::type_identity_t<T>& compiled) {
        const std::optional<T>& v = c_.*member;
        if (!v) lines_.push_back(name(member) + ": absent, compiled " + text(compiled));
        else if (*v != compiled) differ(member, *v, compiled);
    }
    /// A key that takes `fallback` when absent.
    template <class T, class Compiled>
    void compare(std::optional<T> Config::*member, const std::type_identity_t<T>& fallback, const Compiled& compiled) {
        const std::optional<T>& v = c_.*member;
        const T value = v.value_or(fallback);
        if (value != compiled) differ(member, value, compiled, v ? std::string_view{} : absent_note_);
    }
    /// "key: <found> is not supported (<why>)".
    void unsupported(std::string_view key, const Json& found, std::string_view why) {
        lines_.push_back(std::string(key) + ": " + found.dump() + " is not supported (" + std::string(why) + ")");
    }
    /// The same for the key stored in `member`.
    template <class T>
    void unsupported(std::optional<T> Config::*member, const Json& found, std::string_view why) {
        unsupported(name(member), found, why);
    }
    /// A line of the family's own wording.
    void line(std::string text) { lines_.push_back(std::move(text)); }

    std::vector<std::string> lines() && { return std::move(lines_); }

private:
    const Config& c_;
    const Keys& keys_;
    std::string_view absent_note_;
    std::vector<std::string> lines_;
};

/// Throws ShapeError "<source> does not match the compiled configuration (N problems):" with one line each.
inline void throw_config_problems(std::string_view source, const std::vector<std::string>& problems) {
    if (problems.empty()) return;
    std::string msg = std::string(source) + " does not match the compiled configuration (" +
                      std::to_string(problems.size()) + (problems.size() == 1 ? " problem):" : " problems):");
    for (const std::string& p : problems) msg += "\n  " + p;
    throw ShapeError(msg);
}

}  // namespace cpx::io
