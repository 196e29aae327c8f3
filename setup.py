"""The optional compiled index kernels, BM25 core and row reader; everything else is in pyproject.toml.

``optional=True`` (unless ``ACTORMEM_REQUIRE_EXTENSIONS=1``): where the C compiler or the
Python headers are missing, or a module does not compile against this Python (CPython
3.11, 3.12 and 3.13 are built and tested), the build skips the extension and the
package installs anyway; ``actormem._index.kernels`` then logs one line and the indexes
run their numpy reference path.
"""

import os
import sys

from setuptools import Extension, setup

# Every module: a function its Python's headers do not declare (a private CPython API
# that moved or went, as _Py_HashBytes did in 3.13) is an error, not an implicit `int`
# declaration whose truncated result the module would use silently (a 64-bit hash cut to
# 32 bits). The module is then skipped (optional) and the package says so at import.
STRICT = ["-Werror=implicit-function-declaration"]
# ACTORMEM_REQUIRE_EXTENSIONS=1: a module that does not build fails the build (CI, and
# whoever wants the compiled paths for sure) instead of being skipped.
OPTIONAL = os.environ.get("ACTORMEM_REQUIRE_EXTENSIONS", "0") in ("", "0")

# The buffer helpers the three modules include: a change rebuilds them, and the sdist
# carries it (setuptools puts an Extension's `depends` in the sdist).
COMMON = ["actormem/_index/_kernels_common.h", "actormem/_index/_foldhash.h"]
# The two modules over SQLite's C API check with dlopen/dlsym that they run the same
# loaded SQLite as Python's _sqlite3 (_storage/_samelib.h); glibc before 2.34 keeps
# those in libdl.
SAMELIB = "actormem/_storage/_samelib.h"
SQLITE_LIBS = ["sqlite3", "dl"] if sys.platform.startswith("linux") else ["sqlite3"]

setup(
    ext_modules=[
        # The compiled record (int64 version and slot fields, no GC header); without it
        # actormem._record.Record is the Python class, the same behaviour.
        Extension(
            "actormem._crecord",
            ["actormem/_crecord.c"],
            extra_compile_args=["-O3", *STRICT],
            optional=OPTIONAL,
        ),
        Extension(
            "actormem._index._ckernels",
            ["actormem/_index/_ckernels.c"],
            # No fused multiply-add: the kernels must round as numpy does, bit for bit.
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math", *STRICT],
            depends=COMMON,
            optional=OPTIONAL,
        ),
        Extension(
            "actormem._index._cbm25",
            ["actormem/_index/_cbm25.c"],
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math", *STRICT],
            depends=COMMON,
            optional=OPTIONAL,
        ),
        Extension(
            "actormem._index._cwordoverlap",
            ["actormem/_index/_cwordoverlap.c"],
            extra_compile_args=["-O3", *STRICT],
            depends=[
                *COMMON,
                "actormem/_index/_oatable.h",
                "actormem/_index/_duptable.h",
                "actormem/_index/_idtable.h",
                "actormem/_index/_grouptable.h",
                "actormem/_index/_entrycols.h",
            ],  # the tables
            optional=OPTIONAL,
        ),
        # A file's rows read and decoded in C, against the system's SQLite (its own
        # connection: nothing shared with Python's sqlite3). Without sqlite3.h or
        # libsqlite3 the build skips it and files are read through Python's sqlite3.
        Extension(
            "actormem._storage._crows",
            ["actormem/_storage/_crows.c"],
            extra_compile_args=["-O3", *STRICT],
            libraries=SQLITE_LIBS,
            depends=[*COMMON, SAMELIB],
            optional=OPTIONAL,
        ),
        # A durable memory's small group commits in C over a connection of their own
        # (sqlite._C_COMMIT), against the system's SQLite; optional like the reader.
        Extension(
            "actormem._storage._cwrite",
            ["actormem/_storage/_cwrite.c"],
            extra_compile_args=["-O3", *STRICT],
            libraries=SQLITE_LIBS,
            depends=[SAMELIB],
            optional=OPTIONAL,
        ),
    ]
)
