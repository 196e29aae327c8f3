from typing import Any

def bm25_accumulate(
    groups: Any,
    tfs: Any,
    start: int,
    end: int,
    lengths: Any,
    acc: Any,
    wi: float,
    a_part: float,
    b_part: float,
    tau: float,
    in_top: Any,
    nums_out: Any,
    hot_out: Any,
    /,
) -> tuple[int, int]: ...
def bm25_refine(
    groups: Any,
    tfs: Any,
    count: int,
    cands: Any,
    part: Any,
    lengths: Any,
    wi: float,
    a_part: float,
    b_part: float,
    up: float,
    rest: float,
    theta: float,
    keep_out: Any,
    /,
) -> int: ...
def bm25_max_sat(
    groups: Any, tfs: Any, start: int, stop: int, lengths: Any, a_part: float, kr: float, /
) -> float: ...
def wo_count_dense(counts: Any, lo: int, hi: int, sets: list[Any], mults: list[int], /) -> None: ...
def wo_count_sparse(
    counts: Any, gids: Any, lo: int, hi: int, n: int, m: int, mark: Any, word: int, /
) -> None: ...
def wo_scan(
    recent: list[str], lo: int, hi: int, mod: int, word: str, rare: bool = ..., wide: bool = ..., /
) -> list[int]: ...
def wo_scan_mark(
    recent: list[str], lo: int, hi: int, mod: int, word: str, rare: bool, wide: bool, dense: Any, /
) -> int: ...
def bm25_exact(
    terms: Any, position: dict[int, int], query: list[Any], num: int, norm: float, /
) -> float: ...
def wo_join(lists: list[Any], n: int, ids: Any, dense: Any, /) -> int: ...
def huge_advise(buf: Any, advice: int = ..., /) -> int: ...
