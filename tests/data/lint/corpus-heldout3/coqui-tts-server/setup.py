import os

from setuptools import find_packages, setup

here = os.path.abspath(os.path.dirname(__file__))


def read_requirements(name: str) -> list[str]:
    with open(os.path.join(here, name), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


requirements = read_requirements("requirements.txt")

setup(
    name="TTS",
    version="0.22.0",
    description="Deep learning for Text to Speech by Coqui.",
    packages=find_packages(include=["TTS"]),
    install_requires=requirements,
    extras_require={
        "all": ["mecab-python3==1.0.6", "unidic-lite==1.0.8", "cutlet", "bokeh==1.4.0"],
        "ja": ["mecab-python3==1.0.6", "unidic-lite==1.0.8", "cutlet"],
    },
    python_requires=">=3.9.0, <3.12",
    entry_points={
        "console_scripts": [
            "tts=TTS.bin.synthesize:main",
            "tts-server = TTS.server.server:main",
        ]
    },
)
