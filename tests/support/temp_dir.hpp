#pragma once
// A fresh directory under the system temp folder, removed with its contents
// when the object dies: tests that write files never see each other's output.
// Also: reading a file handed over through a named pipe, as `<(command)` does.

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace cpx::testing {

class TempDir {
public:
    TempDir() {
        static std::atomic<int> counter{0};
        std::random_device rd;
        path_ = std::filesystem::temp_directory_path() /
                ("cpx_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
                 std::to_string(rd()));
        std::filesystem::create_directories(path_);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }

    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

    /// Writes `bytes` to `name` inside the directory and returns its path.
    std::filesystem::path write(std::string_view name, std::span<const std::byte> bytes) const {
        const auto p = path_ / name;
        std::ofstream out(p, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        return p;
    }
    std::filesystem::path write(std::string_view name, std::string_view text) const {
        return write(name, std::as_bytes(std::span<const char>(text.data(), text.size())));
    }

private:
    std::filesystem::path path_;
};

/// reader(pipe) while another thread writes `bytes` into `pipe`, a named pipe made for the call
/// (what a program is given for `<(command)`); the pipe is removed after. reader must open the
/// pipe (the writer waits for it to).
template <class Reader>
auto read_through_pipe(const std::filesystem::path& pipe, std::string_view bytes, Reader&& reader) {
    if (::mkfifo(pipe.c_str(), 0600) != 0) throw std::runtime_error("mkfifo failed: " + pipe.string());
    std::thread writer([&] { std::ofstream(pipe, std::ios::binary).write(bytes.data(), std::ssize(bytes)); });
    struct Done {  // joins the writer and removes the pipe however reader leaves
        std::thread& writer;
        const std::filesystem::path& pipe;
        ~Done() {
            writer.join();
            std::error_code ec;
            std::filesystem::remove(pipe, ec);
        }
    } done{writer, pipe};
    return reader(pipe);
}

/// The whole content of a file.
inline std::vector<std::byte> read_bytes(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::byte> out(chars.size());
    for (std::size_t i = 0; i < chars.size(); ++i) out[i] = static_cast<std::byte>(chars[i]);
    return out;
}

}  // namespace cpx::testing
