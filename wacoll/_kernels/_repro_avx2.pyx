include "_repro.pyx"
