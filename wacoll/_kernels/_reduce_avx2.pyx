# cython: language_level=3
"""The reduction kernels of ``_reduce.pyx``, compiled for AVX2 processors (private).

The build compiles this module with ``-mavx2``; the package imports it instead of
``_reduce`` only when ``_reduce.cpu_has_avx2()`` says the processor can run it.
"""
include "_reduce.pyx"
