"""The 128-bit hash behind the index image's two checks: the marker that ties a file's
rows to its image and checksums the image's bytes (``_storage/sqlite_format.py``,
``image_marker``), and the digest of the texts an image was built from
(``_index/persist.py``, ``text_digest``).

Both checks catch accidental change and staleness (a torn or bit-flipped image, rows
edited or copied in behind the image, an image from another file); they are not a
defence against someone who can write the file, who could as well write a matching
image and marker (``docs/design.md``, "Why the image's checks use a fast hash"). So the
hash need not be cryptographic: XXH3-128 (the ``xxhash`` package, ~25 GB/s here, the
GIL released over each buffer) in place of BLAKE2b-128 (~1 GB/s), a new image format.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

import xxhash

__all__ = ["MARKER_PREFIX", "Hash128", "image_format", "new128"]

#: The knob: True, XXH3-128 (image format 2, markers ``"xxh3:" + hex``); False, the
#: BLAKE2b-128 of before (format 1, markers bare hex), kept to compare the two and to
#: test that both refuse the same images. An image made under one setting is never
#: used under the other (another format, another marker's form): it is rebuilt.
_XXH3 = True

#: How a marker made with XXH3-128 starts (a BLAKE2b marker is 32 bare hex digits).
MARKER_PREFIX = "xxh3:"


class Hash128(Protocol):
    """What both hashes offer: ``update`` with any buffer, ``hexdigest`` (32 digits)."""

    def update(self, data: Any, /) -> None: ...

    def hexdigest(self) -> str: ...


def new128() -> Hash128:
    """A fresh 128-bit hash of the knob's kind (XXH3-128, or BLAKE2b-128). O(1)."""
    if _XXH3:
        return xxhash.xxh3_128()
    return hashlib.blake2b(digest_size=16)


def image_format(*, newest: bool = False) -> int:
    """The index image format that goes with the knob's hash: 2 for XXH3-128, 1 for
    BLAKE2b-128; with ``newest``, the newest format this actormem knows (a larger one
    was written by a newer actormem). O(1)."""
    return 2 if _XXH3 or newest else 1
