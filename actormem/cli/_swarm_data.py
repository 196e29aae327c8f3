"""What a swarm replays: episodes of tool calls, from real files or a seeded generator.

Theory of operation
-------------------
An :class:`Episode` is the tool calls of one (source, episode) pair, ordered by step.
A :class:`Workload` hands episodes out one at a time to whichever agent asks next
(:meth:`Workload.take`), synchronously, so the agents of one trio run share it without a
lock. It ends after its ``limit`` of episodes, or when its source runs dry.

* :func:`replay_workload` deals real episodes ``scale`` times. Copy ``k`` of an episode
  gets the id ``"{episode}#{k}"`` (when ``scale > 1``), so every copy is a distinct episode
  whose entries live in a namespace of their own. The longest episodes go first, all
  copies of one episode together (ties in file order): an agent that drew a 2,000-step
  episode near the end would otherwise run alone for minutes after the others finished,
  and the tail of a run would measure one agent instead of the swarm.
* :func:`synthetic_workload` generates episodes from a ``random.Random(seed)``: the same
  seed gives the same episodes, texts and rewards. Results are JSON records shaped like
  a read tool's output: a few keys and words are everywhere, most ids and names are rare.
"""

from __future__ import annotations

import itertools
import json
import random
import string
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import attrs

from ..agent._toolcalls import ToolCall

__all__ = ["Episode", "Workload", "group_episodes", "replay_workload", "synthetic_workload"]


@attrs.frozen(kw_only=True, slots=True)
class Episode:
    """One episode to replay.

    Attributes:
        source: The data source (namespace segment 1 of its entries).
        episode: The episode id, unique per source within a workload (segment 2).
        steps: The tool calls, ordered by step; at least one.
        reward: The episode's reward where the data has one (the reward of its last step
            that carries one), else ``None``.
    """

    source: str
    episode: str
    steps: tuple[ToolCall, ...]
    reward: float | None

    @property
    def success(self) -> bool:
        """Whether the run counts as successful: reward > 0, or no reward in the data."""
        return self.reward is None or self.reward > 0

    @property
    def first_query(self) -> str:
        """The query before the first turn: the first call's input as text (a string input
        as is, anything else as compact JSON with sorted keys)."""
        first = self.steps[0].input
        if isinstance(first, str):
            return first
        return json.dumps(first, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def group_episodes(calls: Iterable[ToolCall]) -> list[Episode]:
    """Group tool calls by (source, episode), each group ordered by step.

    The sort is stable: calls with the same step keep their order. Episodes come out in
    order of their first call. O(n log n) for n calls.
    """
    groups: dict[tuple[str, str], list[ToolCall]] = {}
    for call in calls:
        groups.setdefault((call.source, call.episode), []).append(call)
    episodes = []
    for (source, episode), group in groups.items():
        group.sort(key=lambda c: c.step)
        rewards = [c.reward for c in group if c.reward is not None]
        episodes.append(
            Episode(
                source=source,
                episode=episode,
                steps=tuple(group),
                reward=rewards[-1] if rewards else None,
            )
        )
    return episodes


class Workload:
    """Episodes handed out one at a time, at most ``limit`` of them.

    Args:
        source: The episodes, possibly an endless iterator.
        total: How many episodes ``source`` yields, or ``None`` if unknown or endless.
        limit: Most episodes to hand out, or ``None`` for all of ``source``.
        description: One line saying what the data is (printed first by the CLI).
        total_steps: How many tool calls the episodes handed out hold in all, or
            ``None`` if unknown (shown as progress before the first episode ends).

    ``source`` is consumed one episode per :meth:`take`: a workload never holds more than
    its source does (a generator holds nothing ahead).
    """

    def __init__(
        self,
        source: Iterator[Episode],
        *,
        total: int | None,
        limit: int | None,
        description: str,
        total_steps: int | None = None,
    ) -> None:
        self._source = source
        self.total_steps = total_steps
        self._limit = limit
        self.taken = 0
        self.description = description
        if total is None:
            self.total = limit
        else:
            self.total = total if limit is None else min(total, limit)

    def take(self) -> Episode | None:
        """The next episode, or ``None`` once the limit is reached or the source is dry.
        O(1) amortized; never blocks."""
        if self._limit is not None and self.taken >= self._limit:
            return None
        episode = next(self._source, None)
        if episode is not None:
            self.taken += 1
        return episode


def _longest_first(episodes: Sequence[Episode]) -> list[int]:
    """Indexes of ``episodes``, longest first, ties in file order. O(E log E)."""
    return sorted(range(len(episodes)), key=lambda i: (-len(episodes[i].steps), i))


def _copies(episodes: Sequence[Episode], scale: int) -> Iterator[Episode]:
    """Every copy of every episode, longest episodes first, the copies of one episode
    together (k = 1..scale). Lazy: O(E log E) to start, then O(1) per copy, whatever
    ``scale`` is (``--scale 1000000 --episodes 10`` makes ten copies, not ten million)."""
    for i in _longest_first(episodes):
        ep = episodes[i]
        if scale == 1:
            yield ep
            continue
        for k in range(1, scale + 1):
            yield attrs.evolve(ep, episode=f"{ep.episode}#{k}")


def replay_workload(
    episodes: Sequence[Episode], *, scale: int = 1, limit: int | None = None, description: str
) -> Workload:
    """Replay ``episodes`` ``scale`` times (see the module docs for ids and order).

    Raises:
        ValueError: ``scale`` < 1, or no episodes.
    """
    if scale < 1:
        raise ValueError(f"scale must be >= 1, got {scale}")
    if not episodes:
        raise ValueError("no episodes to replay")
    if limit is None or limit >= len(episodes) * scale:
        steps = sum(len(ep.steps) for ep in episodes) * scale
    else:  # the first ``limit`` copies, in the order _copies deals them: O(E log E)
        steps, left = 0, limit
        for i in _longest_first(episodes):
            take = min(left, scale)
            steps += take * len(episodes[i].steps)
            left -= take
            if not left:
                break
    return Workload(
        _copies(episodes, scale),
        total=len(episodes) * scale,
        limit=limit,
        description=description,
        total_steps=steps,
    )


_TOOLS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("search_flights", ("origin", "destination", "date")),
    ("get_user_details", ("user_id",)),
    ("get_reservation_details", ("reservation_id",)),
    ("get_order_details", ("order_id",)),
    ("list_directory", ("path",)),
    ("open_file", ("path", "line")),
    ("search_code", ("pattern", "path")),
    ("run_tests", ("target",)),
    ("send_email", ("to", "subject")),
    ("calculate", ("expression",)),
    ("cancel_reservation", ("reservation_id", "reason")),
    ("update_address", ("user_id", "city")),
)


def _vocabulary(rng: random.Random, size: int, syllables: tuple[int, int]) -> list[str]:
    parts = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    words: dict[str, None] = {}
    while len(words) < size:
        words["".join(rng.choice(parts) for _ in range(rng.randint(*syllables)))] = None
    return list(words)


_STATUSES = ("ok", "pending", "cancelled", "delivered", "failed", "active")


def _synthetic(seed: int) -> Iterator[Episode]:
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 4000, (2, 5))
    weights = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(vocab))))
    names = _vocabulary(rng, 600, (2, 3))
    alphabet = string.ascii_uppercase + string.digits

    def words(n: int) -> str:
        return " ".join(rng.choices(vocab, cum_weights=weights, k=n))

    def record_id(kind: str) -> str:
        return f"{kind}_{''.join(rng.choices(alphabet, k=6))}"

    def value(arg: str) -> Any:
        if arg.endswith("_id"):
            return record_id(arg[:-3])
        if arg == "line":
            return rng.randint(1, 2000)
        return words(rng.randint(1, 3))

    def result(tool: str, args: dict[str, Any]) -> str:
        # Shaped like a read tool's JSON record: common keys, mostly rare values.
        record: dict[str, Any] = dict(args)
        record["status"] = rng.choice(_STATUSES)
        record["owner"] = f"{rng.choice(names)} {rng.choice(names)}"
        record["items"] = [
            {"id": record_id("item"), "price": rng.randint(10, 2000)}
            for _ in range(rng.randint(0, 6))
        ]
        record["note"] = words(rng.randint(3, 30))
        return json.dumps(record)

    for number in itertools.count():
        episode = f"ep{number:07d}"
        steps = []
        for step in range(rng.randint(2, 12)):
            tool, names_ = rng.choice(_TOOLS)
            args = {arg: value(arg) for arg in names_}
            steps.append(
                ToolCall(
                    source="synthetic",
                    episode=episode,
                    step=step,
                    tool=tool,
                    input=args,
                    result=result(tool, args),
                )
            )
        reward = 1.0 if rng.random() < 0.7 else 0.0
        yield Episode(source="synthetic", episode=episode, steps=tuple(steps), reward=reward)


def synthetic_workload(*, seed: int, limit: int | None) -> Workload:
    """An endless seeded stream of synthetic episodes, cut at ``limit``.

    Each episode has 2 to 12 calls to one of 12 made-up tools. A result is a JSON record
    like a read tool's: the call's arguments, a status, an owner's name, 0 to 6 items with
    random ids and prices, and a note of 3 to 30 words from a 4,000-word Zipf-like
    vocabulary. The reward is 1.0 with probability 0.7, else 0.0. Deterministic for a
    given ``seed``.
    """
    return Workload(
        _synthetic(seed),
        total=None,
        limit=limit,
        description=f"synthetic data (seeded generator, seed {seed})",
    )
