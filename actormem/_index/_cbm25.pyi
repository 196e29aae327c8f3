from typing import Any

BLOCK: int

def bm25_blocks(
    groups: Any, tfs: Any, lengths: Any, first: int, stop: int, out: Any, /
) -> None: ...
def bm25_dense_fill(bits: Any, groups: Any, tfs: Any, start: int, stop: int, /) -> None: ...
def bm25_daat(
    terms: list[Any],
    cursors: Any,
    lengths: Any,
    a_part: float,
    b_part: float,
    k1: float,
    b: float,
    avgdl: float,
    up: float,
    theta: float,
    budget: int,
    seed: int,
    nums_out: Any,
    scores_out: Any,
    sticky: Any = None,
    offer: tuple[Any, ...] | None = None,
    /,
) -> tuple[int, bool]: ...
def bm25_add_terms(
    terms: list[str], index_terms: dict[str, Any], term_table: list[Any], num: int, make: Any, /
) -> list[int]: ...
