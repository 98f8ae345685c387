"""Package discovery only; the metadata is in setup.cfg.

setup.cfg's ``find:`` searches one root, but probes/ lives at the top of the repository and installs
as ``alignprobe.probes``: discover both roots, so a new sub-package is never left out of the wheel.
"""

from setuptools import find_packages, setup

probes = ["alignprobe.probes"] + [f"alignprobe.probes.{name}" for name in find_packages("probes")]
setup(packages=find_packages(include=["alignprobe", "alignprobe.*"]) + probes)
