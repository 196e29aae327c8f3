"""The optional compiled index kernels and BM25 core; everything else is in pyproject.toml.

``optional=True``: where the C compiler or the Python headers are missing, the build
skips the extension and the package installs anyway; ``actormem._index.kernels`` then
logs one line and the indexes run their numpy reference path.
"""

from setuptools import Extension, setup

# The buffer helpers the three modules include: a change rebuilds them, and the sdist
# carries it (setuptools puts an Extension's `depends` in the sdist).
COMMON = ["actormem/_index/_kernels_common.h"]

setup(
    ext_modules=[
        Extension(
            "actormem._index._ckernels",
            ["actormem/_index/_ckernels.c"],
            # No fused multiply-add: the kernels must round as numpy does, bit for bit.
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math"],
            depends=COMMON,
            optional=True,
        ),
        Extension(
            "actormem._index._cbm25",
            ["actormem/_index/_cbm25.c"],
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math"],
            depends=COMMON,
            optional=True,
        ),
        Extension(
            "actormem._index._cwordoverlap",
            ["actormem/_index/_cwordoverlap.c"],
            extra_compile_args=["-O3"],
            depends=COMMON,
            optional=True,
        ),
    ]
)
