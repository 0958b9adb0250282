from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="punica_kernels",
    ext_modules=[
        CUDAExtension(
            name="punica_kernels",
            sources=["punica_kernels/punica_ops.cc", "punica_kernels/bgmv/bgmv_all.cu"],
            extra_compile_args={"nvcc": ["-O3"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
