from setuptools import setup

setup(name="xinference", version="0.15.0", packages=["xinference"])
