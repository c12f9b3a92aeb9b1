#!/usr/bin/env python3
"""Writes the .npy fixtures of tests/unit/test_npy.cpp and test_frequency_table.cpp
with numpy itself, so the C++ reader and writer are checked against numpy's own
format code (run once with numpy installed; the outputs are committed)."""
import numpy as np

counts = [5, 0, 12, 7]
np.save("counts_i64.npy", np.array(counts, dtype="<i8"))
np.save("counts_i32.npy", np.array(counts, dtype="<i4"))
np.save("counts_f32.npy", np.array(counts, dtype="<f4"))
np.save("counts_f64.npy", np.array(counts, dtype="<f8"))
np.save("logits_f32_2x3.npy", (np.arange(6, dtype="<f4") * 0.5 - 1.0).reshape(2, 3))
np.save("big_endian_i8.npy", np.array(counts, dtype=">i8"))
np.save("fortran_f32_2x3.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
np.save("fraction_f32.npy", np.array([1.0, 2.5], dtype="<f4"))
np.save("nan_f64.npy", np.array([1.0, np.nan], dtype="<f8"))
np.save("negative_i64.npy", np.array([3, -2], dtype="<i8"))
np.save("matrix_i64_2x2.npy", np.array([[1, 2], [3, 4]], dtype="<i8"))
np.save("uint8.npy", np.array([1, 2], dtype="u1"))
np.save("empty_i64.npy", np.array([], dtype="<i8"))
with open("counts_i64_v2.npy", "wb") as f:
    np.lib.format.write_array(f, np.array(counts, dtype="<i8"), version=(2, 0))
