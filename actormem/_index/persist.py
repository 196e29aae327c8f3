"""An index image: an index's structures as named flat arrays plus a JSON header.

A durable memory keeps the image of its word-overlap or BM25 index beside the rows
(``docs/durability.md``, "The index image"), so that opening a file restores the index
instead of tokenizing every text again. The file is untrusted: an image is only ever
*decoded* here (JSON and raw little-endian arrays, never pickle), and it is used only
if its header names exactly what the reader expects (format, index kind, parameters,
the rows' count, largest seq and a digest of the texts it was built from) and every
array has the declared type and length. The index packages' own ``persist`` modules
check the arrays' values (ranges, order) before anything reaches the compiled kernels;
any mismatch raises :class:`ImageError` and the caller rebuilds from the rows.

The parts are ``{name: bytes}``: ``"header"`` (UTF-8 JSON object) and one part per
array, whose dtype and element count the header lists under ``"arrays"``.

This module is the container and the digest, which the index packages' ``persist``
modules use; ``images.py`` dispatches a dump or a restore to the kind that has an image.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .._util import Beside
from . import imagehash as _hash
from . import kernels

__all__ = [
    "FORMAT",
    "Early",
    "ImageError",
    "LateDigest",
    "StoreDigest",
    "Stepped",
    "decode_strings",
    "encode_strings",
    "pack",
    "text_digest",
    "unpack",
]

#: The image format of BLAKE2b-128 text digests (format 2: XXH3-128, ``imagehash._XXH3``); an
#: image of another format than :func:`imagehash.image_format` gives is rebuilt.
FORMAT = 1

#: The dtypes an image may declare (little-endian, fixed size).
_DTYPES: dict[str, np.dtype[Any]] = {
    name: np.dtype(name) for name in ("<i4", "<i8", "<u8", "<f8", "|u1")
}

#: Strings joined at a time by :func:`text_digest`.
_DIGEST_CHUNK = 4096

#: The largest header accepted, in bytes (a header lists a few dozen fields).
_MAX_HEADER = 1 << 16


class ImageError(ValueError):
    """An index image that does not describe these rows with these parameters (stale,
    foreign or corrupt); the index is rebuilt from the rows instead."""


#: :func:`text_digest` and :class:`LateDigest` make the bytes they hash in the core, with
#: the GIL released: ``texts_encode`` writes the next run of them (the lengths, then the
#: UTF-8) into a reused 1 MiB buffer, read from the texts' own data (held in a tuple,
#: only their immutable fields read), and the hash (``imagehash.new128``: ``xxhash``'s XXH3-128,
#: or hashlib's BLAKE2b) hashes each run (both release the GIL over it; no hash
#: function of our own); for ``distinct``
#: the core's ``texts_first`` finds the distinct texts' first appearances (a mask), also
#: without the GIL. So :class:`LateDigest`'s thread holds the GIL only between the
#: runs (~3 times a MiB) and the caller feeds nothing (~0.3 s of the open's own thread
#: at 1M). A part the core cannot take (without the core, or not a list or tuple of
#: exact ``str``) is written by :func:`_feed` with ``str.join`` and ``encode``: the same
#: bytes in the same order, so the same digest (``tests/test_open18_cols.py`` checks both
#: against the hash over the bytes written out in Python, and fixed digests).
#: ``_ENCODE_BUFFER``: the bytes of one run of ``texts_encode`` (the buffer each
#: digest reuses).
_ENCODE_BUFFER = 1 << 20


def _encode_run(
    own: tuple[str, ...], mask: bytes | None, buf: bytearray, at: int, off: int
) -> tuple[int, int, int] | None:
    """The core's ``texts_encode`` (its docstring: the next run of one part's bytes
    written to ``buf``, the position reached and the bytes written, None for an item not
    an exact ``str``), its arguments checked first. O(bytes written).

    Raises:
        TypeError: ``own`` not a tuple, ``mask`` not bytes or None, ``buf`` not a
            bytearray, ``at`` or ``off`` not an int.
        ValueError: ``mask``'s length not ``own``'s, ``buf`` under 8 bytes, the position
            outside the part.
        RuntimeError: The core is not built.
    """
    if type(own) is not tuple or type(buf) is not bytearray:
        raise TypeError("texts_encode: texts must be a tuple and buf a bytearray")
    if not (mask is None or type(mask) is bytes) or type(at) is not int or type(off) is not int:
        raise TypeError("texts_encode: mask must be bytes or None, at and off ints")
    n = len(own)
    if mask is not None and len(mask) != n:
        raise ValueError("texts_encode: the mask's length is not the texts'")
    if len(buf) < 8:
        raise ValueError("texts_encode: the buffer holds fewer than 8 bytes")
    if not 0 <= at <= 2 * n or off < 0 or (off and not n <= at < 2 * n):
        raise ValueError("texts_encode: the position is outside the texts")
    if kernels._wo is None:
        raise RuntimeError("texts_encode: the word-overlap core is not built")
    got: tuple[int, int, int] | None = kernels._wo.texts_encode(own, mask, buf, at, off)
    return got


def _first_mask(own: tuple[str, ...]) -> bytes | None:
    """The core's ``texts_first`` (1 at each item that is its value's first appearance,
    else 0; None for an item not an exact ``str``), ``own`` checked first. O(total
    length) expected. Raises TypeError unless ``own`` is a tuple."""
    if type(own) is not tuple:
        raise TypeError("texts_first: texts must be a tuple")
    if kernels._wo is None:
        raise RuntimeError("texts_first: the word-overlap core is not built")
    mask: bytes | None = kernels._wo.texts_first(own)
    return mask


def _groups_of(own: tuple[str, ...]) -> tuple[bytes, bytes] | None:
    """The core's ``texts_groups`` (``texts_first``'s mask and each item's group number
    by first appearance, the bytes of an int64 array; None for an item not an exact
    ``str``), ``own`` checked first. O(total length) expected. Raises TypeError unless
    ``own`` is a tuple, RuntimeError when the core is not built."""
    if type(own) is not tuple:
        raise TypeError("texts_groups: texts must be a tuple")
    if kernels._wo is None:
        raise RuntimeError("texts_groups: the word-overlap core is not built")
    got: tuple[bytes, bytes] | None = kernels._wo.texts_groups(own)
    return got


class _Grouped:
    """What a distinct digest's thread found of the texts' groups (:meth:`LateDigest.
    groups`): ``value`` set once, then ``ready``."""

    __slots__ = ("ready", "value")

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.value: tuple[bytes, bytes] | None = None


def _never() -> bool:
    """A ``stopped`` that never stops."""
    return False


def _store_args(cols: Any, slots: bytes, name: str) -> Any:
    """The word-overlap core, once what its ``slots_*`` functions would refuse is
    refused here (before C): ``cols`` not its ``EntryColumns``, ``slots`` not bytes of
    int64 slot numbers. O(1).

    Raises:
        TypeError: ``cols`` or ``slots`` of another type.
        ValueError: ``slots``' length not a multiple of 8.
        RuntimeError: The core is not built.
    """
    if kernels._wo is None:
        raise RuntimeError(f"{name}: the word-overlap core is not built")
    if type(cols) is not kernels._wo.EntryColumns or type(slots) is not bytes:
        raise TypeError(f"{name}: cols must be an EntryColumns and slots bytes")
    if len(slots) % 8:
        raise ValueError(f"{name}: slots' length is not a multiple of 8")
    return kernels._wo


def _slots_groups(cols: Any, slots: bytes, hashes: bytes) -> tuple[bytes, bytes] | None:
    """The core's ``slots_groups`` (:func:`_groups_of` of the texts of ``cols``' slots
    numbered by ``slots``, int64 bytes, found from their UTF-8 with the GIL released:
    the same mask and group numbers; ``hashes``: ``b""`` or 8 bytes a slot, the
    reader's str hashes, -1 none), its arguments checked first; None when a slot is not
    live. O(total length) expected.

    Raises:
        TypeError: Arguments of other types.
        ValueError: ``slots`` or ``hashes`` not 8 bytes a slot.
        RuntimeError: The core is not built.
    """
    core = _store_args(cols, slots, "slots_groups")
    if type(hashes) is not bytes:
        raise TypeError("slots_groups: hashes must be bytes")
    if hashes and len(hashes) != len(slots):
        raise ValueError("slots_groups: hashes must be b'' or 8 bytes a slot")
    got: tuple[bytes, bytes] | None = core.slots_groups(cols, slots, hashes)
    return got


def _encode_store_run(
    cols: Any, slots: bytes, mask: bytes | None, buf: bytearray, at: int, off: int
) -> tuple[int, int, int] | None:
    """The core's ``slots_encode`` (:func:`_encode_run`'s bytes for the texts of
    ``cols``' slots numbered by ``slots``, read from their UTF-8 with the GIL released;
    ``off`` counts bytes, not code points), its arguments checked first; None when a
    slot reached is not live. O(bytes written).

    Raises:
        TypeError: Arguments of other types.
        ValueError: ``mask``'s length not the slots', ``buf`` under 8 bytes, the
            position outside the texts.
        RuntimeError: The core is not built.
    """
    core = _store_args(cols, slots, "slots_encode")
    if type(buf) is not bytearray or not (mask is None or type(mask) is bytes):
        raise TypeError("slots_encode: buf must be a bytearray, mask bytes or None")
    if type(at) is not int or type(off) is not int:
        raise TypeError("slots_encode: at and off must be ints")
    n = len(slots) // 8
    if mask is not None and len(mask) != n:
        raise ValueError("slots_encode: the mask's length is not the slots'")
    if len(buf) < 8:
        raise ValueError("slots_encode: the buffer holds fewer than 8 bytes")
    if not 0 <= at <= 2 * n or off < 0 or (off and not n <= at < 2 * n):
        raise ValueError("slots_encode: the position is outside the texts")
    got: tuple[int, int, int] | None = core.slots_encode(cols, slots, mask, buf, at, off)
    return got


def _hash_store(
    cols: Any,
    slots: bytes,
    mask: bytes,
    update: Callable[[Any], object],
    stopped: Callable[[], bool] = _never,
) -> bool:
    """:func:`_hash_encoded` of one part, the texts of ``cols``' slots numbered by
    ``slots`` (``mask``: of those it marks), by :func:`_encode_store_run`: the same
    bytes. True once all are fed; False, some fed, when a slot is not live or
    ``stopped()`` turned true between runs. O(total length)."""
    buf = bytearray(_ENCODE_BUFFER)
    view = memoryview(buf)
    try:
        end = 2 * (len(slots) // 8)
        at = off = 0
        while at < end:
            got = _encode_store_run(cols, slots, mask, buf, at, off)
            if got is None or stopped():
                return False
            at, off, written = got
            update(view[:written])
    finally:
        view.release()
    return True


def _hash_encoded(
    parts: tuple[tuple[str, ...], ...],
    mask: bytes | None,
    update: Callable[[Any], object],
    stopped: Callable[[], bool] = _never,
) -> bool:
    """Call ``update`` with :func:`text_digest`'s bytes of ``parts`` (``mask``: of the
    first part's items it marks), made by :func:`_encode_run` run after run into one
    buffer (the GIL released there): each call gets a view of the buffer, valid only
    during the call (the hash's ``update`` releases the GIL over it). True once all
    are fed; False, some fed, when an item is not an exact ``str``, or when
    ``stopped()`` turned true between runs. O(total length)."""
    buf = bytearray(_ENCODE_BUFFER)
    view = memoryview(buf)
    try:
        for part in parts:
            end = 2 * len(part)
            at = off = 0
            while at < end:
                got = _encode_run(part, mask, buf, at, off)
                if got is None or stopped():
                    return False
                at, off, written = got
                update(view[:written])
            mask = None  # (only the first part is masked)
    finally:
        view.release()
    return True


def _encoder() -> bool:
    """Whether the core's ``texts_encode`` is there (:func:`_hash_encoded`). O(1)."""
    return kernels._wo is not None and hasattr(kernels._wo, "texts_encode")


def _digest_nogil(
    texts: Sequence[str],
    extra: Sequence[str],
    distinct: bool = False,
    grouped: _Grouped | None = None,
) -> Callable[[Callable[[], bool]], str | None] | None:
    """A call giving ``text_digest(texts, extra)`` by :func:`_hash_encoded` (the core
    makes the bytes with the GIL released; None if an item is not an exact ``str``, or
    when its argument, polled between runs, gives true), or None when the core lacks
    it or a part is not a list or tuple.
    ``distinct``: the digest of ``texts``' distinct strs in the order of their first
    appearance (``extra`` empty), the core's ``texts_first`` marking them. ``grouped``
    (with ``distinct``): the call first finds each text's group number with the core's
    ``texts_groups`` instead (the same mask), and sets it there before it hashes
    (None when the core cannot: an item not an exact ``str``). The call hashes the
    parts as they are now (tuples of their items taken now).
    O(len(texts) + len(extra)) now."""
    if not _encoder() or type(texts) not in (list, tuple) or type(extra) not in (list, tuple):
        return None
    if distinct and extra:
        return None
    parts = (tuple(texts), tuple(extra))

    def run(stopped: Callable[[], bool] = _never) -> str | None:
        if distinct and grouped is not None:
            try:
                got = _groups_of(parts[0])
                grouped.value = got
            finally:
                grouped.ready.set()
            mask = got[0] if got is not None else None
        else:
            mask = _first_mask(parts[0]) if distinct else None
        if distinct and mask is None:
            return None
        h = _hash.new128()
        return h.hexdigest() if _hash_encoded(parts, mask, h.update, stopped) else None

    return run


def text_digest(texts: Sequence[str], extra: Sequence[str] = ()) -> str:
    """A 128-bit digest (hex; XXH3-128, or BLAKE2b-128 with ``imagehash._XXH3`` off) of
    ``texts`` in order, then of ``extra``: unambiguous (the code-point lengths are
    hashed with the concatenation). O(total length), in C: the bytes' encoding about
    0.4 s per GB, XXH3 0.04 s per GB (BLAKE2b 1 s per GB)."""
    run = _digest_nogil(texts, extra)
    if run is not None and (got := run(_never)) is not None:
        return got
    h = _hash.new128()
    _feed(h.update, texts, extra)
    return h.hexdigest()


def _feed(update: Callable[[Any], object], texts: Sequence[str], extra: Sequence[str]) -> None:
    """Call ``update`` with :func:`text_digest`'s bytes, in order: per part (``texts``,
    then ``extra``) the code-point lengths (int64, native order), then the UTF-8
    (``surrogatepass``) of the concatenation, in pieces: by :func:`_hash_encoded` for a
    list or tuple of exact ``str`` with the core, else by ``join`` and ``encode``.
    O(total length)."""
    encoder = _encoder()
    for part in (texts, extra):
        if encoder and type(part) in (list, tuple) and set(map(type, part)) <= {str}:
            fed = _hash_encoded((tuple(part),), None, update)
            assert fed, "every item is an exact str"
            continue
        update(np.fromiter(map(len, part), np.int64, len(part)).tobytes())
        for start in range(0, len(part), _DIGEST_CHUNK):  # bounded transient copies
            chunk = part[start : start + _DIGEST_CHUNK]
            update("".join(chunk).encode("utf-8", "surrogatepass"))


#: Bytes handed at a time to :class:`LateDigest`'s hashing thread (the feed's own
#: buffer is 1 MiB: each piece is copied once), and blocks that may wait for it (at
#: most ``(_LATE_BLOCKS + 2) * _LATE_BLOCK`` bytes held at once, 34 MiB). Over the 1M
#: file's 995k distinct texts the caller's part was 0.21 s with 1 MiB blocks, 0.23
#: with 4, 0.25 with 8, 0.27 with 16 (a growing block is copied as it grows), against
#: 0.45 s for :func:`text_digest`.
_LATE_BLOCK = 1 << 20
_LATE_BLOCKS = 32
#: Fewer texts than this: :class:`LateDigest` hashes them in the caller (no thread).
_LATE_MIN_TEXTS = 50_000


def _distinct(texts: Sequence[str]) -> list[str]:
    """``texts``' distinct items in the order of their first appearance. O(len(texts))."""
    return list(dict.fromkeys(texts))


class LateDigest:
    """:func:`text_digest` of ``texts`` and ``extra`` (the same value; ``distinct``: of
    ``texts``' distinct items in the order of their first appearance, ``extra`` empty),
    its hash run in a thread (:class:`~actormem._util.Beside`) that goes on after the
    constructor returns: with the core (:func:`_digest_nogil`) the whole digest there,
    the GIL released; else the caller feeds the texts' UTF-8 (it needs the GIL), the
    thread hashes it (the hash releases the GIL over large buffers). The caller does
    other work before :meth:`result`, and must call :meth:`result` or :meth:`stop` on
    every path, so that no thread outlives it. With the core's digest the thread hashes
    the texts as they were when the constructor returned; else the constructor feeds
    them. O(total length).

    An image's restore uses it to check the digest last (``header_passed`` and
    ``have``: what :func:`unpack` saw), raising the error the digest's place among the
    header's fields gave (:meth:`first_error`).
    """

    def __init__(
        self,
        texts: Sequence[str],
        extra: Sequence[str] = (),
        distinct: bool = False,
        groups: bool = False,
    ) -> None:
        #: Set by :func:`unpack` once the header's other expected fields matched, with
        #: the image's digest field in ``have``.
        self.header_passed = False
        self.have: Any = None
        self._digest: str | None = None
        self._stopped = False
        #: :meth:`groups`' answer, found by the thread (``groups``, with ``distinct``)
        self._grouped = _Grouped()
        want_groups = groups and distinct and hasattr(kernels._wo, "texts_groups")
        if len(texts) + len(extra) < _LATE_MIN_TEXTS:
            self._beside: Beside | None = None
            self._grouped.ready.set()  # none: the caller groups them itself
            self._digest = text_digest(_distinct(texts) if distinct else texts, extra)
            return
        #: with the core: the whole digest in the thread, the GIL released over it
        self._nogil = _digest_nogil(texts, extra, distinct, self._grouped if want_groups else None)
        if self._nogil is None or not want_groups:
            self._grouped.ready.set()  # none
        if self._nogil is not None:
            self._parts = (texts, extra, distinct)  # the thread's fallback (not a str)
            self._beside = Beside(self._drain, name="actormem digest")
            return
        if distinct:
            texts = _distinct(texts)
        self._h = _hash.new128()
        self._queue: queue.Queue[bytearray | None] = queue.Queue(maxsize=_LATE_BLOCKS)
        self._block = bytearray()
        self._beside = Beside(self._drain, name="actormem digest")
        try:
            _feed(self._update, texts, extra)
            self._send(self._block)
            self._send(None)
        except BaseException:
            self.stop()
            raise
        del self._block

    def _update(self, data: Any) -> None:
        """``update`` for :func:`_feed`: ``data`` copied into the block being filled (the
        feed reuses its buffer), a full block queued for the thread."""
        self._block += data
        if len(self._block) >= _LATE_BLOCK:
            self._send(self._block)
            self._block = bytearray()

    def _send(self, item: bytearray | None) -> None:
        """Queue ``item`` for the thread, waiting while the queue is full; not once the
        thread has ended (an error there, raised by :meth:`result`)."""
        assert self._beside is not None
        while True:
            try:
                self._queue.put(item, timeout=0.05)
                return
            except queue.Full:
                if not self._beside.alive():
                    return

    def _drain(self) -> str | None:
        """The thread: the core's digest with the GIL released (:func:`_digest_nogil`;
        :func:`text_digest`'s path for a list holding other than exact ``str``), else
        hash each queued block until None (or :meth:`stop`)."""
        if self._nogil is not None:
            got = self._nogil(lambda: self._stopped)
            if got is not None or self._stopped:
                return got
            texts, extra, distinct = self._parts
            return text_digest(_distinct(texts) if distinct else texts, extra)
        update = self._h.update
        while (block := self._queue.get()) is not None:
            if self._stopped:
                return None
            update(block)
        return self._h.hexdigest()

    def groups(self) -> tuple[bytes, bytes] | None:
        """For a distinct digest made with ``groups``: the texts' first-appearance mask
        (a byte per text, 1 at a first appearance) and each text's group number by first
        appearance (the bytes of an int64 array), as the thread found them before it
        hashed; None when it did not (a small list, no core, an item not an exact
        ``str``, ``groups`` not asked): the caller groups the texts itself. Waits for
        that part of the thread's work only. O(1) after it."""
        self._grouped.ready.wait()
        return self._grouped.value

    def result(self) -> str:
        """The digest (hex), once the thread hashed every block. Raises what it raised."""
        if self._digest is None:
            assert self._beside is not None
            digest: str = self._beside.result()
            self._digest = digest
        return self._digest

    def stop(self) -> None:
        """End the thread without its digest (an error elsewhere). Idempotent."""
        if self._beside is None or self._digest is not None:
            return
        self._stopped = True
        if self._nogil is not None:  # the thread ends at its next run (<= 1 MiB)
            self._beside.stop()
            return
        self._send(None)  # wakes a thread waiting for a block
        self._beside.stop()

    def first_error(self) -> ImageError | None:
        """The digest's own :class:`ImageError` if the header's other fields matched and
        its digest is not this one (what :func:`unpack` raised before any later check),
        else None. Waits for the digest."""
        if not self.header_passed:
            return None
        want = self.result()
        if self.have != want:
            return ImageError(
                f"digest: the image has {self.have!r}, the rows and scorer need {want!r}"
            )
        return None


class StoreDigest(LateDigest):
    """:class:`LateDigest`'s distinct digest with groups (the same digest and
    :meth:`groups`) of the texts of ``cols``' slots numbered by ``slots`` (an
    ``EntryColumns`` and the bytes of int64 slot numbers, a file's rows in the store's
    form), read from the slots' UTF-8 instead of strs: the core's ``slots_groups`` then
    ``slots_encode`` run after run, the GIL released (a text is its slot's strict
    UTF-8, so equal bytes are equal strs: the same groups and bytes; no str is made).
    ``hashes``: the reader's str hash of each row's text (``FoldedRows.hashes``, 8
    bytes a slot, -1 none) or ``b""``. The store is pinned (``EntryColumns.pin``) from
    the constructor until the thread ends: a put, release or compaction meanwhile raises
    ``RuntimeError`` and changes nothing, so the texts hashed are the slots' as now.
    Always a thread (the caller's rows are many). The thread raises :class:`ImageError`
    (from :meth:`result`) if a slot is not live. O(total length) on the thread.

    Raises:
        TypeError, ValueError: As :func:`_slots_groups` (before any thread).
        RuntimeError: The core is not built.
    """

    def __init__(self, cols: Any, slots: bytes, hashes: bytes = b"") -> None:
        _store_args(cols, slots, "StoreDigest")
        if type(hashes) is not bytes:
            raise TypeError("StoreDigest: hashes must be bytes")
        if hashes and len(hashes) != len(slots):
            raise ValueError("StoreDigest: hashes must be b'' or 8 bytes a slot")
        self.header_passed = False
        self.have: Any = None
        self._digest: str | None = None
        self._stopped = False
        self._grouped = _Grouped()
        self._nogil = None
        self._store = (cols, slots, hashes)
        cols.pin()  # undone by the thread as it ends
        try:
            self._beside = Beside(self._drain, name="actormem digest")
        except BaseException:
            cols.unpin()
            raise

    def _drain(self) -> str | None:
        """The thread: the groups, then the digest's bytes hashed run by run; the store
        unpinned as it ends (returns None once stopped)."""
        cols, slots, hashes = self._store
        try:
            got = None
            try:
                got = _slots_groups(cols, slots, hashes)
                self._grouped.value = got
            finally:
                self._grouped.ready.set()
            h = _hash.new128()
            if got is not None and _hash_store(cols, slots, got[0], h.update, self._halted):
                return h.hexdigest()
            if self._stopped:
                return None
            raise ImageError("digest: a row's slot is not live in the store")
        finally:
            cols.unpin()

    def _halted(self) -> bool:
        """Whether :meth:`stop` was called (polled between runs)."""
        return self._stopped

    def stop(self) -> None:
        """End the thread without its digest (an error elsewhere): it stops at its next
        run (<= 1 MiB) and unpins the store. Idempotent."""
        if self._beside is None or self._digest is not None:
            return
        self._stopped = True
        self._beside.stop()


class Stepped:
    """Work prepared ahead of the rows in bounded steps (an image's restore, run in the
    row reader's waits): ``_steps`` a generator yielding after each step (None: none
    left), ``error`` the ``Exception`` that ended it (None: none)."""

    __slots__ = ("_steps", "error")

    def __init__(self, steps: Iterator[None]) -> None:
        self._steps: Iterator[None] | None = steps
        self.error: Exception | None = None

    def step(self) -> bool:
        """Run one step; whether steps remain. Never raises an ``Exception`` (kept in
        :attr:`error`, for the restore to raise where its inline path would). O(the
        step)."""
        steps = self._steps
        if steps is None:
            return False
        try:
            next(steps)
            return True
        except StopIteration:
            pass
        except Exception as exc:  # the restore raises it where the inline path would
            self.error = exc
        self._steps = None
        return False

    def run_out(self) -> None:
        """Run the remaining steps (:attr:`error` then tells whether one failed)."""
        while self.step():
            pass


def store_rows(rows: Any, rows_slots: Any) -> tuple[Any, bytes, bytes] | None:
    """For a file's rows in the store's form (a list of ``(seq, slot)`` with ``cols``, the
    entries' store, and the reader's ``hashes``: ``FoldedRows``): ``(cols, slots,
    hashes)``, the slot numbers as int64 bytes (by ``rows_slots``, the core's
    ``rows_slots`` or None) and the hashes (``b""`` when absent or not 8 bytes a row),
    which :class:`StoreDigest` takes; None for other rows (no store, a row not plain,
    no core). O(len(rows)), no Python step a row."""
    cols = getattr(rows, "cols", None)
    if cols is None or not isinstance(rows, list) or rows_slots is None:
        return None
    slots = rows_slots(rows, cols)
    if slots is None:
        return None
    hashes = getattr(rows, "hashes", b"")
    if type(hashes) is not bytes or len(hashes) != len(slots):
        hashes = b""
    return cols, slots, hashes


class Early:
    """The texts' digest thread started from a bulk load's rows (``start_early`` of the
    word-overlap and BM25 image modules), for their ``restore`` to take over: ``texts``
    the rows' texts (a tuple), or with ``store`` (:func:`store_rows`' ``(cols, slots,
    hashes)``) None and the digest read from the store (:class:`StoreDigest`);
    ``digest`` the distinct digest with groups. Whoever holds it ends it: the restore
    (taken or not), else :meth:`stop`."""

    __slots__ = ("digest", "store", "taken", "texts")

    def __init__(
        self, texts: tuple[str, ...] | None, store: tuple[Any, bytes, bytes] | None = None
    ) -> None:
        self.texts = texts
        self.store = store
        self.taken = False
        self.digest: LateDigest
        if store is not None:
            self.digest = StoreDigest(*store)
        else:
            assert texts is not None
            self.digest = LateDigest(texts, distinct=True, groups=True)

    def stop(self) -> None:
        """End the thread if no restore took it (idempotent; :meth:`LateDigest.stop`)."""
        self.digest.stop()


def encode_strings(strings: Sequence[str]) -> tuple[bytes, np.ndarray[Any, Any]]:
    """``strings`` as one UTF-8 blob and the code-point offsets of their ends
    (``int64``, length ``len(strings) + 1``, starting at 0). O(total length)."""
    ends = np.zeros(len(strings) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, strings), np.int64, len(strings)), out=ends[1:])
    return "".join(strings).encode("utf-8", "surrogatepass"), ends


def decode_strings(blob: bytes, ends: np.ndarray[Any, Any]) -> list[str]:
    """The strings :func:`encode_strings` made. O(total length).

    Raises:
        ImageError: ``blob`` is not UTF-8, or ``ends`` does not start at 0, decrease
            nowhere and end at the blob's length in code points.
    """
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImageError(f"strings are not UTF-8: {exc}") from None
    if len(ends) == 0 or ends[0] != 0 or ends[-1] != len(text) or np.any(np.diff(ends) < 0):
        raise ImageError("string offsets out of order or range")
    bounds = ends.tolist()
    return list(map(text.__getitem__, map(slice, bounds[:-1], bounds[1:])))


def header_field(parts: Mapping[str, bytes], name: str) -> Any:
    """The field ``name`` of an image's JSON ``header`` part, or None (no header, not
    JSON, not an object, no such field). Unchecked beyond that: an untrusted value.
    O(header size)."""
    try:
        head = json.loads(parts["header"])
    except (KeyError, ValueError, TypeError, RecursionError):
        return None
    return head.get(name) if isinstance(head, dict) else None


def pack(
    header: dict[str, Any], arrays: Mapping[str, np.ndarray[Any, Any] | bytes]
) -> dict[str, bytes]:
    """The parts of an image: ``header`` (plus ``"format"`` and ``"arrays"``) and each
    array's raw bytes (``bytes`` values as ``|u1``). O(total size)."""
    parts: dict[str, bytes] = {}
    listed: dict[str, list[Any]] = {}
    for name, value in arrays.items():
        if isinstance(value, bytes):
            parts[name], listed[name] = value, ["|u1", len(value)]
            continue
        dtype = value.dtype.newbyteorder("<") if value.dtype.byteorder == ">" else value.dtype
        spec = dtype.str
        assert spec in _DTYPES, spec
        parts[name] = np.ascontiguousarray(value, dtype).tobytes()
        listed[name] = [spec, len(value)]
    head = {**header, "format": _hash.image_format(), "arrays": listed}
    parts["header"] = json.dumps(head, sort_keys=True).encode()
    return parts


def unpack(
    parts: Mapping[str, bytes], expect: Mapping[str, Any], late: LateDigest | None = None
) -> tuple[dict[str, Any], dict[str, np.ndarray[Any, Any]]]:
    """The header and the arrays (read-only views of ``parts``) of an image whose header
    has every field of ``expect`` with that exact value. O(number of parts).

    ``late``: the digest, checked later by the caller (``expect`` without ``"digest"``,
    its last field): once the other fields matched, ``late`` gets the image's digest
    field and ``header_passed``.

    Raises:
        ImageError: No header or not a JSON object, another format, a field that differs
            from ``expect``, a part missing or not listed, a dtype not allowed, a part's
            length not the listed count times the item size.
    """
    raw = parts.get("header")
    if raw is None or len(raw) > _MAX_HEADER:
        raise ImageError("no header, or one too large")
    try:
        head = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ImageError(f"header is not JSON: {exc}") from None
    want_format = _hash.image_format()
    if not isinstance(head, dict) or head.get("format") != want_format:
        have = head.get("format") if isinstance(head, dict) else None
        if type(have) is int and have > _hash.image_format(newest=True):
            raise ImageError(
                f"an image of format {have}, written by a newer actormem, which this "
                f"version cannot read (it reads format {want_format}; the file is intact; "
                "upgrade actormem to open it faster)"
            )
        raise ImageError(f"not an image of format {want_format}")
    for key, want in expect.items():
        have = head.get(key)
        if have != want:
            if key == "kind":  # "kind" comes first: another scorer's image fails here
                raise ImageError(
                    f"kind: the image is a {have!r} index, this memory scores with {want!r}"
                )
            raise ImageError(f"{key}: the image has {have!r}, the rows and scorer need {want!r}")
    if late is not None:
        late.have = head.get("digest")
        late.header_passed = True
    listed = head.get("arrays")
    if not isinstance(listed, dict) or set(listed) != set(parts) - {"header"}:
        raise ImageError("the parts differ from those the header lists")
    arrays: dict[str, np.ndarray[Any, Any]] = {}
    for name, spec in listed.items():
        if not (
            isinstance(spec, list)
            and len(spec) == 2
            and spec[0] in _DTYPES
            and type(spec[1]) is int
            and spec[1] >= 0
        ):
            raise ImageError(f"bad array description for {name!r}: {spec!r}")
        dtype = _DTYPES[spec[0]]
        blob = parts[name]
        if len(blob) != spec[1] * dtype.itemsize:
            raise ImageError(f"{name!r}: {len(blob)} bytes, expected {spec[1]} x {dtype.itemsize}")
        arrays[name] = np.frombuffer(blob, dtype)
    return head, arrays


def need(
    arrays: Mapping[str, np.ndarray[Any, Any]], name: str, dtype: str, count: int | None = None
) -> np.ndarray[Any, Any]:
    """``arrays[name]``, which must have ``dtype`` and (unless None) ``count`` elements.

    Raises:
        ImageError: Missing, or another dtype or length.
    """
    arr = arrays.get(name)
    if arr is None or arr.dtype != _DTYPES[dtype] or (count is not None and len(arr) != count):
        raise ImageError(f"{name!r}: missing, or not {count} x {dtype}")
    return arr


#: Values :func:`check_lists_steps` checks per step (4 MiB of int32): its steps run
#: while the row reader reads on, and no temporary as long as the postings (106 MB at
#: the bench's 1M file, fresh pages the kernel zeroes) is made (branch ``open27``).
_CHECK_STEP = 1 << 20


def check_lists(
    ends: np.ndarray[Any, Any], values: np.ndarray[Any, Any], bound: int, what: str
) -> None:
    """Check concatenated lists: ``ends`` (int64, one more than the lists) starts at 0,
    every list is non-empty and ``values`` ends at ``ends[-1]``; every value lies in
    ``[0, bound)`` and each list is strictly ascending. ``values`` has a signed integer
    dtype: the steps are taken in it (they fit, as every value is first checked to lie
    in ``[0, bound)``), with no wider copy. O(total length), vectorised.

    Raises:
        ImageError: Any of these fails.
    """
    for _ in check_lists_steps(ends, values, bound, what):
        pass


def check_offsets(ends: np.ndarray[Any, Any], values: np.ndarray[Any, Any], what: str) -> None:
    """The first check of :func:`check_lists_steps`: the lists' offsets ``ends`` start
    at 0, rise strictly and end at ``len(values)`` (so the lists tile ``values``, and
    slices of it by them are bounded by its size). O(len(ends)).

    Raises:
        ImageError: They do not.
    """
    if len(ends) == 0 or ends[0] != 0 or ends[-1] != len(values) or np.any(np.diff(ends) <= 0):
        raise ImageError(f"{what}: list offsets out of order or range")


def check_lists_steps(
    ends: np.ndarray[Any, Any], values: np.ndarray[Any, Any], bound: int, what: str
) -> Iterator[None]:
    """:func:`check_lists` in steps of :data:`_CHECK_STEP` values (a generator: it
    yields between them, and raises the same error at the same check): the offsets,
    then every value's range, then the order within each list. O(total length),
    vectorised; O(_CHECK_STEP) of temporary memory.

    Raises:
        ImageError: As :func:`check_lists`.
    """
    check_offsets(ends, values, what)
    n = len(values)
    step = _CHECK_STEP
    for at in range(0, n, step):
        part = values[at : at + step]
        if int(part.min()) < 0 or int(part.max()) >= bound:
            raise ImageError(f"{what}: a value outside [0, {bound})")
        yield
    # The steps values[i + 1] - values[i]: the one out of each list's last value (at
    # i = ends[j] - 1, for the lists but the last) may go anywhere. No overflow: both
    # sides of each step lie in [0, bound), so it fits the dtype.
    into = ends[1:-1] - 1
    for at in range(0, n - 1, step):
        stop = min(n - 1, at + step)  # the steps at..stop-1
        steps = np.diff(values[at : stop + 1])
        lo, hi = np.searchsorted(into, (at, stop))
        steps[into[lo:hi] - at] = 1
        if int(steps.min()) <= 0:
            raise ImageError(f"{what}: a list out of order or with repeats")
        yield
