"""Maps the package ``combee_fast.native`` onto the top-level folder ``native/``.

Everything else lives in pyproject.toml; setuptools cannot express this mapping there
together with automatic discovery of the other sub-packages.
"""

from setuptools import find_packages, setup

PACKAGES = find_packages(include=["combee_fast", "combee_fast.*"]) + ["combee_fast.native"]

setup(packages=PACKAGES, package_dir={"combee_fast.native": "native"})
