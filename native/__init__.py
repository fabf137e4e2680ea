"""Numba kernels, imported as ``combee_fast.native``. Nothing compiles at import."""
