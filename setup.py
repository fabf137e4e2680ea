"""Maps the package ``combee_fast.native`` (and its references) onto the top-level folder ``native/``.

Everything else lives in pyproject.toml; setuptools cannot express this mapping there
together with automatic discovery of the other sub-packages.
"""

from setuptools import find_packages, setup

PACKAGES = find_packages(include=["combee_fast", "combee_fast.*"]) + ["combee_fast.native", "combee_fast.native.reference"]

setup(packages=PACKAGES, package_dir={"combee_fast.native": "native", "combee_fast.native.reference": "native/reference"})
