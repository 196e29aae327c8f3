"""mainjob19: the main job's process outside its run, part 3. Each shortcut against the
path it replaces (its knob off):

* ``_swarm._PRESENT_FROM_RECORDS``: the accounting's present ids taken from the
  snapshot's records are the ids of the snapshot's entries, and the accounting is the
  same, on a memory with upserts, deletes, evictions, retrieves and an older snapshot
  held;
* ``_toolcalls._ENCODE_PARSED_ONCE``: the C encoder made once writes what
  ``_INPUT_ENCODER.encode`` writes, or raises the same error, for any parsed JSON value;
* ``_toolcalls._CALLS_BY_SLOTS``: a call made by setting its slots is the attrs
  ``__init__``'s call, field for field (types too), and the guard refuses any class
  whose ``__init__`` would do more than set them;
* both together: random tool-call files read to the same calls, texts, digest or error;
* ``_main._VERSION_ONCE``: the same version string, looked up once.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import actormem._version as _version_mod
from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._entry import MAX_MEMORY_CHARS
from actormem._storage.jsonl import JsonlError
from actormem.agent import _hooks, _toolcalls
from actormem.agent._toolcalls import ToolCall, read_tool_calls
from actormem.cli import _swarm
from actormem.cli._swarm import Removals, check_accounting

from .realdata import real_file
from .strategies import examples

ROOT = Path(__file__).resolve().parent.parent

# ---------------------------------------------------------------- the accounting


def _accounting_both_ways(memory: Any, **kwargs: Any) -> tuple[Any, Any]:
    out = []
    for knob in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_swarm, "_PRESENT_FROM_RECORDS", knob)
            out.append(check_accounting(memory, **kwargs).to_json())
    return out[0], out[1]


@settings(max_examples=examples(12), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), capacity=st.sampled_from([None, 5, 12]))
def test_present_ids_from_records_are_the_snapshots(seed: int, capacity: int | None) -> None:
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "eps"]

    async def main() -> None:
        removals = Removals()
        async with open_memory(capacity=capacity, on_remove=removals) as memory:
            removals.start_run()
            before = memory.statistics()
            stored: list[Any] = []
            held = None
            for step in range(rng.randrange(5, 40)):
                roll = rng.random()
                if roll < 0.5 or not stored:
                    text = " ".join(rng.choices(words, k=3))
                    entry = MemoryEntry.new(MemoryCategory.FACT, text)
                    if stored and rng.random() < 0.2:  # an upsert of an earlier id
                        entry = attrs.evolve(entry, id=rng.choice(stored))
                    await memory.store(entry)
                    stored.append(entry.id)
                elif roll < 0.8:
                    await memory.retrieve(rng.choice(words), 3)  # access bookkeeping
                else:
                    await memory.delete(rng.choice(stored))
                if step == 3:
                    held = memory.snapshot()  # keeps older record versions
            await memory.delete(MemoryEntry.new(MemoryCategory.FACT, "x").id)  # settle
            view = memory.snapshot()
            from_records = {rec.entry._id for rec in view._view.records()}
            assert from_records == {e._id for e in view}
            on, off = _accounting_both_ways(
                memory, initial=[], stored=stored, removals=removals, before=before
            )
            assert on == off
            assert on["lost"] == 0
            del held

    trio.run(main)


def test_a_memory_without_records_is_iterated() -> None:
    # A server's memory (``_RemoteMemory``) hands a list of entries as its snapshot.
    entries = [MemoryEntry.new(MemoryCategory.FACT, f"t{i}") for i in range(4)]

    class Listed:
        def statistics(self) -> Any:
            return _swarm.MemoryStatistics.__new__(_swarm.MemoryStatistics)

        def snapshot(self) -> list[MemoryEntry]:
            return entries

    stats = _stats_zero()
    memory = Listed()
    memory.statistics = lambda: stats  # type: ignore[method-assign]
    removals = Removals()
    removals.start_run()
    on, off = _accounting_both_ways(
        memory, initial=[], stored=[e.id for e in entries], removals=removals, before=stats
    )
    assert on == off
    assert on["lost"] == 0


def _stats_zero() -> Any:
    import types

    fields = ("upserts", "evictions", "pruned", "merged", "deletes")
    return types.SimpleNamespace(**dict.fromkeys(fields, 0))


# ---------------------------------------------------------------- the parsed inputs


_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=8)  # surrogates too
_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    _text,
)
_json = st.recursive(
    _leaf, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_text, kids, max_size=3),
    max_leaves=10,
)  # fmt: skip


def _outcome(make: Any) -> tuple[Any, ...]:
    try:
        return ("ok", make())
    except (TypeError, ValueError, RecursionError) as exc:
        return ("error", type(exc), str(exc))


@settings(max_examples=examples(200), deadline=None)
@given(_json)
def test_the_encoder_made_once_writes_what_encode_writes(value: Any) -> None:
    encode = _toolcalls._TREE_ENCODE
    assert encode is not None
    got = _outcome(lambda: "".join(encode(value, 0)))
    want = _outcome(lambda: _hooks._INPUT_ENCODER.encode(value))
    assert got == want
    again = _outcome(lambda: "".join(encode(value, 0)))  # nothing kept from a failure
    assert again == want


def test_the_encoder_made_once_follows_the_kept_encoder() -> None:
    # Made from _INPUT_ENCODER's own settings: a NaN refused, keys sorted, non-ASCII kept.
    encode = _toolcalls._TREE_ENCODE
    assert "".join(encode({"b": 1, "a": ["é", 2.5]}, 0)) == '{"a":["é",2.5],"b":1}'
    with pytest.raises(ValueError, match="Out of range float"):
        encode([float("nan")], 0)


# ---------------------------------------------------------------- calls by slots


def test_a_call_by_slots_is_the_attrs_call() -> None:
    assert _toolcalls._SLOT_SETTERS is not None
    args = ("src", "ep", 3, "tool", {"k": [1, "é"]}, "result " * 200, 0.5)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_toolcalls, "_CALLS_BY_SLOTS", False)
        plain = _toolcalls._made(*args, parsed=True)
    fast = _toolcalls._made(*args, parsed=True)
    assert type(fast) is ToolCall
    assert attrs.asdict(fast) == attrs.asdict(plain)
    assert {f.name: type(getattr(fast, f.name)) for f in attrs.fields(ToolCall)} == {
        f.name: type(getattr(plain, f.name)) for f in attrs.fields(ToolCall)
    }
    assert fast == plain
    assert repr(fast) == repr(plain)
    assert fast.text is not None
    assert fast.text == plain.text
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        fast.step = 4  # type: ignore[misc]
    assert attrs.evolve(fast, step=5).step == 5


def test_a_call_whose_text_an_entry_refuses_keeps_none() -> None:
    for tool in ("t" * MAX_MEMORY_CHARS, "lone \ud800"):
        args = ("src", "ep", 0, tool, 1, "r", None)
        for knob in (True, False):
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(_toolcalls, "_CALLS_BY_SLOTS", knob)
                assert _toolcalls._made(*args, parsed=True).text is None


def _variant(**changes: Any) -> type:
    fields: dict[str, Any] = {
        "source": attrs.field(),
        "episode": attrs.field(),
        "step": attrs.field(),
        "tool": attrs.field(),
        "input": attrs.field(),
        "result": attrs.field(),
        "reward": attrs.field(default=None),
        "text": attrs.field(default=None, init=False, eq=False),
    }
    slots = changes.pop("slots", True)
    body = changes.pop("body", {})
    fields.update(changes)
    return attrs.frozen(these=fields, slots=slots, kw_only=True)(type("Variant", (), body))


@pytest.mark.parametrize(
    "make",
    [
        lambda: _variant(step=attrs.field(validator=attrs.validators.instance_of(int))),
        lambda: _variant(step=attrs.field(converter=int)),
        lambda: _variant(extra=attrs.field(default=0)),
        lambda: _variant(slots=False),
        lambda: _variant(body={"__attrs_post_init__": lambda self: None}),
        lambda: _variant(body={"__attrs_pre_init__": lambda self: None}),
        lambda: type("Plain", (), {}),
    ],
    ids=["validator", "converter", "extra field", "no slots", "post init", "pre init", "plain"],
)
def test_the_slot_guard_refuses_a_class_whose_init_does_more(make: Any) -> None:
    assert _toolcalls._slot_setters(make()) is None


def test_the_slot_guard_takes_a_class_like_tool_call() -> None:
    assert _toolcalls._slot_setters(_variant()) is not None
    assert _toolcalls._slot_setters(ToolCall) is not None


# ---------------------------------------------------------------- whole files


def _record(rng: random.Random, value: Any) -> object:
    if rng.random() < 0.04:
        return [1, 2]
    rec: dict[str, object] = {
        "source": rng.choice(["s", "", "tau"]) if rng.random() < 0.1 else "s",
        "episode": f"e{rng.randrange(4)}",
        "step": rng.choice([0, 1, -1, True]) if rng.random() < 0.1 else rng.randrange(9),
        "tool": rng.choice(["read", "grep", "ünï", "t" * MAX_MEMORY_CHARS]),
        "input": value,
        "result": "r" * rng.randrange(0, 700) + rng.choice(["", "é", "\ud83d\ude00", "\ud800"]),
    }
    if rng.random() < 0.3:
        rec["reward"] = rng.choice([1, 0.5, None, "x", 10**400, float("nan")])
    if rng.random() < 0.04:
        del rec["input"]
    return rec


def _read_both(path: Path) -> tuple[Any, Any]:
    out = []
    for knob in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_toolcalls, "_ENCODE_PARSED_ONCE", knob)
            mp.setattr(_toolcalls, "_CALLS_BY_SLOTS", knob)
            for read_once in (True, False):
                mp.setattr(_toolcalls, "_READ_ONCE", read_once)
                try:
                    calls, digest = read_tool_calls(path)
                except JsonlError as exc:
                    out.append(("error", str(exc)))
                    continue
                out.append(("ok", digest, [
                    (attrs.asdict(c), c.text, type(c.reward), type(c.step), repr(c))
                    for c in calls
                ]))  # fmt: skip
    assert out[0] == out[1]  # the knobs on, read once or streamed
    assert out[2] == out[3]
    return out[0], out[2]


@settings(max_examples=examples(60), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), values=st.lists(_json, max_size=8))
def test_files_read_the_same_either_way(
    tmp_path_factory: pytest.TempPathFactory, seed: int, values: list[Any]
) -> None:
    rng = random.Random(seed)
    lines = []
    for value in values:
        try:
            lines.append(json.dumps(_record(rng, value), ensure_ascii=rng.random() < 0.5))
        except ValueError:  # a value json cannot write (a NaN key is fine; nothing else)
            continue
        if rng.random() < 0.05:
            lines.append("[" * 3000 + "]" * 3000)  # deep: both ways the same
    path = tmp_path_factory.mktemp("calls") / "c.jsonl"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    on, off = _read_both(path)
    assert on == off


def test_the_shared_tool_calls_read_the_same_either_way() -> None:
    path = real_file("tool_calls.jsonl")
    on, off = _read_both(path)
    assert on == off
    assert on[0] == "ok"
    assert len(on[2]) > 1000


# ---------------------------------------------------------------- the version


def test_the_version_is_looked_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    real = importlib.metadata.version
    calls: list[str] = []

    def counting(name: str) -> str:
        calls.append(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", counting)
    monkeypatch.setattr(_version_mod, "_version_found", None)
    # importlib.metadata's way (startup24's direct read is tested in test_startup24.py)
    monkeypatch.setattr(_version_mod, "_VERSION_DIRECT", False)
    monkeypatch.setattr(_version_mod, "_VERSION_ONCE", False)
    off = [_version_mod.package_version(), _version_mod.package_version()]
    assert len(calls) == 2
    monkeypatch.setattr(_version_mod, "_VERSION_ONCE", True)
    on = [_version_mod.package_version(), _version_mod.package_version()]
    assert len(calls) == 3
    assert on == off
    assert on[0] == real("actormem")
