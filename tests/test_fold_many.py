"""A list's fold hashes in one C call, and the texts' digest fed from their own data
(issue #20, branch ``open10``): the same values as the paths before them.

``fold_hash_many`` (``textfold._FOLD_MANY``) must give ``fold_hash``'s and
``fold_hash_direct``'s values exactly, for plain ASCII texts (hashed four side by side,
eight bytes lowered at a time) and every other text; ``utf8_feed``
(``persist._C_DIGEST``) must feed a hash the bytes ``text_digest`` fed it before. An
open with both on equals one with both off.
"""

from __future__ import annotations

import hashlib
import shutil
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._engine import state as state_module
from actormem._index import kernels, persist, textfold

from .strategies import examples
from .test_decode_c import _opened
from .test_open_fast import _rows

wo = kernels._wo
pytestmark = pytest.mark.skipif(
    wo is None or not hasattr(wo, "fold_hash_many"), reason="word-overlap core not built"
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


def _one_by_one(texts: list[str], direct: bool) -> list[int]:
    assert wo is not None
    fn = wo.fold_hash_direct if direct else wo.fold_hash
    return list(map(fn, texts))


@settings(max_examples=examples(150), deadline=None)
@given(texts=st.lists(any_text, max_size=14))
def test_fold_hash_many_equals_one_by_one(texts: list[str]) -> None:
    assert wo is not None
    for direct in (False, True):
        many = wo.fold_hash_many(texts, direct)
        assert many == _one_by_one(texts, direct)
        assert many == [textfold.fold_hash_python(t) for t in texts]


def test_fold_hash_many_at_every_length_and_lane_mix() -> None:
    """Lengths 0-40 around the 8-byte words, in lists where lanes end at every offset."""
    assert wo is not None
    texts = ["Ab Cd@Z[" * 5, "x", "", "Hello World", "a  b", " x", "x ", "é z"]
    texts += ["AZaz@[`{ Q"[: n % 11] * (n // 11 + 1) for n in range(41)]
    texts += ["word " * n + "END" for n in range(20)]
    # UCS-2 texts: plain ones (a casefold of one code point each: the ellipsis, the
    # Kelvin sign) at every length, and others (İ folds to two, U+3000 is a space)
    texts += ["…Ab \u212a"[: n % 5] * (n // 5 + 1) for n in range(1, 30)]
    texts += ["İ x…", "a\u3000b…", "\u212a\u212a …", "…  x", " …"]
    for start in range(len(texts)):
        chunk = texts[start:] + texts[:start]
        for direct in (False, True):
            assert wo.fold_hash_many(chunk, direct) == _one_by_one(chunk, direct)


def test_fold_hashes_follows_its_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = ["Some Text", "some  text", "ÉTÉ"]
    assert textfold.fold_hashes(texts) == list(map(textfold.fold_hash, texts))

    class Sub(str):
        pass

    assert textfold.fold_hashes([*texts, Sub("x")]) is None  # the caller's own path
    assert textfold.fold_hashes(tuple(texts)) is None  # type: ignore[arg-type]
    monkeypatch.setattr(textfold, "_FOLD_MANY", False)
    assert textfold.fold_hashes(texts) is None


def test_the_c_functions_refuse_bad_arguments() -> None:
    assert wo is not None

    class Sub(str):
        pass

    for bad in (("a", "b"), "ab", None, ["a", 1], ["a", Sub("b")], [b"a"]):
        with pytest.raises(TypeError):
            wo.fold_hash_many(bad, True)
        with pytest.raises(TypeError):
            wo.utf8_feed(hashlib.blake2b().update, bad)
    with pytest.raises(TypeError):
        wo.fold_hash_many(["a"])
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


async def test_an_open_with_the_fold_list_and_the_fed_digest_equals_one_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actormem import WordOverlapScorer, open_memory

    path = str(tmp_path / "m.db")
    rows = _rows(23, 400)
    odd = ["Tab\there", "two  spaces", " lead", "trail ", "MiXeD CaSe", "…ellipsis…", "ß SS"]
    twins = [attrs.evolve(e, id=uuid.uuid4(), tags=("twin",)) for _, e in rows[::9]]
    for (_, e), t in zip(rows[: len(odd)], odd, strict=True):  # texts that are not plain
        twins += [attrs.evolve(e, id=uuid.uuid4(), memory=s) for s in (t, t.lower())]
    async with open_memory(path=path, scorer=WordOverlapScorer()) as memory:
        await memory.store_many([entry for _, entry in rows] + twins)  # texts repeat
        for _, entry in rows[::5]:
            await memory.delete(entry.id)
    await _opened(path)  # the close above kept no image (deletes); this one writes it
    copies = [str(tmp_path / f"{name}.db") for name in ("new", "old")]
    for copy in copies:
        shutil.copyfile(path, copy)
    assert textfold._FOLD_MANY
    assert persist._C_DIGEST
    assert state_module._BULK_FOLDS
    new = await _opened(copies[0])
    monkeypatch.setattr(textfold, "_FOLD_MANY", False)
    monkeypatch.setattr(persist, "_C_DIGEST", False)
    old = await _opened(copies[1])
    assert new == old
