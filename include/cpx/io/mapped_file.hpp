#pragma once
// Read-only view of a whole file. On POSIX systems the file is memory-mapped,
// so opening a multi-gigabyte checkpoint costs nothing until its pages are
// touched; elsewhere the file is read into memory. Either way the bytes stay at
// the same address for the object's lifetime, moves included, so spans into
// them (tensor data) stay valid while the MappedFile lives.
//
// A mapped file that another process truncates while it is mapped raises
// SIGBUS on access: checkpoints must not be rewritten while they are open.

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <utility>

#include "cpx/core/error.hpp"

#if defined(__unix__) || defined(__APPLE__)
#define CPX_IO_HAVE_MMAP 1
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#else
#define CPX_IO_HAVE_MMAP 0
#include <fstream>
#include <vector>
#endif

namespace cpx::io {

class MappedFile {
public:
    MappedFile() = default;

    /// Maps `path` read-only. Throws cpx::Error naming the path when it does not
    /// exist, is a directory or not a regular file, or cannot be read.
    explicit MappedFile(const std::filesystem::path& path) : path_(path) { map(); }
    static MappedFile open(const std::filesystem::path& path) { return MappedFile(path); }

    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    MappedFile(MappedFile&& other) noexcept { swap(other); }
    MappedFile& operator=(MappedFile&& other) noexcept {
        if (this != &other) {
            MappedFile gone(std::move(*this));
            swap(other);
        }
        return *this;
    }
    ~MappedFile() { release(); }

    const std::filesystem::path& path() const noexcept { return path_; }
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

private:
    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
#if !CPX_IO_HAVE_MMAP
    std::vector<std::byte> buffer_;
#endif

    void swap(MappedFile& other) noexcept {
        std::swap(path_, other.path_);
        std::swap(data_, other.data_);
        std::swap(size_, other.size_);
#if !CPX_IO_HAVE_MMAP
        std::swap(buffer_, other.buffer_);
#endif
    }

    [[noreturn]] void fail(std::string_view what) const {
        raise<Error>("cannot open '", path_.string(), "': ", what);
    }

#if CPX_IO_HAVE_MMAP
    void map() {
        // O_NONBLOCK: opening a FIFO must fail below, not hang waiting for a writer.
        const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) fail(std::strerror(errno));
        struct stat st {};
        if (::fstat(fd, &st) != 0) {
            const int err = errno;
            ::close(fd);
            fail(std::strerror(err));
        }
        if (S_ISDIR(st.st_mode)) {
            ::close(fd);
            fail("it is a directory, not a file");
        }
        if (!S_ISREG(st.st_mode)) {
            ::close(fd);
            fail("not a regular file");
        }
        size_ = static_cast<std::size_t>(st.st_size);
        if (size_ == 0) {  // mmap rejects empty mappings; an empty file is an empty span
            ::close(fd);
            return;
        }
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        const int err = errno;
        ::close(fd);  // the mapping keeps the file alive
        if (p == MAP_FAILED) {
            size_ = 0;
            fail(std::string("mmap failed: ") + std::strerror(err));
        }
        data_ = static_cast<const std::byte*>(p);
    }
    void release() noexcept {
        if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
        data_ = nullptr;
        size_ = 0;
    }
#else
    void map() {
        std::error_code ec;
        const auto status = std::filesystem::status(path_, ec);
        if (ec || !std::filesystem::exists(status)) fail("no such file");
        if (std::filesystem::is_directory(status)) fail("it is a directory, not a file");
        if (!std::filesystem::is_regular_file(status)) fail("not a regular file");
        std::ifstream in(path_, std::ios::binary);
        if (!in) fail("cannot be read");
        buffer_.resize(static_cast<std::size_t>(std::filesystem::file_size(path_)));
        in.read(reinterpret_cast<char*>(buffer_.data()), static_cast<std::streamsize>(buffer_.size()));
        if (!in) fail("read failed");
        data_ = buffer_.data();
        size_ = buffer_.size();
    }
    void release() noexcept {
        buffer_.clear();
        data_ = nullptr;
        size_ = 0;
    }
#endif
};

/// Reads a whole text file (config.json) with errors naming the path.
inline std::string read_text_file(const std::filesystem::path& path) {
    const MappedFile file(path);
    const auto bytes = file.bytes();
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace cpx::io
