// kernels are compiled by setup.py through CMake
