from setuptools import find_packages, setup


def get_requirements() -> list[str]:
    with open("requirements-cuda.txt", encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip() and not line.startswith("-r")]
    with open("requirements-common.txt", encoding="utf-8") as f:
        lines += [line.strip() for line in f if line.strip()]
    return lines


setup(name="aphrodite-engine", version="0.6.0", packages=find_packages(),
      install_requires=get_requirements())
