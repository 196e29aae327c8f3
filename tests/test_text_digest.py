"""The texts' digest fed from their own data (issue #20, branch ``open10``): the bytes
``persist._feed`` gives a hash must be those ``text_digest`` fed it before (the lengths,
then the joined UTF-8), and an open with the core's encoder equals one without it.
Branch open10's C ``utf8_feed`` (the GIL held) was dropped by branch tidy24b: ``_feed``
now writes a part of exact strs by the core's ``texts_encode`` runs (open19's), the
digest's only C encoder. (The branch's ``fold_hash_many`` was dropped at its merge: the
C ``dup_key`` a row of branch ``store8`` made the load's keys faster.)
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._engine import state as state_module
from actormem._index import imagehash as _hash
from actormem._index import kernels, persist

from .strategies import examples
from .test_decode_c import _opened, imaged_copies
from .test_open_fast import _rows

wo = kernels._wo
pytestmark = pytest.mark.skipif(
    wo is None or not hasattr(wo, "texts_encode"), reason="word-overlap core not built"
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


def _no_encoder() -> bool:
    return False


def _digest_old(texts: Any, extra: Any = ()) -> str:
    h = _hash.new128()
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
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persist, "_encoder", _no_encoder)
        assert persist.text_digest(texts, extra) == want


def test_feed_chunks_and_odd_updates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Texts across the 1 MiB runs; lone surrogates; an update that raises stops the
    feed with its error; a part holding a str subclass is joined, the other part of
    the same call written by the core's runs."""
    texts = ["a" * 700_000, "é" * 300_000, "b" * 1_500_000, "\ud800x", "", "z"]
    got: list[bytes] = []
    persist._feed(lambda b: got.append(bytes(b)), texts, ())
    lens = b"".join(len(t).to_bytes(8, "little", signed=True) for t in texts)
    assert b"".join(got) == lens + "".join(texts).encode("utf-8", "surrogatepass")
    assert len(got) >= 3  # 2.8 MB
    assert all(len(chunk) <= 1 << 20 for chunk in got)
    assert persist.text_digest(texts) == _digest_old(texts)

    def boom(b: Any) -> None:
        if len(b) > 100:
            raise KeyError("boom")

    with pytest.raises(KeyError):
        persist._feed(boom, ["x" * 2_000_000], ())

    class Sub(str):
        pass

    calls: list[int] = []
    hash_encoded = persist._hash_encoded

    def counted(*args: Any) -> bool:
        calls.append(len(args[0][0]))
        return hash_encoded(*args)

    monkeypatch.setattr(persist, "_hash_encoded", counted)
    for texts, extra in ((["a", Sub("b")], ["c", "dé"]), (["a", "é"], [Sub("c")])):
        h = _hash.new128()
        calls.clear()
        persist._feed(h.update, texts, extra)
        assert calls == [2]  # the part of exact strs by the core's runs, the other joined
        assert h.hexdigest() == _digest_old(texts, extra)
        assert persist.text_digest(texts, extra) == _digest_old(texts, extra)


async def test_an_open_with_the_fed_digest_equals_one_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    rows = _rows(23, 400)
    odd = ["Tab\there", "two  spaces", " lead", "trail ", "MiXeD CaSe", "…ellipsis…", "ß SS"]
    extra = []
    for (_, e), t in zip(rows[: len(odd)], odd, strict=True):  # texts that are not plain
        extra += [attrs.evolve(e, id=uuid.uuid4(), memory=s) for s in (t, t.lower())]
    copies = await imaged_copies(tmp_path, rows, extra)
    assert persist._encoder()
    assert state_module._BULK_FOLDS
    new = await _opened(copies[0])
    monkeypatch.setattr(persist, "_encoder", _no_encoder)
    old = await _opened(copies[1])
    assert new == old
