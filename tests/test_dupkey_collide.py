"""The state's duplicate key (30 bits of a hash: of the fold, or of the fold's
``fold_hash``) shared by texts whose folds differ: found at run time (string hashes are
salted per process) by a birthday search, then stored with their equal-fold variants.
Consolidation must merge each equal-fold set into one and never merge across the
collision; deletes inside the shared group must leave it consistent; both keyings (by
``fold_hash``, by the fold, ``textfold._FOLD_HASH``) must end with the same entries.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine import state as state_mod
from actormem._engine.state import MemoryState
from actormem._index import textfold
from actormem._index.textfold import fold


def _collision(dupkey: object) -> tuple[str, str]:
    """Two texts with different folds and the same ``dupkey`` (30 bits: ~2**15 tries)."""
    seen: dict[int, str] = {}
    i = 0
    while True:
        text = f"Fact number {i} about the Straße"
        entry = SimpleNamespace(
            namespace=(), category=MemoryCategory.FACT, memory=text, key=None, value=None
        )
        k = dupkey(SimpleNamespace(entry=entry))  # type: ignore[operator]
        other = seen.get(k)
        if other is not None and fold(other) != fold(text):
            return other, text
        seen[k] = text
        i += 1


def _variants(text: str) -> list[str]:
    """``text`` and texts with the same fold (case, whitespace, ß / SS)."""
    return [text, "  " + text.upper() + "\t", text.replace(" ", "\u2003\n"), text.casefold()]


@pytest.mark.parametrize("by_hash", [True, False])
def test_a_shared_key_merges_equal_folds_only(
    by_hash: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(textfold, "_FOLD_HASH", by_hash)
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    key_of = state._dupkey
    hashed = by_hash and textfold._fold_hash_c is not None
    assert key_of is (state_mod._dupkey_hashed if hashed else state_mod._dupkey)
    a, b = _collision(key_of)
    n = 0
    ids: dict[str, list[uuid.UUID]] = {a: [], b: []}
    for text in (a, b):
        for variant in _variants(text):
            n += 1
            entry = MemoryEntry(category=MemoryCategory.FACT, memory=variant, id=uuid.UUID(int=n))
            state.store(entry)
            ids[text].append(entry.id)
    state.publish()
    state._check()
    assert len(state._dup_keys) == 1  # one group holds all eight
    # A delete inside the shared group, then consolidation.
    state.delete(ids[b][1])
    state.publish()
    state._check()
    stats = state.consolidate()
    state.publish()
    state._check()
    assert stats.merged == 3 + 2
    left = sorted(fold(r.entry.memory) for r in state.view().records())
    assert left == sorted([fold(a), fold(b)])
    (shared,) = state._dup_keys  # the two survivors still share their key
    assert len(state._dup_group(shared)) == 2
    # A new equal-fold copy of b groups with the survivors again, and merges alone.
    state.store(MemoryEntry(category=MemoryCategory.FACT, memory=b.upper()))
    state.publish()
    assert state.consolidate().merged == 1
    state.publish()
    state._check()
    assert sorted(fold(r.entry.memory) for r in state.view().records()) == left
