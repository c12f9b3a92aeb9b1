// The entry point of every CPU test program: doctest's runner, which also fails a run whose
// filters select no test case. CTest runs the files of a unity group (tests/CMakeLists.txt) as
// one program each with --source-file=*/<file>; a file renamed or left out of its group would
// otherwise "pass" with nothing run.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

unsigned selected_test_cases = 0;

// Only test_run_end carries anything we need; the rest of the interface is empty.
struct SelectionCounter : doctest::IReporter {
    explicit SelectionCounter(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats& stats) override {
        selected_test_cases = stats.numTestCasesPassingFilters;
    }
    void test_case_start(const doctest::TestCaseData&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

DOCTEST_REGISTER_LISTENER("selection_counter", 0, SelectionCounter);

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int result = context.run();
    if (context.shouldExit()) return result;  // --help, --list-test-cases and other queries
    if (result == 0 && selected_test_cases == 0) {
        std::fprintf(stderr, "error: the filters selected no test case (a test file missing from its program?)\n");
        return 1;
    }
    return result;
}
