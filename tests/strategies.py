"""Hypothesis strategies shared by the tests."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from actormem import MemoryCategory, MemoryEntry

BASE_TIME = datetime(2026, 1, 1, tzinfo=UTC)


#: ``ACTORMEM_TEST_PROFILE``: how hard the suite's random tests look (docs/testing.md).
#: ``ci``, the default and what the README's ``python -m pytest -q`` runs in CI: every
#: test and every rule, with this fraction of the example counts written in the tests;
#: ``thorough``: the counts as written (the suite's counts until 2026-12-07), for a long
#: run by hand or at night. ``tests/conftest.py`` loads the Hypothesis profile of the same
#: name (its default example count for tests that name none, no deadline).
PROFILE_SCALES = {"ci": 0.3, "thorough": 1.0}


def _profile() -> str:
    name = os.environ.get("ACTORMEM_TEST_PROFILE", "ci") or "ci"
    if name not in PROFILE_SCALES:
        raise ValueError(
            f"ACTORMEM_TEST_PROFILE must be one of {sorted(PROFILE_SCALES)}, not {name!r}"
        )
    return name


def _examples_scale() -> float:
    """The factor on the example counts: ``ACTORMEM_EXAMPLES_SCALE`` when set (a number
    in (0, 100]; ``stress/asan_kernels.sh`` sets it), else the profile's."""
    raw = os.environ.get("ACTORMEM_EXAMPLES_SCALE")
    if raw is None:
        return PROFILE_SCALES[_profile()]
    try:
        scale = float(raw)
    except ValueError:
        scale = -1.0
    if not 0 < scale <= 100:
        raise ValueError(f"ACTORMEM_EXAMPLES_SCALE must be a number in (0, 100], not {raw!r}")
    return scale


PROFILE = _profile()
#: Multiplies the example counts of the tests that use :func:`examples` (and the default
#: count of the tests that name none, ``tests/conftest.py``): the profile's factor, or
#: ``ACTORMEM_EXAMPLES_SCALE`` (the AddressSanitizer run of the kernel tests,
#: ``stress/asan_kernels.sh``, sets it lower still: an example costs several times more
#: there and the same tests ran in the plain suite just before).
EXAMPLES_SCALE = _examples_scale()


def examples(count: int) -> int:
    """``count`` Hypothesis examples scaled by :data:`EXAMPLES_SCALE` (at least 1)."""
    return max(1, round(count * EXAMPLES_SCALE))


def run_machine(machine: type[RuleBasedStateMachine], count: int, steps: int) -> None:
    """Run the state machine ``machine`` for :func:`examples` ``(count)`` examples of up
    to ``steps`` steps each, with no deadline (``machine.TestCase()`` with those settings).
    """
    run_state_machine_as_test(
        machine,
        settings=settings(max_examples=examples(count), stateful_step_count=steps, deadline=None),
    )


# A small vocabulary with overlaps (substrings, case, non-ASCII, punctuation) so that
# queries match often and in tricky ways.
WORDS = [
    "deploy", "deploys", "Deploy", "blue", "the", "then", "rust", "Rust", "go", "a",
    "ab", "é", "É", "İstanbul", "x.y", "{\"k\":1}", "file", "search", "glob", "ß", "SS",
]
TAGS = ["infra", "deploy", "Blue Team", "x", "rust-lang", "İ"]

words = st.sampled_from(WORDS)
texts = st.lists(words, max_size=6).map(" ".join) | st.text(
    alphabet=st.sampled_from("abé İ\t\nxy.-"), max_size=12
)
queries = st.lists(words, max_size=4).map(" ".join) | st.text(
    alphabet=st.sampled_from("abé İ\txy.-"), max_size=8
)
relevances = st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.5, 0.8, 0.95, 1.0]) | st.floats(0.0, 1.0)
categories = st.sampled_from(list(MemoryCategory))
namespaces = st.sampled_from([(), ("t",), ("t", "acme"), ("t", "acme-corp"), ("u",)])
times = st.integers(0, 30 * 24 * 3600).map(lambda s: BASE_TIME + timedelta(seconds=s))


@st.composite
def entries(draw: st.DrawFn, id: uuid.UUID | None = None) -> MemoryEntry:
    return MemoryEntry(
        id=id if id is not None else uuid.UUID(int=draw(st.integers(0, 2**64))),
        category=draw(categories),
        memory=draw(texts),
        tags=draw(st.lists(st.sampled_from(TAGS), max_size=2)),
        created_at=draw(times),
        relevance=draw(relevances),
        validated=draw(st.booleans()),
        namespace=draw(namespaces),
        access_count=draw(st.integers(0, 3)),
    )
