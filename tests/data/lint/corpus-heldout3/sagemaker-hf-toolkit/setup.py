from setuptools import find_packages, setup

install_requires = [
    "sagemaker-inference>=1.5.11",
    "huggingface_hub>=0.0.8",
    "retrying",
    "numpy",
    "Pillow",
]

setup(
    name="sagemaker-huggingface-inference-toolkit",
    version="2.0.0",
    description="Open source library for running inference workload with Hugging Face on Amazon SageMaker.",
    package_dir={"": "src"},
    packages=find_packages(where="src"),
    python_requires=">=3.6.0",
    install_requires=install_requires,
    extras_require={"transformers": ["transformers[sklearn,sentencepiece]>=4.17.0"]},
    entry_points={"console_scripts": "serve=sagemaker_huggingface_inference_toolkit.serving:main"},
)
