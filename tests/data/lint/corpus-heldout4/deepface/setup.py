import json

import setuptools

with open("requirements.txt", "r", encoding="utf-8") as f:
    requirements = [line for line in f.read().split("\n") if line]

with open("package_info.json", "r", encoding="utf-8") as f:
    package_info = json.load(f)

setuptools.setup(
    name="deepface",
    version=package_info["version"],
    description="A Lightweight Face Recognition and Facial Attribute Analysis Framework",
    packages=setuptools.find_packages(),
    entry_points={"console_scripts": ["deepface = deepface.DeepFace:cli"]},
    python_requires=">=3.7",
    install_requires=requirements,
)
