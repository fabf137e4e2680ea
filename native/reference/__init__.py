"""Plain-Python references of the Numba kernels: what each computes, slowly and obviously.

- :mod:`.scan`, :mod:`.stats`, :mod:`.bootstrap`, :mod:`.similarity`, :mod:`.sequential`: one per kernel module of
  :mod:`combee_fast.native`, same names with ``reference_`` in front.
"""
