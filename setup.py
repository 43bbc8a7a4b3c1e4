"""The optional C extensions; everything else about the build is in pyproject.toml.

Declared here rather than as ``[tool.setuptools] ext-modules`` in pyproject.toml,
which setuptools still calls experimental and warns about on every install (the
BuildBackendWarning that ``make demo`` printed). Each is optional: without a C
compiler (or Debian's libdeflate-dev for ``_inflate``) the build goes on and the
pure paths run, slower, with the same results.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        # The fast decoder's hot loops.
        Extension("pyproflab.decode._wire", ["pyproflab/decode/_wire.c"], optional=True),
        # blake2b of the store's content ids.
        Extension("pyproflab.keying._blake", ["pyproflab/keying/_blake.c"], optional=True),
        # The merge's numbering of keys (also the store's digest cache).
        Extension("pyproflab._intern", ["pyproflab/_intern.c"], optional=True),
        # Prometheus text's sample lines as Arrow buffers (sources/prometheus_scan.py).
        Extension("pyproflab.sources._promtext", ["pyproflab/sources/_promtext.c"], optional=True),
        # One-member gzip files inflated whole by libdeflate; without it zlib-ng
        # streams every file.
        Extension(
            "pyproflab.decode._inflate",
            ["pyproflab/decode/_inflate.c"],
            libraries=["deflate"],
            optional=True,
        ),
    ]
)
