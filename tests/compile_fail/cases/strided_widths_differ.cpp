// A block of one configured width cannot be handed over as a block of another.
// expect: a StridedMatrix with one constant column count cannot become one with another
#include <cpx/core/strided_matrix.hpp>

int main() {
    float buf[64] = {};
    const cpx::StridedMatrix<float, 16> sixteen(buf, 4, 16);
#ifdef CPX_COMPILE_FAIL_CONTROL
    const cpx::StridedMatrix<const float, 16> same = sixteen;
#else
    const cpx::StridedMatrix<const float, 8> same = sixteen;
#endif
    return static_cast<int>(same.rows);
}
