"""combee_fast: parallel prompt learning (Combee, arXiv 2604.04247) on a streaming asyncio engine.

Importing this package compiles nothing: Numba kernels compile on first call or on
``combee_fast.native.warmup()``.
"""

__version__ = "0.1.0"
