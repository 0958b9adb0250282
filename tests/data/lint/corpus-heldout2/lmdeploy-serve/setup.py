from setuptools import find_packages, setup

setup(name="lmdeploy", version="0.5.3", packages=find_packages())
