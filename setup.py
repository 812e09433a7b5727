"""The package list, which pyproject.toml cannot compute: every `gateway` package found on disk, plus
the demo backends from the repository folder `backends/` installed as `gateway.demo`, inside the
gateway's own namespace, so that no top-level `backends` package can collide with another project's.
Everything else about the build is in pyproject.toml.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["gateway", "gateway.*"]), "gateway.demo"],
    package_dir={"gateway.demo": "backends"},
)
