"""The texts' digest fed from their own data (issue #20, branch ``open10``): ``utf8_feed``
(``persist._C_DIGEST``) must feed a hash the bytes ``text_digest`` fed it before, and an
open with it on equals one with it off. (The branch's ``fold_hash_many`` was dropped at
its merge: the C ``dup_key`` a row of branch ``store8`` made the load's keys faster.)
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._engine import state as state_module
from actormem._index import kernels, persist

from .strategies import examples
from .test_decode_c import _opened, imaged_copies
from .test_open_fast import _rows

wo = kernels._wo
pytestmark = pytest.mark.skipif(
    wo is None or not hasattr(wo, "utf8_feed"), reason="word-overlap core not built"
)

# Bytes where the plain test and the SWAR lowering change their answer: controls and
# whitespace, the space, the letters' edges ('@', 'A', 'Z', '[', '`', 'a', 'z', '{'), DEL.
EDGES = "\t\n\x0b\x0c\r\x1c\x1f\x00\x01 !@AZ[`az{\x7f"
ascii_texts = st.text(alphabet=st.sampled_from(EDGES + "abcXYZ09 "), max_size=40)
plain_words = st.lists(
    st.text(alphabet=st.sampled_from("@AZ[`az{\x7fQq5"), min_size=1, max_size=19), max_size=5
).map(" ".join)
other_texts = st.text(
    alphabet=st.one_of(
        st.sampled_from(EDGES + "Kß…İ\u00a0\u2003\u3000\u212a"),  # Kelvin sign folds to 'k'
        st.characters(codec="utf-8"),
    ),
    max_size=30,
)
any_text = st.one_of(ascii_texts, plain_words, other_texts)


def test_the_c_functions_refuse_bad_arguments() -> None:
    assert wo is not None

    class Sub(str):
        pass

    for bad in (("a", "b"), "ab", None, ["a", 1], ["a", Sub("b")], [b"a"]):
        with pytest.raises(TypeError):
            wo.utf8_feed(hashlib.blake2b().update, bad)
    with pytest.raises(TypeError):
        wo.utf8_feed(None, ["a"])
    with pytest.raises(TypeError):
        wo.utf8_feed(hashlib.blake2b().update)


def _digest_old(texts: Any, extra: Any = ()) -> str:
    h = hashlib.blake2b(digest_size=16)
    for part in (texts, extra):
        h.update(b"".join(len(t).to_bytes(8, "little", signed=True) for t in part))
        h.update("".join(part).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


@settings(max_examples=examples(100), deadline=None)
@given(
    texts=st.lists(st.one_of(any_text, st.text(max_size=8)), max_size=12),
    extra=st.lists(any_text, max_size=3),
)
def test_text_digest_fed_from_the_texts_equals_the_join(texts: list[str], extra: list[str]) -> None:
    want = _digest_old(texts, extra)
    assert persist.text_digest(texts, extra) == want
    assert persist.text_digest(tuple(texts), tuple(extra)) == want  # the Python path
    persist_c = persist._C_DIGEST
    try:
        persist._C_DIGEST = False
        assert persist.text_digest(texts, extra) == want
    finally:
        persist._C_DIGEST = persist_c


def test_utf8_feed_chunks_and_odd_updates() -> None:
    """Texts across the 1 MiB chunks; lone surrogates; an update that raises, or that
    resizes the buffer it is given, stops the feed with its error."""
    assert wo is not None
    texts = ["a" * 700_000, "é" * 300_000, "b" * 1_500_000, "\ud800x", "", "z"]
    got: list[bytes] = []
    wo.utf8_feed(lambda b: got.append(bytes(b)), texts)
    lens = b"".join(len(t).to_bytes(8, "little", signed=True) for t in texts)
    assert got[0] == lens
    assert b"".join(got[1:]) == "".join(texts).encode("utf-8", "surrogatepass")
    assert all(len(chunk) <= 1 << 20 for chunk in got[1:])
    assert persist.text_digest(texts) == _digest_old(texts)

    def boom(b: Any) -> None:
        if len(b) > 100:
            raise KeyError("boom")

    with pytest.raises(KeyError):
        wo.utf8_feed(boom, ["x" * 2_000_000])

    def shrink(b: Any) -> None:
        if isinstance(b, bytearray):
            b.clear()

    with pytest.raises(RuntimeError):
        wo.utf8_feed(shrink, ["x" * 2_000_000, "y"])
    kept: list[Any] = []
    wo.utf8_feed(kept.append, ["x" * 10, "y"])  # a buffer kept by update stays valid
    assert bytes(kept[1]) == b"x" * 10 + b"y"


async def test_an_open_with_the_fed_digest_equals_one_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    rows = _rows(23, 400)
    odd = ["Tab\there", "two  spaces", " lead", "trail ", "MiXeD CaSe", "…ellipsis…", "ß SS"]
    extra = []
    for (_, e), t in zip(rows[: len(odd)], odd, strict=True):  # texts that are not plain
        extra += [attrs.evolve(e, id=uuid.uuid4(), memory=s) for s in (t, t.lower())]
    copies = await imaged_copies(tmp_path, rows, extra)
    assert persist._C_DIGEST
    assert state_module._BULK_FOLDS
    new = await _opened(copies[0])
    monkeypatch.setattr(persist, "_C_DIGEST", False)
    old = await _opened(copies[1])
    assert new == old
