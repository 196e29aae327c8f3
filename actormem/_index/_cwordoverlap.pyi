from typing import Any

def add_text(post: dict[str, Any], low: str, gid: int, vocab: Any, /) -> int: ...
def count_words(
    words: list[str],
    mults: list[int],
    start: int,
    budget: int,
    limit: int,
    grams: dict[str, list[int]],
    items: dict[int, str],
    cache: dict[str, Any],
    cache_size: int,
    post: dict[str, Any],
    skip: dict[str, Any],
    short: dict[str, int],
    counts: Any,
    n: int,
    planes: int = ...,
    memo: list[Any] | None = ...,
    epoch: int = ...,
    memo_cap: int = ...,
    flags: int = ...,
    /,
) -> tuple[int, list[int]]: ...
def text_masks(
    texts: list[str], pair_lo: Any, pair_hi: Any, lo: Any, hi: Any, start: int, /
) -> None: ...
def add_text_known(post: dict[str, Any], low: str, gid: int, vocab: Any, /) -> int: ...
def fold_ascii(text: str, /) -> str | None: ...
