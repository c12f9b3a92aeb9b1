// Frequency tables in text and .npy form, and the errors bad tables give:
// each names the file and the line (text) or entry (.npy).
#include <doctest/doctest.h>

#include <cpx/io/frequency_table.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "temp_dir.hpp"

using namespace cpx::io;
using Counts = std::vector<std::uint64_t>;

namespace {
const std::string npy_dir = CPX_TEST_DATA_DIR "/npy/";

Counts parse(const std::string& text, std::optional<std::size_t> vocab = std::nullopt) {
    return parse_frequency_text(text, "t.txt", vocab);
}
}  // namespace

TEST_CASE("dense text: one count per line; comments, blank lines, spaces and CRLF are ignored") {
    CHECK(parse("# counts\n5\n\n  0\t\r\n12\n# end\n7") == Counts{5, 0, 12, 7});
    CHECK(parse("5\n0\n12\n7\n", 4) == Counts{5, 0, 12, 7});
}

TEST_CASE("sparse text: `id<TAB>count` lines in any order, absent ids count 0") {
    CHECK(parse("3\t7\n0\t5\n2  12\n") == Counts{5, 0, 12, 7});
    CHECK(parse("1\t4\n", 3) == Counts{0, 4, 0});
}

TEST_CASE("whole numbers written as decimals or in scientific notation are accepted exactly") {
    CHECK(parse("12.0\n1.2e1\n0.0\n18446744073709551591\n") == Counts{12, 12, 0, 18446744073709551591u});
}

TEST_CASE("a dense table of the wrong length names the line where it goes wrong") {
    CHECK_THROWS_WITH_AS(parse("1\n2\n3\n", 2), "t.txt:3: more counts than the vocabulary size 2", cpx::FormatError);
    CHECK_THROWS_WITH_AS(parse("1\n2\n# c\n\n", 3),
                         "t.txt:2: the table ends after 2 counts but the vocabulary has 3 token ids", cpx::FormatError);
}

TEST_CASE("negative, non-finite, fractional and garbage counts are rejected with their line") {
    CHECK_THROWS_WITH_AS(parse("1\n-3\n"), "t.txt:2: count -3 is negative", cpx::FormatError);
    CHECK_THROWS_WITH_AS(parse("1\n2\nnan\n"), "t.txt:3: count nan is not finite", cpx::FormatError);
    CHECK_THROWS_WITH_AS(parse("inf\n"), "t.txt:1: count inf is not finite", cpx::FormatError);
    CHECK_THROWS_WITH_AS(parse("0\t1.5\n"), "t.txt:1: count 1.5 is not a whole number", cpx::FormatError);
    CHECK_THROWS_WITH_AS(parse("1\nabc\n"), "t.txt:2: 'abc' is not a count (expected a non-negative whole number)",
                         cpx::FormatError);
    CHECK_THROWS_WITH_AS(parse("18446744073709551616\n"), "t.txt:1: count 18446744073709551616 exceeds 2^64 - 1",
                         cpx::FormatError);
}

TEST_CASE("sparse ids out of range, negative or repeated are rejected with their line") {
    CHECK_THROWS_WITH_AS(parse("0\t1\n5\t2\n", 5), "t.txt:2: token id 5 is outside the vocabulary [0, 5)",
                         cpx::FormatError);
    CHECK_THROWS_WITH_AS(parse("-1\t2\n"), "t.txt:1: token id '-1' is not a non-negative integer", cpx::FormatError);
    CHECK_THROWS_WITH_AS(parse("4\t1\n2\t2\n# x\n4\t3\n"), "t.txt:4: token id 4 appears again (first on line 1)",
                         cpx::FormatError);
    // Routing tables hold int32 ids: a vocabulary may be declared larger, its ids may not be.
    CHECK_THROWS_WITH_AS(parse("0\t1\n2147483647\t2\n", std::size_t{4'000'000'000}),
                         "t.txt:2: token id 2147483647 exceeds the int32 routing-table limit", cpx::FormatError);
}

TEST_CASE("the first record fixes the form, and lines have one or two fields") {
    CHECK_THROWS_WITH_AS(parse("1\n2\t3\n"),
                         "t.txt:2: found an `id count` record but line 1 set the dense `count` form for the file",
                         cpx::FormatError);
    CHECK_THROWS_WITH_AS(parse("0\t1\n2\n"),
                         "t.txt:2: found a bare count but line 1 set the sparse `id count` form for the file",
                         cpx::FormatError);
    CHECK_THROWS_WITH_AS(parse("1 2 3\n"), "t.txt:1: expected `count` or `id<TAB>count`, found 3 fields",
                         cpx::FormatError);
}

TEST_CASE("an empty table is an error") {
    CHECK_THROWS_WITH_AS(parse(""), "t.txt: no counts (the file is empty or holds only blank and comment lines)",
                         cpx::FormatError);
    CHECK_THROWS_AS(parse("# only a comment\n\n"), cpx::FormatError);
    CHECK_THROWS_WITH_AS(parse("1\n", 0), "t.txt: the vocabulary size must be at least 1", cpx::FormatError);
}

TEST_CASE("counts that sum past 2^64 are rejected") {
    CHECK_THROWS_WITH_AS(parse("18446744073709551615\n1\n"), "t.txt: the counts sum past 2^64 - 1 at token id 1",
                         cpx::FormatError);
}

TEST_CASE(".npy tables of int64, int32, float32 and float64 give the same counts") {
    for (const char* file : {"counts_i64.npy", "counts_i32.npy", "counts_f32.npy", "counts_f64.npy"}) {
        CAPTURE(file);
        CHECK(read_frequency_table(npy_dir + file) == Counts{5, 0, 12, 7});
        CHECK(read_frequency_table(npy_dir + file, 4) == Counts{5, 0, 12, 7});
    }
}

TEST_CASE("bad .npy tables name the entry and the reason") {
    CHECK_THROWS_WITH_AS(read_frequency_table(npy_dir + "counts_i64.npy", 5),
                         doctest::Contains("counts_i64.npy: the table has 4 entries but the vocabulary has 5 token ids"),
                         cpx::FormatError);
    CHECK_THROWS_WITH_AS(read_frequency_table(npy_dir + "negative_i64.npy"),
                         doctest::Contains("negative_i64.npy: entry 1: count -2 is negative"), cpx::FormatError);
    CHECK_THROWS_WITH_AS(read_frequency_table(npy_dir + "nan_f64.npy"),
                         doctest::Contains("nan_f64.npy: entry 1: count nan is not finite"), cpx::FormatError);
    CHECK_THROWS_WITH_AS(read_frequency_table(npy_dir + "fraction_f32.npy"),
                         doctest::Contains("fraction_f32.npy: entry 1: count 2.5 is not a whole number"),
                         cpx::FormatError);
    CHECK_THROWS_WITH_AS(read_frequency_table(npy_dir + "matrix_i64_2x2.npy"),
                         doctest::Contains("must be a 1-D array, this one has 2 dimensions"), cpx::FormatError);
    CHECK_THROWS_WITH_AS(read_frequency_table(npy_dir + "empty_i64.npy"),
                         doctest::Contains("empty_i64.npy: no counts (the array is empty)"), cpx::FormatError);
}

TEST_CASE("the format is told by the .npy magic, not the file name") {
    const auto path = std::filesystem::temp_directory_path() / "cpx_test_counts_as.txt";
    std::filesystem::copy_file(npy_dir + "counts_f32.npy", path, std::filesystem::copy_options::overwrite_existing);
    const Counts counts = read_frequency_table(path);
    std::filesystem::remove(path);
    CHECK(counts == Counts{5, 0, 12, 7});
}

TEST_CASE("a missing table file or a directory is an error naming it") {
    CHECK_THROWS_WITH_AS(read_frequency_table("no/such/table.txt"),
                         "cannot open 'no/such/table.txt': No such file or directory", cpx::Error);
    const cpx::testing::TempDir folder;
    CHECK_THROWS_WITH_AS(read_frequency_table(folder.path()),
                         ("cannot open '" + folder.path().string() + "': it is a directory, not a file").c_str(),
                         cpx::Error);
}

TEST_CASE("a table can come through a pipe (`<(command)`), text or .npy, and is read to its end") {
    const cpx::testing::TempDir folder;
    const auto through_pipe = [&](const std::string& bytes) {
        return cpx::testing::read_through_pipe(folder / "table.fifo", bytes,
                                               [](const auto& pipe) { return read_frequency_table(pipe, 4); });
    };
    CHECK(through_pipe("5\n0\n12\n7\n") == Counts{5, 0, 12, 7});
    std::ifstream npy(npy_dir + "counts_i32.npy", std::ios::binary);
    CHECK(through_pipe({std::istreambuf_iterator<char>(npy), std::istreambuf_iterator<char>()}) == Counts{5, 0, 12, 7});
    CHECK_THROWS_WITH_AS(through_pipe("5\n0\n"), doctest::Contains("table.fifo:2: the table ends after 2 counts"),
                         cpx::FormatError);
}

TEST_CASE("a .npy table of more than 2^31 - 1 entries is refused before any entry is read") {
    // 2^31 int32 entries: an 8 GiB file whose data is never written (the file is sparse). The
    // reader maps it and checks the entry count against the routing tables' limit first; reading
    // the entries, or copying the file, would take the 8 GiB (or run out of memory).
    const cpx::testing::TempDir folder;
    const std::int64_t entries = std::int64_t{1} << 31;
    const std::vector<unsigned char> header = encode_npy_header<std::int32_t>(std::span(&entries, 1));
    // A file system that fills a grown file with zeros would write the 8 GiB: a 64 MiB probe first.
    const auto sparse = [](const std::filesystem::path& p, std::uintmax_t size) {
        std::error_code ec;
        std::filesystem::resize_file(p, size, ec);
        struct stat st {};
        return !ec && ::stat(p.c_str(), &st) == 0 && st.st_blocks <= 2048;  // at most 1 MiB allocated
    };
    const auto path = folder.write("huge.npy", std::as_bytes(std::span(header)));
    if (!sparse(path, std::uintmax_t{64} << 20) || !sparse(path, header.size() + (std::uintmax_t{1} << 33))) {
        MESSAGE("skipped: the temp folder's file system does not keep an 8 GiB file sparse");
        return;
    }
    CHECK_THROWS_WITH_AS(read_frequency_table(path),
                         (path.string() + ": 2147483648 entries exceed the int32 routing-table limit").c_str(),
                         cpx::FormatError);
}

TEST_CASE("the shipped real-text table has 32000 ids ranked by frequency and a zero-count tail") {
    const Counts counts = read_frequency_table(CPX_SOURCE_DIR "/data/text_frequency_v32000.txt", 32000);
    CHECK(std::is_sorted(counts.rbegin(), counts.rend()));
    CHECK(counts.front() > 0);
    CHECK(counts.back() == 0);
}
