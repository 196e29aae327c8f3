"""The compiled index kernels (``_ckernels.c``), checked, or the numpy reference.

The indexes ask :func:`active` once at the start of a retrieve. When it is true they call
the kernels below for their hot loops (BM25's accumulation of the essential terms, the
refinement of candidates by binary search and the largest saturation of a posting list;
word overlap's counting of matched words); when false, or where the extension could not
be built (``pip install`` skips it: ``optional=True`` in ``setup.py``), they run the numpy
code, which stays the reference: a kernel does the same IEEE double operations in the
same order, so results are identical bit for bit (``tests/test_kernels.py``).

Every wrapper checks its arguments (types, element types, lengths, ranges) and raises
:class:`ValueError` or :class:`TypeError` before anything reaches C; the C code checks
again what memory safety needs.

``ACTORMEM_PURE_PYTHON=1`` in the environment, or ``kernels.ENABLED = False``, selects the
reference path (benchmarks compare both in one run). BM25 has a second, larger module,
``_cbm25.c``: its add term loop and its whole query driver (document-at-a-time MaxScore
with block-max bounds); ``ACTORMEM_BM25_CORE=0`` or ``kernels.BM25_CORE = False`` keeps
BM25 on the Python driver (with the kernels above). Word overlap's compiled core
(``_cwordoverlap.c``, wrappers in ``wordoverlap/ccore.py``) is loaded here too:
``ACTORMEM_WO_CORE=0`` or ``kernels.WO_CORE = False`` runs its Python path.
"""

from __future__ import annotations

import importlib
import logging
import math
import os
from array import array
from collections.abc import Callable, Generator
from operator import attrgetter
from types import ModuleType
from typing import Any

import numpy as np

__all__ = [
    "AVAILABLE",
    "DenseCounts",
    "ENABLED",
    "WO_CORE",
    "WO_CORE_AVAILABLE",
    "active",
    "gc_untrack",
    "huge_advise",
    "BM25_BLOCK",
    "BM25_CORE",
    "Bm25Daat",
    "bm25_accumulate",
    "bm25_add_terms",
    "bm25_blocks",
    "bm25_core_active",
    "bm25_exact",
    "bm25_keep",
    "bm25_max_sat",
    "bm25_query_steps",
    "bm25_refine",
    "wo_count_sparse",
    "wo_join",
    "wo_core",
    "wo_scan",
    "wo_scan_mark",
]


def _load(name: str, switched_off: bool) -> tuple[ModuleType | None, str]:
    """The compiled module ``name`` of this package, or None and why not ("" when it was
    switched off)."""
    if switched_off:
        return None, ""
    try:
        return importlib.import_module(f"{__package__}.{name}"), ""
    except ImportError as exc:  # pragma: no cover - depends on the build
        return None, str(exc)


# Unset, empty or 0: off (as the other switches); anything else: on.
_PURE = os.environ.get("ACTORMEM_PURE_PYTHON", "0") not in ("", "0")
_c: ModuleType | None
_wo: ModuleType | None  # the word-overlap core (_cwordoverlap.c; wrappers in wordoverlap/ccore.py)
_b: ModuleType | None  # the BM25 core (_cbm25.c): its add term loop and query driver
_c, _c_why = _load("_ckernels", _PURE)
_wo, _wo_why = _load("_cwordoverlap", _PURE or os.environ.get("ACTORMEM_WO_CORE") == "0")
_b, _b_why = _load("_cbm25", _PURE)
# One line on stderr, whatever is missing (README: "one line on stderr says so").
if _PURE:
    logging.getLogger("actormem").warning(
        "actormem: ACTORMEM_PURE_PYTHON is set; using the numpy path for the index "
        "(no compiled kernels; same results, slower)"
    )
elif _c_why or _wo_why or _b_why:  # pragma: no cover - depends on the build
    _missing = [
        f"{what} ({why})"
        for what, why in (
            ("index kernels", _c_why),
            ("word-overlap core", _wo_why),
            ("BM25 core", _b_why),
        )
        if why
    ]
    logging.getLogger("actormem").warning(
        "actormem: compiled %s unavailable; using the numpy path there (same results, "
        "slower; with a C compiler and the Python headers, `pip install -e .` builds it)",
        ", ".join(_missing),
    )

#: Whether the extension was built and imported.
AVAILABLE = _c is not None
#: Whether the indexes use it (tests and benchmarks switch it off to run the reference).
ENABLED = AVAILABLE

#: Whether the BM25 core is used when :data:`ENABLED`: ``ACTORMEM_BM25_CORE=0`` (or
#: setting this to False) keeps BM25 on the Python driver and the kernels above.
BM25_CORE = os.environ.get("ACTORMEM_BM25_CORE", "1") != "0"
#: Postings per block of the core's block-max bounds.
BM25_BLOCK: int = _b.BLOCK if _b is not None else 64


def _cpu_info(field: str, path: str = "/proc/cpuinfo") -> str:
    """The value of ``path``'s first ``field`` line (``vendor_id``, ``flags``), or ``""``
    where there is none or it cannot be read (not Linux). Reads the file's first lines
    only: O(1)."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            for _, line in zip(range(64), f, strict=False):
                key, _, value = line.partition(":")
                if key.strip() == field:
                    return value.strip()
    except OSError:
        pass
    return ""


def _cpu_vendor(path: str = "/proc/cpuinfo") -> str:
    """The CPU's vendor string (``AuthenticAMD``, ``GenuineIntel``) from ``path``'s first
    ``vendor_id`` line, or ``""`` (:func:`_cpu_info`). O(1)."""
    return _cpu_info("vendor_id", path)


def _cpu_avx512(path: str = "/proc/cpuinfo") -> bool:
    """Whether ``path``'s first ``flags`` line names ``avx512f`` and ``avx512vl`` (what
    the core's eight-lane walk needs, ``simd_walk_usable`` in ``_cbm25.c``); False
    without one (:func:`_cpu_info`). O(1)."""
    flags = set(_cpu_info("flags", path).split())
    return {"avx512f", "avx512vl"} <= flags


#: Whether the CPU is AMD's (``knobs._SCALAR_ON_AMD``: the BM25 core's walk takes its
#: scalar loop there, not the eight-lane AVX-512 one).
CPU_IS_AMD = _cpu_vendor() == "AuthenticAMD"

#: Whether the CPU has AVX-512 F and VL (``knobs._SPARSE_MARKS``: only a CPU without it
#: has the BM25 core walk its sparse windows marking by the cut).
CPU_HAS_AVX512 = _cpu_avx512()


#: ``gc_untrack(objs, cls)`` of the compiled kernels (``_ckernels.c``): take each object
#: of the list ``objs``, all of exactly the type ``cls``, out of the cyclic collector's
#: lists (for values that are never part of a reference cycle); returns how many were
#: tracked; TypeError (nothing untracked) for anything else than a list of exactly
#: ``cls``. None without the extension (nothing is untracked then: the same results,
#: longer full collections).
gc_untrack: Callable[[list[Any], type], int] | None = getattr(_c, "gc_untrack", None)


def _thp_mode(path: str = "/sys/kernel/mm/transparent_hugepage/enabled") -> str:
    """The kernel's transparent huge page mode (``always``, ``madvise``, ``never``: the
    bracketed word of ``path``), or ``""`` where it cannot be read (not Linux). O(1)."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            text = f.read(256)
    except OSError:
        return ""
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else ""


#: The kernel's transparent huge page mode at import (:func:`_thp_mode`). In ``madvise``
#: mode only memory asked for with ``madvise(MADV_HUGEPAGE)`` gets huge pages.
THP_MODE = _thp_mode()
#: Whether asking for huge pages can help here: the default of the indexes' knobs
#: (``bm25.knobs._HUGE_PAGES``, ``wordoverlap.knobs._HUGE_PAGES``).
HUGE_PAGES_USEFUL = THP_MODE in ("always", "madvise")
#: Arrays from this many bytes are advised (one whole 2 MiB page may fit inside).
HUGE_PAGE_MIN = 2 << 20

_huge: Callable[[Any], int] | None = getattr(_c, "huge_advise", None)


def huge_advise(buf: Any) -> int:
    """Ask the kernel for transparent huge pages on the whole 2 MiB pages inside the
    memory of ``buf`` (a C-contiguous buffer: numpy array, ``array.array``), aligned
    inward (``madvise(MADV_HUGEPAGE)``, ``_ckernels.c`` with ``_crows.c``'s helper).
    For long-lived arrays read at random: with 4 KiB pages, each read of an array
    larger than the TLB's reach is likely a TLB miss and a page walk (dear in a VM).
    Pages faulted in after the call are huge; ones already present wait for the
    kernel's khugepaged. Returns the bytes advised: 0 for a buffer under 2 MiB, where
    madvise refused (ignored: a hint) or without the extension. Never changes the
    buffer's contents. O(1)."""
    if _huge is None:
        return 0
    return _huge(buf)


#: Arrays of :func:`huge_zeros` from this many bytes are 2 MiB aligned and advised
#: (below, a whole huge page would more than double them).
HUGE_ZEROS_MIN = 1 << 20


def huge_zeros(size: int, dtype: Any, huge: bool = True) -> np.ndarray[Any, Any]:
    """``np.zeros(size, dtype)``; with ``huge`` and from :data:`HUGE_ZEROS_MIN` bytes, its
    memory starts on a 2 MiB boundary and its whole 2 MiB pages, the last one rounded
    up, are advised as huge (:func:`huge_advise`) before anything touches them, so they
    fault in as huge pages: an array of 1 MiB up to 2 MiB becomes one huge page, not 256
    to 512 small ones (the RSS then counts the page whole once it is touched). The
    array is a view of a larger zeroed buffer (up to 2 MiB more of address space, not
    paged in). O(1) (calloc's zero pages), faults later. Refused advice: a plain
    zeroed array all the same."""
    dt = np.dtype(dtype)
    nbytes = size * dt.itemsize
    if not huge or _huge is None or nbytes < HUGE_ZEROS_MIN:
        return np.zeros(size, dt)
    page = HUGE_PAGE_MIN
    whole = -(-nbytes // page) * page
    raw = np.zeros(whole + page, np.uint8)
    start = -raw.ctypes.data % page
    _huge(raw[start : start + whole])
    arr: np.ndarray[Any, Any] = raw[start : start + nbytes].view(dt)
    return arr


class HugeSlab:
    """Zeroed arrays smaller than a huge page, carved one after the other (64-byte
    aligned) out of shared slabs of ``slab_bytes`` from :func:`huge_zeros`, so that many
    small arrays read at random (BM25's dense frequency arrays, 256 KB each at 1M
    groups) share huge pages instead of each spanning 64 small ones. Each array is a
    view that keeps its slab alive: a slab's memory returns once every array carved
    from it is gone (arrays replaced at a capacity doubling free their old slabs). For
    one owner (no locking). Arrays over a quarter of a slab, under :attr:`MIN_BYTES`
    (a small index's arrays: its first one would cost a whole 2 MiB page of RSS), or
    with ``huge`` false, come from :func:`huge_zeros` alone. O(1) an array (a new slab:
    calloc's zero pages, faulted in as they are written)."""

    #: Arrays from this size are carved from a slab (64 KiB: BM25's dense arrays from
    #: 256K groups).
    MIN_BYTES = 64 << 10

    def __init__(self, slab_bytes: int = 8 << 20) -> None:
        self._bytes = slab_bytes
        self._slab: np.ndarray[Any, Any] | None = None
        self._at = 0

    def zeros(self, size: int, dtype: Any, huge: bool = True) -> np.ndarray[Any, Any]:
        """A zeroed array of ``size`` ``dtype`` (see the class). O(1)."""
        dt = np.dtype(dtype)
        nbytes = size * dt.itemsize
        if not huge or _huge is None or not self.MIN_BYTES <= nbytes <= self._bytes // 4:
            return huge_zeros(size, dt, huge)
        at = -(-self._at // 64) * 64
        if self._slab is None or at + nbytes > len(self._slab):
            self._slab, at = huge_zeros(self._bytes, np.uint8), 0
        self._at = at + nbytes
        arr: np.ndarray[Any, Any] = self._slab[at : at + nbytes].view(dt)
        return arr


def bm25_core_active() -> bool:
    """Whether BM25 adds and retrieves starting now use the compiled core. O(1)."""
    return ENABLED and BM25_CORE and _b is not None


#: Whether the word-overlap core was built and imported (``ACTORMEM_WO_CORE=0`` or
#: ``ACTORMEM_PURE_PYTHON=1`` keep it out); ``WO_CORE = False`` selects the Python path.
WO_CORE_AVAILABLE = _wo is not None
WO_CORE = WO_CORE_AVAILABLE


def wo_core() -> ModuleType | None:
    """The word-overlap core module while ``WO_CORE`` is on, else None. O(1)."""
    return _wo if WO_CORE else None


def active() -> bool:
    """Whether retrieves starting now use the compiled kernels. O(1)."""
    return ENABLED and _c is not None


def _kernels() -> ModuleType:
    if _c is None:
        raise RuntimeError("the compiled index kernels are not available")
    return _c


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


_I32, _I64, _U8, _U16 = (np.dtype(t) for t in (np.int32, np.int64, np.uint8, np.uint16))
_F64, _BOOL, _INTP = (np.dtype(t) for t in (np.float64, np.bool_, np.intp))


#: numpy's module defines a ``__getattr__``, so Python 3.11 cannot specialize an ``np.X``
#: read: the hot checks read these module names instead (the same objects; hot45).
_NDARRAY = np.ndarray


def _array_of(name: str, value: Any, dtype: np.dtype[Any], writable: bool = False) -> int:
    """Check that ``value`` is a 1-D C-contiguous numpy array of ``dtype`` (writable if
    asked); its length. O(1): the message is built only for a refusal."""
    if type(value) is not _NDARRAY:
        raise TypeError(f"{name} must be a numpy array, not {type(value).__name__}")
    flags = value.flags
    if value.dtype != dtype or value.ndim != 1 or not flags.c_contiguous:
        raise ValueError(f"{name} must be a 1-D contiguous array of {dtype}")
    if writable and not flags.writeable:
        raise ValueError(f"{name} must be writable")
    return len(value)


def _postings(groups: array[int], tfs: array[int], stop: int) -> None:
    if not isinstance(groups, array) or groups.typecode != "i":
        raise TypeError("groups must be an array('i')")
    if not isinstance(tfs, array) or tfs.typecode not in "Bi":
        raise TypeError("tfs must be an array('B') or array('i')")
    _need(0 <= stop <= len(groups) and stop <= len(tfs), "posting range beyond the list")


def bm25_accumulate(
    groups: array[int],
    tfs: array[int],
    start: int,
    end: int,
    lengths: np.ndarray[Any, Any],
    acc: np.ndarray[Any, Any],
    wi: float,
    a_part: float,
    b_part: float,
    tau: float,
    in_top: np.ndarray[Any, Any],
    nums_out: np.ndarray[Any, Any],
    hot_out: np.ndarray[Any, Any],
) -> tuple[int, int]:
    """For the postings ``start:end``: ``acc[g] = wi * (tf / ((len[g] * b_part + a_part)
    + tf)) + acc[g]`` (the numpy path's operations, in its order); ``nums_out`` gets the
    group numbers and ``hot_out`` those whose new value exceeds ``tau`` and that are not
    ``in_top``. Returns (groups put in ``hot_out``, groups above ``tau``). O(end - start).

    Raises:
        TypeError, ValueError: An argument of the wrong type, element type or size, or
            a group number beyond ``acc``, ``lengths`` or ``in_top``.
    """
    _postings(groups, tfs, end)
    _need(0 <= start <= end, "start must be in [0, end]")
    _array_of("lengths", lengths, _I32)
    _array_of("acc", acc, _F64, writable=True)
    _array_of("in_top", in_top, _BOOL)
    size = end - start
    _need(_array_of("nums_out", nums_out, _INTP, True) >= size, "nums_out too short")
    _need(_array_of("hot_out", hot_out, _INTP, True) >= size, "hot_out too short")
    got: tuple[int, int] = _kernels().bm25_accumulate(
        groups, tfs, start, end, lengths, acc, wi, a_part, b_part, tau, in_top, nums_out, hot_out
    )
    return got


def bm25_refine(
    groups: array[int],
    tfs: array[int],
    count: int,
    cands: np.ndarray[Any, Any],
    part: np.ndarray[Any, Any],
    lengths: np.ndarray[Any, Any],
    wi: float,
    a_part: float,
    b_part: float,
    up: float,
    rest: float,
    theta: float,
    keep_out: np.ndarray[Any, Any],
) -> int:
    """For each candidate group (int32) among the first ``count`` postings: ``part +=
    wi * (tf / (tf + (a_part + b_part * len)))``; then ``keep_out = part * up + rest >=
    theta``. Returns how many are kept. O(len(cands) log count).

    Raises:
        TypeError, ValueError: As :func:`bm25_accumulate`.
    """
    _postings(groups, tfs, count)
    m = _array_of("cands", cands, _I32)
    _need(_array_of("part", part, _F64, writable=True) == m, "part must match cands")
    _array_of("lengths", lengths, _I32)
    _need(_array_of("keep_out", keep_out, _BOOL, writable=True) >= m, "keep_out too short")
    kept: int = _kernels().bm25_refine(
        groups, tfs, count, cands, part, lengths, wi, a_part, b_part, up, rest, theta, keep_out
    )
    return kept


def bm25_max_sat(
    groups: array[int],
    tfs: array[int],
    start: int,
    stop: int,
    lengths: np.ndarray[Any, Any],
    a_part: float,
    kr: float,
) -> float:
    """The largest ``tf / (tf + (a_part + kr * len[g]))`` over the postings
    ``start:stop`` (0.0 for none). O(stop - start).

    Raises:
        TypeError, ValueError: As :func:`bm25_accumulate`.
    """
    _postings(groups, tfs, stop)
    _need(0 <= start <= stop, "start must be in [0, stop]")
    _array_of("lengths", lengths, _I32)
    top: float = _kernels().bm25_max_sat(groups, tfs, start, stop, lengths, a_part, kr)
    return top


def bm25_exact(
    terms: array[int],
    position: dict[int, int],
    query: list[tuple[float, array[int], array[int], int]],
    num: int,
    norm: float,
) -> float:
    """BM25 of group ``num`` before weights: over its packed ``terms`` (``term << 8 |
    min(tf, 255)``) that have a ``position`` in ``query``, in the query's order, ``score
    += wi * (tf / (tf + norm))``; a capped frequency is looked up in the term's list
    ``(wi, groups, tfs, count)`` by binary search. O(T log T).

    Raises:
        TypeError, ValueError: An argument of the wrong type, a position beyond the
            query, or a capped group missing from its term's list.
    """
    if not isinstance(terms, array) or terms.typecode not in "iq":
        raise TypeError("terms must be an array('i') or array('q')")
    if type(position) is not dict or type(query) is not list:
        raise TypeError("position must be a dict and query a list")
    _need(type(num) is int and num >= 0, "num must be an int >= 0")
    score: float = _kernels().bm25_exact(terms, position, query, num, norm)
    return score


def bm25_keep(
    acc: np.ndarray[Any, Any],
    nums: np.ndarray[Any, Any],
    lo: int,
    hi: int,
    up: float,
    rest: float,
    theta: float,
    out: np.ndarray[Any, Any],
) -> int:
    """The group numbers ``g`` of ``nums[lo:hi]`` (intp) with ``acc[g] * up + rest >=
    theta``, in order, written to ``out``; returns how many. O(hi - lo).

    Raises:
        TypeError, ValueError: An argument of the wrong type or size, or a group number
            beyond ``acc``.
    """
    _array_of("acc", acc, _F64)
    _need(0 <= lo <= hi <= _array_of("nums", nums, _INTP), "lo, hi beyond nums")
    _need(_array_of("out", out, _INTP, writable=True) >= hi - lo, "out too short")
    kept: int = _kernels().bm25_keep(acc, nums, lo, hi, up, rest, theta, out)
    return kept


_COUNTS = (_U8, _U16, _I64)


def _counts(counts: Any) -> int:
    if type(counts) is not _NDARRAY or counts.dtype not in _COUNTS:
        raise TypeError("counts must be a numpy array of uint8, uint16 or int64")
    return _array_of("counts", counts, counts.dtype, writable=True)


class DenseCounts:
    """Adds byte sets into a count array, a range of groups at a time: the arguments
    are checked once, here, and each :meth:`add` checks only its range.

    Args:
        counts: Counts per group (uint8, uint16 or int64, 1-D, contiguous, writable).
        sets: Match sets, one byte (0 or 1) per group, each at least ``len(counts)``.
        mults: The multiplicity of each set (ints >= 0).

    Raises:
        TypeError, ValueError: An argument of the wrong type or size.
    """

    __slots__ = ("_counts", "_mults", "_n", "_sets")

    def __init__(
        self, counts: np.ndarray[Any, Any], sets: list[np.ndarray[Any, Any]], mults: list[int]
    ) -> None:
        self._n = n = _counts(counts)
        if type(sets) is not list or type(mults) is not list:
            raise TypeError("sets and mults must be lists")
        _need(len(sets) == len(mults), "one multiplicity per set")
        for s in sets:
            _need(_array_of("set", s, _U8) >= n, "a set shorter than the counts")
        for m in mults:
            _need(type(m) is int and 0 <= m < 1 << 31, "multiplicities must be ints >= 0")
        self._counts, self._sets, self._mults = counts, list(sets), list(mults)

    def add(self, lo: int, hi: int) -> None:
        """``counts[lo:hi] += m * s[lo:hi]`` for each set ``s`` and its multiplicity
        ``m``, in the counts' integer type. O((hi - lo) * sets).

        Raises:
            ValueError: Not ``0 <= lo <= hi <= len(counts)``.
        """
        _need(0 <= lo <= hi <= self._n, "lo, hi must satisfy 0 <= lo <= hi <= len(counts)")
        _kernels().wo_count_dense(self._counts, lo, hi, self._sets, self._mults)


def wo_count_sparse(
    counts: np.ndarray[Any, Any],
    gids: np.ndarray[Any, Any],
    lo: int,
    hi: int,
    n: int,
    m: int,
    mark: np.ndarray[Any, Any] | None,
    word: int,
) -> None:
    """``counts[g] += m`` once for each distinct group number ``g < n`` among
    ``gids[lo:hi]`` (int32). With ``mark`` (uint16 per group), ``mark[g] == word`` means
    counted already by an earlier call, and is set. O(hi - lo).

    Raises:
        TypeError, ValueError: An argument of the wrong type or size, or ``word``
            beyond uint16.
    """
    _need(0 <= n <= _counts(counts), "n beyond counts")
    _need(0 <= lo <= hi <= _array_of("gids", gids, _I32), "lo, hi beyond gids")
    if mark is not None:
        _need(_array_of("mark", mark, _U16, writable=True) >= n, "mark shorter than n")
    _need(type(m) is int and 0 <= m < 1 << 31, "m must be an int >= 0")
    _need(type(word) is int and 0 <= word <= 0xFFFF, "word must be in [0, 65535]")
    _kernels().wo_count_sparse(counts, gids, lo, hi, n, m, mark, word)


def _refuse_scan(recent: list[str], lo: int, hi: int, mod: int, word: str) -> None:
    """:func:`wo_scan`'s and :func:`wo_scan_mark`'s refusal (the C function's too), called
    only once their one test of the arguments failed (no call on the way to C). O(1).

    Raises:
        TypeError, ValueError: As :func:`wo_scan`.
    """
    if type(recent) is not list or type(word) is not str:
        raise TypeError("recent must be a list of str and word a str")
    _need(0 <= lo <= hi and 0 < mod <= len(recent), "lo, hi, mod out of range")
    _need(hi - lo <= mod, "hi beyond lo + mod (the texts)")
    raise AssertionError("unreachable: the arguments passed")  # pragma: no cover


def wo_scan(
    recent: list[str],
    lo: int,
    hi: int,
    mod: int,
    word: str,
    rare: bool = False,
    wide: bool = False,
) -> list[int]:
    """The group numbers ``g`` in ``lo:hi`` whose text ``recent[g % mod]`` contains
    ``word`` (``word in text``), ascending. With ``rare``, a text and word of one byte per
    character are searched in C by the word's least common byte (``memchr``) and a
    compare where it falls, instead of ``PyUnicode_Find``; with ``wide`` too, a word of
    one byte per character in a text of two or four bytes per character the same way,
    by its code units (the same groups). ``recent`` is a ring of the ``mod`` newest
    texts, so ``lo:hi`` spans at most ``mod`` groups (each text read once).
    O(total length of those texts), at most ``mod`` texts.

    Raises:
        TypeError, ValueError: ``recent`` not a list of str shorter than ``mod``, or a
            bad range (``hi - lo > mod`` too), refused before any text is read.
    """
    if (
        type(recent) is not list
        or type(word) is not str
        or not (0 <= lo <= hi <= lo + mod and 0 < mod <= len(recent))
    ):
        _refuse_scan(recent, lo, hi, mod, word)
    found: list[int] = _kernels().wo_scan(recent, lo, hi, mod, word, bool(rare), bool(wide))
    return found


def wo_scan_mark(
    recent: list[str],
    lo: int,
    hi: int,
    mod: int,
    word: str,
    rare: bool,
    wide: bool,
    dense: np.ndarray[Any, Any],
) -> int:
    """:func:`wo_scan`'s groups set to 1 in ``dense`` (uint8, 1-D, contiguous, writable,
    at least ``hi`` long) instead of listed; returns how many. Nothing else of
    ``dense`` is written. O(total length of those texts).

    Raises:
        TypeError, ValueError: As :func:`wo_scan`, or ``dense`` not such an array (then
            nothing is written).
    """
    if (
        type(recent) is not list
        or type(word) is not str
        or not (0 <= lo <= hi <= lo + mod and 0 < mod <= len(recent))
    ):
        _refuse_scan(recent, lo, hi, mod, word)
    _need(_array_of("dense", dense, _U8, writable=True) >= hi, "dense shorter than hi")
    found: int = _kernels().wo_scan_mark(recent, lo, hi, mod, word, bool(rare), bool(wide), dense)
    return found


_TYPECODE = attrgetter("typecode")


def _check_int_arrays(lists: list[array[int]]) -> None:
    """Refuse a posting list that is not an ``array('i')``: a type and a typecode test
    per list at C speed (``map``), the per-list loop only to name a refusal.
    O(len(lists)).

    Raises:
        TypeError: A list that is not an ``array('i')``.
    """
    if set(map(type, lists)) <= {array} and set(map(_TYPECODE, lists)) <= {"i"}:
        return
    for lst in lists:
        if not isinstance(lst, array) or lst.typecode != "i":
            raise TypeError("posting lists must be array('i')")


def wo_join(
    lists: list[array[int]],
    n: int,
    ids: np.ndarray[Any, Any] | None,
    dense: np.ndarray[Any, Any] | None,
) -> int:
    """The group numbers below ``n`` of the posting ``lists`` (``array('i')``): written
    in order to ``ids`` (int32, room for all of them) and counted, or, with ``dense``
    (uint8, at least ``n``) instead, marked 1 there (then 0 is returned).
    O(total postings).

    Raises:
        TypeError, ValueError: Not exactly one of ``ids`` and ``dense``, a list that is
            not an ``array('i')``, or too little room.
    """
    if type(lists) is not list:
        raise TypeError("lists must be a list")
    _check_int_arrays(lists)
    _need((ids is None) != (dense is None), "exactly one of ids and dense")
    if ids is not None:
        room = _array_of("ids", ids, _I32, writable=True)
        _need(room >= sum(map(len, lists)), "ids too short for the lists")
    if dense is not None:
        _need(_array_of("dense", dense, _U8, writable=True) >= n >= 0, "dense shorter than n")
    got: int = _kernels().wo_join(lists, n, ids, dense)
    return got


def _core() -> ModuleType:
    if _b is None:
        raise RuntimeError("the compiled BM25 core is not available")
    return _b


def bm25_dense_fill(
    bits: np.ndarray[Any, Any], groups: array[int], tfs: array[int], start: int, stop: int
) -> None:
    """OR the two-bit frequency codes of postings ``start:stop`` of a list into ``bits``
    (uint8, writable, four groups a byte: ``bits[num >> 2] >> 2 * (num & 3) & 3`` is 0
    absent, 1 or 2 the frequency, 3 three or more). O(stop - start).

    Raises:
        TypeError, ValueError: An argument of the wrong type or size, or a group beyond
            ``bits`` (nothing written then).
    """
    _postings(groups, tfs, stop)
    _need(type(start) is int and 0 <= start <= stop, "start must be in [0, stop]")
    _array_of("bits", bits, _U8, writable=True)
    _core().bm25_dense_fill(bits, groups, tfs, start, stop)


def bm25_image_check(
    packed: np.ndarray[Any, Any],
    group_ends: np.ndarray[Any, Any],
    postings: np.ndarray[Any, Any],
    post_ends: np.ndarray[Any, Any],
    tfs: np.ndarray[Any, Any],
    lengths: np.ndarray[Any, Any],
    sizes: np.ndarray[Any, Any] | None,
    dfs_out: np.ndarray[Any, Any],
    wide_out: np.ndarray[Any, Any],
    pool_width: int = 0,
    small: bool = False,
) -> tuple[int, bytes | None, bytes | None]:
    """The numeric checks of a BM25 index image in one pass over each side, the GIL released
    (``bm25/persist.py``). The first item: 0 when all pass, else the number of the first
    that fails (``_cbm25.bm25_image_check``'s docstring lists them: 1 the lists' offsets, 2
    a posting out of range, 3 a list out of order, 4 a frequency below 1, 5 the groups'
    offsets, 7 a group's term out of range, 8 the two sides' triples (each group's term
    count among them), 9 a length). With ``size = len(lengths)`` groups and ``count =
    len(post_ends) - 1`` terms: ``packed`` int32 or int64, ``group_ends`` int64 (``size +
    1``), ``postings`` and ``tfs`` int32 (as many), ``post_ends`` int64, ``lengths`` int32,
    ``sizes`` int64 (``size``) or None (1 each); once the lists passed, ``dfs_out`` (int64,
    ``count``) gets each term's sum of ``sizes`` over its postings and ``wide_out`` (uint8,
    ``count``) 1 where a frequency exceeds 255. When every check passed: with ``pool_width``
    2, 4 or 8 the second item is the bytes of ``packed >> 8`` as uint16, uint32 or int64
    (the term pool's ``'H'``, ``'I'`` or ``'q'``), with ``small`` the third those of ``tfs``
    as uint8 (its low bytes); otherwise None each. O(size + count + postings).

    Raises:
        TypeError, ValueError: An argument of the wrong type, dtype or length, or a
            ``pool_width`` not 0, 2, 4 or 8 (nothing written then).
        RuntimeError: The BM25 core is not built.
    """
    if type(packed) is not np.ndarray or packed.dtype not in (_I32, _I64):
        raise TypeError("packed must be a numpy array of int32 or int64")
    _array_of("packed", packed, packed.dtype)
    size = _array_of("lengths", lengths, _I32)
    _need(_array_of("group_ends", group_ends, _I64) == size + 1, "group_ends: size + 1 items")
    count = _array_of("post_ends", post_ends, _I64) - 1
    _need(count >= 0, "post_ends: at least one item")
    _need(
        _array_of("postings", postings, _I32) == _array_of("tfs", tfs, _I32), "tfs: one a posting"
    )
    _need(sizes is None or _array_of("sizes", sizes, _I64) == size, "sizes: one a group")
    _need(_array_of("dfs_out", dfs_out, _I64, writable=True) == count, "dfs_out: one a term")
    _need(_array_of("wide_out", wide_out, _U8, writable=True) == count, "wide_out: one a term")
    _need(type(pool_width) is int and pool_width in (0, 2, 4, 8), "pool_width: 0, 2, 4 or 8")
    got: tuple[int, bytes | None, bytes | None] = _core().bm25_image_check(
        packed, group_ends, postings, post_ends, tfs, lengths, sizes, dfs_out, wide_out,
        pool_width, bool(small),
    )  # fmt: skip
    return got


def bm25_blocks(
    groups: array[int],
    tfs: array[int],
    lengths: np.ndarray[Any, Any],
    first: int,
    stop: int,
    out: np.ndarray[Any, Any],
) -> None:
    """For each complete block ``k`` in ``first:stop`` of :data:`BM25_BLOCK` postings:
    ``out[2 (k - first)]`` its largest frequency, ``out[2 (k - first) + 1]`` the smallest
    length of its groups. O((stop - first) * BM25_BLOCK).

    Raises:
        TypeError, ValueError: An argument of the wrong type or size, a block beyond
            the list, or a group number beyond ``lengths``.
    """
    _postings(groups, tfs, 0)
    _need(0 <= first <= stop, "first must be in [0, stop]")
    _need(stop * BM25_BLOCK <= min(len(groups), len(tfs)), "blocks beyond the list")
    _array_of("lengths", lengths, _I32)
    _need(_array_of("out", out, _I32, writable=True) >= 2 * (stop - first), "out too short")
    _core().bm25_blocks(groups, tfs, lengths, first, stop, out)


def _best_first(item: tuple[float, int, Any]) -> tuple[float, int]:
    return (-item[0], -item[1])


#: One query term for :class:`Bm25Daat`: (wi, bound, groups, tfs, count, blocks, nblocks).
DaatTerm = tuple[Any, ...]
"""A term of :class:`Bm25Daat`: ``(wi, bound, groups, tfs, count, blocks, nblocks)``, or
that with ``(bits, upto, dpos)`` after it (its dense frequencies, see ``dense_tfs``)."""


def _dense_of(term: tuple[Any, ...], count: int) -> None:
    """Check a :class:`Bm25Daat` term's ``(bits, upto, dpos)``: bits None, or a 1-D
    contiguous uint8 array covering ``upto`` groups, and ``0 <= dpos <= count``.

    Raises:
        TypeError, ValueError: Either is not so.
    """
    bits, upto, dpos = term[7:]
    if bits is None:
        return
    size = _array_of("dense bits", bits, _U8)
    _need(type(upto) is int and 0 <= upto <= 4 * size, "dense upto: 0 to 4 * len(bits)")
    _need(type(dpos) is int and 0 <= dpos <= count, "dense dpos: 0 to count")


#: ``bm25_daat``'s ``more`` flag of :meth:`Bm25Daat.drive`'s ``to_end``: the call runs
#: step after step to the end of the lists.
_TO_END = 2048

#: ``bm25_daat``'s ``more`` flag for a seeding followed by the walk to its end (with
#: ``_TO_END``) in the same call (:func:`bm25_query`).
_SEED_THEN_WALK = 4096

#: ``bm25_daat``'s ``more`` flag for the windowed walk's scratch made once a call, not
#: once a step (:func:`bm25_query`'s ``flags``, ``knobs._CALL_SCRATCH``).
CALL_SCRATCH = 8192

#: ``bm25_daat``'s ``more`` flag for the windows expected sparse walked marking by the
#: cut, not scanned after (with ``scan_marks``; :func:`bm25_query`'s ``flags``,
#: ``knobs._SPARSE_MARKS``).
SPARSE_MARKS = 16384


def daat_flags(
    prefetch: bool, prefetch_seek: bool, tight_walk: bool, interp_seek: bool,
    simd_walk: bool, prefetch_lookups: bool, lookup_codes: bool, prefetch_seeds: bool,
    sparse_clear: bool, prefetch_offers: bool, dense_tfs: bool, sparse_quarter: bool,
    scalar_no_prefetch: bool, walk_ones: bool, mark_cut: bool, scan_marks: bool,
) -> tuple[int, int]:  # fmt: skip
    """``bm25_daat``'s two flag words, ``(prefetch, more)``, from :class:`Bm25Daat`'s
    bools of those names (see there). O(1)."""
    more = (
        int(lookup_codes)
        | 2 * prefetch_seeds
        | 4 * sparse_clear
        | 8 * prefetch_offers
        | 16 * dense_tfs
        | 32 * sparse_quarter
        | 64 * scalar_no_prefetch
        | 256 * walk_ones
        | 512 * mark_cut
        | 1024 * scan_marks
    )
    prefetch_word = (
        int(prefetch)
        | 2 * prefetch_seek
        | 4 * tight_walk
        | 8 * interp_seek
        | 16 * simd_walk
        | 32 * prefetch_lookups
    )
    return prefetch_word, more


class Bm25Daat:
    """The core's document-at-a-time MaxScore with block-max windows over one query, in
    bounded steps: the arguments are checked once, here, and each :meth:`step` checks
    only its own (the term arrays only grow, and the C code checks again).

    Args:
        terms: In the query's order, each ``(wi, bound, groups, tfs, count, blocks,
            nblocks)``: ``bound`` >= ``wi`` times any saturation in the list, slack
            included; ``blocks`` as :func:`bm25_blocks` made them for the first
            ``nblocks`` <= ``count // BM25_BLOCK`` blocks.
        lengths: Document length by group number (int32).
        parts: ``(a_part, b_part, k1, b, avgdl, up)``.
        room: Groups returned per step at most.
        cost_split: Split the terms cost-aware (see ``_cbm25.bm25_daat``), not by bound.
        prefetch: With ``cost_split``, the windowed walk prefetches the length of the
            group a few postings ahead (``knobs._PREFETCH_WALK``; the same results).
        split_room: With ``cost_split``, the non-essential terms' bounds sum below this
            fraction of theta, in (0, 1] (``knobs._SPLIT_ROOM``; the same results).
        prefetch_seek: The lookups' galloping and binary searches prefetch their next
            probes (``knobs._PREFETCH_SEEK``; the same results).
        tight_walk: With ``cost_split``, the windowed walk runs its tight loop (the term's
            fields in registers, the marks set without a branch: ``knobs._TIGHT_WALK``;
            the same results).
        interp_seek: The lookups' searches start from a position interpolated between
            the cursor's group and the list's last (``knobs._INTERP_SEEK``; the same
            positions, so the same results).
        simd_walk: With ``tight_walk``, the walk goes eight postings at a time where the
            CPU has AVX-512 (``knobs._SIMD_WALK``; the same results).
        prefetch_lookups: With ``cost_split`` and ``interp_seek``, the lookups of the
            marked group two on are prefetched (``knobs._PREFETCH_LOOKUPS``; the same
            results).
        codes: None, or each length's one-byte code (uint8, at least ``len(lengths)``:
            ``bm25.postings.length_codes``): with ``tight_walk``, the walk reads the
            codes, not the lengths, and marks groups by upper bounds from the codes'
            lowest lengths (``knobs._LENGTH_CODES``; the same results, not the same
            steps: a step may return more groups, whose exact scores are below theta).
        lookup_codes: With ``codes``, the lookups into the non-essential lists take each
            marked group's saturations from its code too (upper bounds), and only a group
            that may still reach theta after them reads its length, for its exact score
            (``knobs._LOOKUP_CODES``; the same results, not the same steps).
        prefetch_seeds: With ``interp_seek``, the seeding (a :meth:`step` with ``seed``)
            asks for the lookups and the length of the seed's group a few on before those
            of the current one (``knobs._PREFETCH_SEEDS``; the same results).
        sparse_clear: A window of the cost-aware walk in which few postings were walked
            has only their scores cleared after it, not its whole score array
            (``knobs._SPARSE_CLEAR``; the same results).
        prefetch_offers: With :meth:`drive`, the groups a window offers have their
            first seqs and slots in the table prefetched at once, before the first is
            offered (``knobs._PREFETCH_OFFERS``; the same results).
        dense_tfs: With ``cost_split``, a term given with ``(bits, upto, dpos)``, bits
            not None (uint8, 1-D, contiguous: the frequency of each group below ``upto``
            <= ``4 * len(bits)`` in two bits, ``bits[num >> 2] >> 2 * (num & 3) & 3``: 0
            absent, 1 or 2 the frequency, 3 three or more; ``dpos`` <= ``count`` the
            list's first posting of a group at or above ``upto``), is looked up there
            (one read) instead of sought in its list, but for a 3 (``knobs._DENSE_TFS``;
            the same results, as long as ``bits`` agrees with the list: the caller's
            promise, as the lists' order is).
        sparse_quarter: With ``sparse_clear``, a window is cleared by its postings while
            they are fewer than a quarter of its width, not an eighth (the same
            results; the library asks for it: the two measured alike, bm25q8).
        scalar_no_prefetch: With ``codes``, the walk prefetches no code ahead where it
            runs its scalar loop (a CPU without AVX-512), whatever ``prefetch`` says
            (``knobs._SCALAR_NO_PREFETCH``; the same results).
        walk_ones: With ``codes``, where the walk runs its scalar loop without a
            prefetch, a posting of frequency 1 takes its part from a table by code made
            once a step for each walked term (``wi * (1.0 / (1.0 + den))``: the loop's
            own operations, the same part bit for bit) (``knobs._WALK_ONES``; the same
            results).
        mark_cut: With ``codes``, where the walk runs that loop, a group is marked by
            comparing its partial score with the least double whose ``* up + rest``
            reaches theta (found once a window and term: the same marks)
            (``knobs._MARK_CUT``; the same results).
        scan_marks: With ``codes`` and ``mark_cut``, the walk runs its scalar loop
            without a prefetch (also where the CPU has AVX-512) and marks nothing: a
            window's marks are found after its walk from its scores (a sparse window's
            in the pass that clears its postings' slots, a dense one's by a scan of its
            4,096 scores), where the window's cut is above 0 and every walked term's
            weight is finite and >= 0 (``knobs._SCAN_MARKS``; the same results).

    Raises:
        TypeError, ValueError: An argument of the wrong type or size, or a count or
            block count beyond its list.
    """

    __slots__ = (
        "_codes",
        "_columns",
        "_cursors",
        "_last",
        "_lengths",
        "_more",
        "_nums",
        "_offer",
        "_parts",
        "_prefetch",
        "_scores",
        "_seed",
        "_seeds",
        "_split_room",
        "_sticky",
        "_terms",
    )

    def __init__(
        self,
        terms: list[DaatTerm],
        lengths: np.ndarray[Any, Any],
        parts: tuple[float, float, float, float, float, float],
        room: int,
        cost_split: bool = False,
        prefetch: bool = False,
        split_room: float = 1.0,
        prefetch_seek: bool = False,
        tight_walk: bool = False,
        interp_seek: bool = False,
        simd_walk: bool = False,
        prefetch_lookups: bool = False,
        codes: np.ndarray[Any, Any] | None = None,
        lookup_codes: bool = False,
        prefetch_seeds: bool = False,
        sparse_clear: bool = False,
        prefetch_offers: bool = False,
        dense_tfs: bool = False,
        sparse_quarter: bool = False,
        scalar_no_prefetch: bool = False,
        walk_ones: bool = False,
        mark_cut: bool = False,
        scan_marks: bool = False,
    ) -> None:
        if type(terms) is not list or not terms:
            raise TypeError("terms must be a non-empty list")
        for term in terms:
            if type(term) is not tuple or len(term) not in (7, 10):
                raise TypeError("each term must be a 7- or 10-tuple")
            _, _, groups, tfs, count, blocks, nblocks = term[:7]
            if len(term) == 10:
                _dense_of(term, count)
            # The checks below in one expression first (a retrieve makes one of these
            # per query, about ten terms), then one by one for the message.
            if (
                type(groups) is array and groups.typecode == "i" and type(tfs) is array
                and tfs.typecode in ("B", "i") and type(count) is int
                and 0 <= count <= len(groups) and count <= len(tfs) and type(blocks) is array
                and blocks.typecode == "i" and type(nblocks) is int
                and 0 <= nblocks <= count // BM25_BLOCK and 2 * nblocks <= len(blocks)
            ):  # fmt: skip
                continue
            _postings(groups, tfs, count)
            if not isinstance(blocks, array) or blocks.typecode != "i":
                raise TypeError("blocks must be an array('i')")
            _need(type(nblocks) is int and 0 <= nblocks <= count // BM25_BLOCK, "nblocks")
            _need(2 * nblocks <= len(blocks), "blocks shorter than nblocks")
        nlen = _array_of("lengths", lengths, _I32)
        if codes is not None:
            _need(_array_of("codes", codes, _U8) >= nlen, "codes shorter than the lengths")
        self._codes = codes
        if len(parts) != 6 or not all(isinstance(x, float) for x in parts):
            raise TypeError("parts must be six floats")
        _need(type(room) is int and room > 0, "room must be an int > 0")
        if type(prefetch) is not bool or type(prefetch_seek) is not bool:
            raise TypeError("prefetch and prefetch_seek must be bools")
        flags = (
            tight_walk, interp_seek, simd_walk, prefetch_lookups, lookup_codes, prefetch_seeds,
            sparse_clear, prefetch_offers, dense_tfs, sparse_quarter, scalar_no_prefetch,
            walk_ones, mark_cut, scan_marks,
        )  # fmt: skip
        if not all(type(x) is bool for x in flags):
            raise TypeError(
                "tight_walk, interp_seek, simd_walk, prefetch_lookups, lookup_codes,"
                " prefetch_seeds, sparse_clear, prefetch_offers, dense_tfs, sparse_quarter,"
                " scalar_no_prefetch, walk_ones, mark_cut, scan_marks: bools"
            )
        self._prefetch, self._more = daat_flags(prefetch, prefetch_seek, *flags)
        _need(type(split_room) is float and 0.0 < split_room <= 1.0, "split_room in (0, 1]")
        self._split_room = split_room
        self._terms, self._lengths, self._parts = list(terms), lengths, parts
        self._cursors = np.zeros(len(terms), np.int64)
        self._seeds = np.zeros(len(terms), np.int64)
        self._seed = -1  # the term the seeding positions are for
        self._sticky = np.zeros(len(terms), np.uint8) if cost_split else None
        self._nums = np.empty(room, np.int64)
        self._scores = np.empty(room, np.float64)
        self._offer: list[Any] | None = None
        self._columns = False
        #: The offer tuple of the last :meth:`drive` (its ``first`` checked then).
        self._last: tuple[Any, ...] | None = None

    def offer_to(
        self, table: list[Any], version: int, accept: Any, limit: int, seen: int,
        columns: bool = False,
    ) -> None:  # fmt: skip
        """Make the core offer the groups it finds to a heap of records of its own, the
        ``limit`` best ``(score, -seq, rec)`` (unweighted: a record scores its text's),
        so that theta rises within a step (:meth:`drive`, :meth:`best`). ``table``: the
        groups by number (``None`` once purged; each with ``_recs``, or with ``columns``
        each slot the group's records themselves, a list or its one record; records
        with ``born``, ``died`` and ``seq``), ``version`` the reader's snapshot, ``accept``
        ``None`` or a filter of records, ``seen`` how many groups the seeding may offer
        in all. Needs the cost-aware split. O(limit + seen).

        Raises:
            TypeError, ValueError: An argument of the wrong type or range, or no
                cost-aware split.
        """
        _need(self._sticky is not None, "offers need the cost-aware split")
        if type(table) is not list:
            raise TypeError("table must be a list")
        _need(type(version) is int and 0 <= version < 1 << 63, "version: an int >= 0")
        _need(accept is None or callable(accept), "accept must be None or callable")
        _need(type(limit) is int and limit > 0, "limit must be an int > 0")
        _need(type(seen) is int and seen >= 0, "seen must be an int >= 0")
        if type(columns) is not bool:
            raise TypeError("columns must be a bool")
        self._columns = columns
        self._offer = [
            table, version, accept, np.empty(limit, np.float64), np.empty(limit, np.int64),
            [None] * limit, np.zeros(2, np.int64), np.empty(max(seen, 1), np.int64), False,
        ]  # fmt: skip
        self._last = None

    def drive(
        self,
        budget: int,
        seed: int = -1,
        room: int = 0,
        first: np.ndarray[Any, Any] | None = None,
        to_end: bool = False,
    ) -> bool:
        """:meth:`step` offering what it finds to the heap of :meth:`offer_to` (theta:
        the heap's worst once full); whether every list is done (with ``seed``: that
        term's list, whose first ``room`` groups are offered and remembered, so that
        the walk after it skips them). ``first`` (int64 or int32, by group number, as of now:
        the owner may have raised none of its entries since): a lower bound on the seqs
        of each group's records, so that a group tying with the heap's worst record is
        passed over without reading its records when none can be below that record's
        seq (the same results; a group beyond it is read as without). ``to_end`` (no
        ``seed``): every step to the end of the lists in this one call, each of about
        ``budget`` postings, the terms split again at the heap's theta between two, as
        calls made one after another with these arguments would (the same results and
        the same work, less a call's set-up a step; returns True). O(the steps' work).

        Raises:
            TypeError, ValueError: ``first`` not a 1-D contiguous int64 or int32 array,
                ``to_end`` not a bool or given with a ``seed``.
            ValueError: As :meth:`step`, or :meth:`offer_to` not called first.
            Whatever ``accept`` raises.
        """
        if type(to_end) is not bool:
            raise TypeError("to_end must be a bool")
        _need(not (to_end and seed >= 0), "to_end runs the walk, not a seeding: no seed")
        _need(self._offer is not None, "offer_to first")
        assert self._offer is not None
        remember = seed >= 0
        last = self._last
        if (
            last is not None and last[8] is remember
            and last[9] is first
        ):  # fmt: skip
            offer = last  # the same arguments as the call before: checked then
        else:
            self._offer[8] = remember
            offer = tuple(self._offer)
            if first is not None:  # int64, or int32 (bm25 knobs._FIRST_SEQ32)
                _array_of("first", first, _I32 if getattr(first, "dtype", None) == _I32 else _I64)
            offer += (first, self._columns)
            self._last = offer
        _, done = self._call(-math.inf, budget, seed, room, offer, _TO_END if to_end else 0)
        return done

    def best(self) -> list[tuple[float, Any]]:
        """The heap of :meth:`offer_to`: ``(score, rec)``, best first (a higher score,
        then a lower seq). O(limit log limit)."""
        _need(self._offer is not None, "offer_to first")
        assert self._offer is not None
        n = int(self._offer[6][0])
        items = zip(
            self._offer[3][:n].tolist(), self._offer[4][:n].tolist(), self._offer[5][:n],
            strict=True,
        )  # fmt: skip
        return [(score, rec) for score, _, rec in sorted(items, key=_best_first)]

    def step(
        self, theta: float, budget: int, seed: int = -1, room: int = 0
    ) -> tuple[Any, Any, bool]:
        """About ``budget`` postings of work: the groups met that may still reach
        ``theta`` (ascending, at most ``room``; int64 numpy arrays, new), their exact
        scores (float64; the query's order,
        ``norm = k1 * ((1 - b) + b * dl / avgdl)``), and whether every list is done.
        With ``seed``, a term's index: every group of that term's list in turn instead,
        with its exact score (and whether that list is done), to find a first theta
        (with positions of their own, from the start of the lists for each new seed).
        ``room`` > 0 returns at most that many groups (at most the ``room`` given at
        construction either way).

        Raises:
            ValueError: A NaN ``theta``, ``budget`` not an int > 0, ``seed`` not -1
                or a term's index, or ``room`` not an int >= 0.
        """
        got, done = self._call(theta, budget, seed, room, None)
        return self._nums[:got].copy(), self._scores[:got].copy(), done

    def _call(
        self,
        theta: float,
        budget: int,
        seed: int,
        room: int,
        offer: tuple[Any, ...] | None,
        more: int = 0,
    ) -> tuple[int, bool]:
        if not (  # all at once first (a retrieve's every step), then one by one
            theta == theta and type(budget) is int and budget > 0 and type(seed) is int
            and -1 <= seed < len(self._terms) and type(room) is int and room >= 0
        ):  # fmt: skip
            _need(theta == theta, "theta must not be NaN")
            _need(type(budget) is int and budget > 0, "budget must be an int > 0")
            _need(type(seed) is int and -1 <= seed < len(self._terms), "seed: -1 or a term")
            _need(type(room) is int and room >= 0, "room must be an int >= 0")
        if seed >= 0 and seed != self._seed:  # another term's list: from the start
            self._seeds[:] = 0
            self._seed = seed
        got: tuple[int, bool] = _core().bm25_daat(
            self._terms, self._cursors if seed < 0 else self._seeds, self._lengths,
            *self._parts, theta, budget, seed,
            self._nums[:room] if room else self._nums, self._scores, self._sticky, offer,
            self._prefetch, self._split_room, self._codes, self._more | more,
        )  # fmt: skip
        return got


_Array = np.ndarray[Any, Any]
#: What :func:`_query_scratch` returns: ``(nums, scores, sticky, hs, hq, hr, hn, seen)``.
_Scratch = tuple[_Array, _Array, _Array, _Array, _Array, list[Any], _Array, _Array]


def _query_scratch(room: int, q: int, limit: int, seeds: list[int], seed_room: int) -> _Scratch:
    """The scratch of a query's ``bm25_daat`` calls (:func:`bm25_query` and
    :func:`bm25_query_steps`), one code for both: ``(nums, scores, sticky, hs, hq, hr,
    hn, seen)``, the walk's window of ``room`` group numbers and scores, the ``q``
    terms' sticky marks, the record heap of ``limit`` (scores, seqs, records, and its
    size), and room for the seeds' ``seed_room`` group numbers each. O(room + limit +
    seeds * seed_room)."""
    return (
        np.empty(room, np.int64), np.empty(room, np.float64), np.zeros(q, np.uint8),
        np.empty(limit, np.float64), np.empty(limit, np.int64), [None] * limit,
        np.zeros(2, np.int64), np.empty(max(len(seeds) * seed_room, 1), np.int64),
    )  # fmt: skip


def bm25_query(
    terms: list[DaatTerm],
    lengths: np.ndarray[Any, Any],
    parts: tuple[float, float, float, float, float, float],
    room: int,
    flags: tuple[int, int],
    split_room: float,
    codes: np.ndarray[Any, Any] | None,
    offer: tuple[list[Any], int, Any, int, Any, bool],
    seeds: list[int],
    seed_room: int,
    budget: int,
    one_call: bool = True,
) -> list[tuple[float, Any]]:
    """A query run to its end by the core with its heap of records in C, as
    :class:`Bm25Daat` would run it (``offer_to``, a :meth:`~Bm25Daat.drive` with each of
    ``seeds`` and ``seed_room``, then one ``drive(to_end=True)``, then
    :meth:`~Bm25Daat.best`: the same calls to ``bm25_daat`` with the same arguments, so
    the same results), without its Python checks: for a caller that built ``terms``
    from an index's own lists (the C code checks every buffer, size and range again).
    ``flags``: :func:`daat_flags` (``more`` perhaps with :data:`CALL_SCRATCH` and
    :data:`SPARSE_MARKS`);
    ``offer``: ``(table, version, accept, limit, first, columns)`` as
    :meth:`Bm25Daat.offer_to` and ``drive`` take them (``first`` None or the int64 or int32 first
    seqs). With ``one_call`` and one seed, the seeding and the
    walk are one ``bm25_daat`` call (``more & 4096``: the same work in the same order, one
    call's set-up). Returns ``(score, rec)``, best first (a higher score, then a lower
    seq). O(the walk's work).

    Raises:
        TypeError, ValueError: As ``bm25_daat``, for an argument of the wrong type,
            shape or range.
        Whatever ``accept`` raises.
    """
    table, version, accept, limit, first, columns = offer
    core = _core()
    prefetch, more = flags
    q = len(terms)
    nums, scores, sticky, hs, hq, hr, hn, seen = _query_scratch(room, q, limit, seeds, seed_room)
    a_part, b_part, k1, b, avgdl, up = parts
    offered = (table, version, accept, hs, hq, hr, hn, seen, True, first, columns)
    if one_call and len(seeds) == 1:
        core.bm25_daat(
            terms, np.zeros(q, np.int64), lengths, a_part, b_part, k1, b, avgdl, up, -math.inf,
            budget, seeds[0], nums, scores, sticky, offered, prefetch, split_room, codes,
            more | _TO_END | _SEED_THEN_WALK, seed_room,
        )  # fmt: skip
    else:
        for seed in seeds:
            core.bm25_daat(
                terms, np.zeros(q, np.int64), lengths, a_part, b_part, k1, b, avgdl, up,
                -math.inf, budget, seed, nums[:seed_room] if seed_room else nums, scores,
                sticky, offered, prefetch, split_room, codes, more,
            )  # fmt: skip
        offered = (table, version, accept, hs, hq, hr, hn, seen, False, first, columns)
        core.bm25_daat(
            terms, np.zeros(q, np.int64), lengths, a_part, b_part, k1, b, avgdl, up,
            -math.inf, budget, -1, nums, scores, sticky, offered, prefetch, split_room, codes,
            more | _TO_END,
        )  # fmt: skip
    n = int(hn[0])
    items = zip(hs[:n].tolist(), hq[:n].tolist(), hr[:n], strict=True)
    return [(score, rec) for score, _, rec in sorted(items, key=_best_first)]


def bm25_query_steps(
    terms: list[DaatTerm],
    lengths: np.ndarray[Any, Any],
    parts: tuple[float, float, float, float, float, float],
    room: int,
    flags: tuple[int, int],
    split_room: float,
    codes: np.ndarray[Any, Any] | None,
    offer: tuple[list[Any], int, Any, int, bool],
    first_of: Callable[[], Any],
    seeds: list[int],
    seed_room: int,
    budget: int,
    clock: Callable[[], float],
) -> Generator[None, float | None, list[tuple[float, Any]]]:
    """:func:`bm25_query` in slices, for a caller that lets the owner write between two
    (the same calls to ``bm25_daat``, so the same results): a generator that yields
    once before its first core call, then after each. The value sent at a yield is the
    ``clock()`` time by which the caller wants the next one (its slice's end: the call
    runs whole steps until then, at least one, with the seeding and the walk in one
    call as ``one_call`` makes them while that time is ahead); ``None`` (``next``) asks
    for one step of about ``budget`` postings a call, as :meth:`Bm25Daat.drive` takes
    them. ``offer``:
    ``(table, version, accept, limit, columns)``; ``first_of()`` the index's first seqs
    (int64, or None) as of each call: the owner may replace them between two. The
    terms' arrays, ``lengths`` and ``codes`` are those taken at the start (only
    appended to). Returns as :func:`bm25_query`. O(the walk's work), plus a call's
    set-up (O(terms)) per yield.

    Raises:
        As :func:`bm25_query`.
    """
    table, version, accept, limit, columns = offer
    core = _core()
    prefetch, more = flags
    q = len(terms)
    nums, scores, sticky, hs, hq, hr, hn, seen = _query_scratch(room, q, limit, seeds, seed_room)
    cursors = np.zeros(q, np.int64)
    a_part, b_part, k1, b, avgdl, up = parts
    until = yield
    done = False
    left = 0.0 if until is None else until - clock()
    if left > 0.0 and len(seeds) == 1:  # the seeding and the walk in one call
        offered = (table, version, accept, hs, hq, hr, hn, seen, True, first_of(), columns)
        _, done = core.bm25_daat(
            terms, cursors, lengths, a_part, b_part, k1, b, avgdl, up, -math.inf, budget,
            seeds[0], nums, scores, sticky, offered, prefetch, split_room, codes,
            more | _TO_END | _SEED_THEN_WALK, seed_room, left,
        )  # fmt: skip
        if not done:
            until = yield
    else:
        # Bm25Daat.drive with each seed: a step each, its own starts (also where the
        # slice is over already, the query's set-up having taken it: the seeding alone,
        # not a step of the walk after it, before the caller's checkpoint).
        for seed in seeds:
            offered = (table, version, accept, hs, hq, hr, hn, seen, True, first_of(), columns)
            core.bm25_daat(
                terms, np.zeros(q, np.int64), lengths, a_part, b_part, k1, b, avgdl, up,
                -math.inf, budget, seed, nums[:seed_room] if seed_room else nums, scores,
                sticky, offered, prefetch, split_room, codes, more,
            )  # fmt: skip
            until = yield
    while not done:  # the walk, from where the call before left it
        offered = (table, version, accept, hs, hq, hr, hn, seen, False, first_of(), columns)
        if until is None:  # one step, as Bm25Daat.drive
            _, done = core.bm25_daat(
                terms, cursors, lengths, a_part, b_part, k1, b, avgdl, up, -math.inf, budget,
                -1, nums, scores, sticky, offered, prefetch, split_room, codes, more,
            )  # fmt: skip
        else:  # whole steps until the caller's time
            _, done = core.bm25_daat(
                terms, cursors, lengths, a_part, b_part, k1, b, avgdl, up, -math.inf, budget,
                -1, nums, scores, sticky, offered, prefetch, split_room, codes, more | _TO_END,
                0, max(until - clock(), 1e-9),
            )  # fmt: skip
        if not done:
            until = yield
    n = int(hn[0])
    items = zip(hs[:n].tolist(), hq[:n].tolist(), hr[:n], strict=True)
    return [(score, rec) for score, _, rec in sorted(items, key=_best_first)]


def bm25_add_terms(
    terms: list[str], index_terms: dict[str, Any], term_table: list[Any], num: int, make: Any
) -> list[int]:
    """The term loop of a new BM25 group ``num``: each distinct term of ``terms`` in
    first-occurrence order, with its count ``tf``: its posting list ``index_terms[term]``
    (``make(term, len(term_table))``, added to both, if missing) gets ``num`` and ``tf``
    appended and its ``df`` raised by one. Returns ``term.num << 8 | min(tf, 255)`` per
    term. O(len(terms)).

    Raises:
        TypeError, ValueError: Containers of the wrong type, a term that is not a str,
            or ``num`` not an int >= 0.
    """
    if type(terms) is not list or type(index_terms) is not dict or type(term_table) is not list:
        raise TypeError("terms and term_table must be lists and index_terms a dict")
    _need(type(num) is int and num >= 0, "num must be an int >= 0")
    nums: list[int] = _core().bm25_add_terms(terms, index_terms, term_table, num, make)
    return nums
