from setuptools import find_packages, setup

setup(
    name="clip_server",
    version="0.5.1",
    packages=find_packages(),
    install_requires=["ftfy", "torch", "regex", "torchvision<=0.13.0", "jina>=3.6.0", "prometheus-client", "open_clip_torch>=1.3.0"],
    extras_require={"onnx": ["onnxruntime", "onnx"], "tensorrt": ["nvidia-tensorrt"]},
)
