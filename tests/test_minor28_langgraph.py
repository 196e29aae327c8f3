"""minor28: ``ActormemStore.put(..., ttl=True)``. LangGraph's ``BaseStore.put`` takes
``ttl`` as ``float | None`` (minutes; not given: the store's default). A bool is an int
to Python, and the store read ``ttl=True`` as "not given" (the default TTL, or none),
a string likewise, where a mistake should be refused. Now a bool or a string is a
TypeError, a ttl not > 0 a ValueError, both before any op of the batch runs."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import PutOp  # noqa: E402

from actormem.integrations.langgraph import ActormemStore  # noqa: E402

_TTL = {"default_ttl": 10.0, "refresh_on_read": True}


@pytest.mark.parametrize(
    ("ttl", "error"),
    [
        (True, TypeError),
        (False, TypeError),
        ("5", TypeError),
        ([5], TypeError),
        (0, ValueError),
        (-1.0, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
    ],
)
def test_a_ttl_that_is_not_minutes_is_refused_and_nothing_is_stored(
    ttl: object, error: type[Exception]
) -> None:
    with ActormemStore(ttl=_TTL) as store:  # type: ignore[arg-type]
        with pytest.raises(error, match="ttl must be a number of minutes"):
            store.put(("n",), "k", {"v": 1}, ttl=ttl)  # type: ignore[arg-type]
        ops = [PutOp(("n",), "first", {"v": 1}), PutOp(("n",), "k", {"v": 2}, ttl=ttl)]  # type: ignore[arg-type]
        with pytest.raises(error):
            store.batch(ops)
        with pytest.raises(error):
            asyncio.run(store.abatch(ops))
        assert store.search(("n",)) == []  # the batch's first put did not run either


def test_minutes_and_none_are_taken() -> None:
    with ActormemStore(ttl=_TTL) as store:  # type: ignore[arg-type]
        store.put(("n",), "minutes", {"v": 1}, ttl=2)
        store.put(("n",), "float", {"v": 1}, ttl=0.5)
        store.put(("n",), "never", {"v": 1}, ttl=None)
        store.put(("n",), "default", {"v": 1})
        ttls = {e.key: e.ttl for e in store.memory.sync.list_entries(("n",), refresh_ttl=False)}
        assert ttls == {"minutes": 120.0, "float": 30.0, "never": None, "default": 600.0}


# minor29: the ttl's numeric type. ``Decimal("1.5")`` was refused (not an int | float)
# while ``numpy.float64(1.5)`` was taken (a float subclass), and ``numpy.float32`` or
# ``numpy.int64`` refused: any real number that is finite and > 0 is minutes now.
@pytest.mark.parametrize(
    "ttl",
    [
        pytest.param(lambda: __import__("decimal").Decimal("1.5"), id="Decimal"),
        pytest.param(lambda: __import__("fractions").Fraction(3, 2), id="Fraction"),
        pytest.param(lambda: __import__("numpy").float64(1.5), id="float64"),
        pytest.param(lambda: __import__("numpy").float32(1.5), id="float32"),
        pytest.param(lambda: __import__("numpy").int64(2), id="int64"),
    ],
)
def test_any_real_number_of_minutes_is_taken(ttl: Any) -> None:
    value = ttl()
    with ActormemStore(ttl={"default_ttl": value}) as store:  # type: ignore[typeddict-item]
        store.put(("n",), "k", {"v": 1}, ttl=value)
        store.put(("n",), "default", {"v": 1})
        ttls = {e.key: e.ttl for e in store.memory.sync.list_entries(("n",), refresh_ttl=False)}
        assert ttls == {"k": float(value) * 60, "default": float(value) * 60}


@pytest.mark.parametrize(
    ("ttl", "error"),
    [
        (lambda: __import__("numpy").bool_(True), TypeError),
        (lambda: __import__("decimal").Decimal("NaN"), ValueError),
        (lambda: __import__("decimal").Decimal("sNaN"), ValueError),
        (lambda: __import__("decimal").Decimal("-1"), ValueError),
        (lambda: __import__("fractions").Fraction(10**400, 1), ValueError),
        (lambda: __import__("numpy").float64("inf"), ValueError),
        (lambda: 1 + 1j, TypeError),
    ],
)
def test_a_number_that_is_not_minutes_is_refused(ttl: Any, error: type[Exception]) -> None:
    with ActormemStore() as store:
        with pytest.raises(error, match="ttl must be a number of minutes"):
            store.put(("n",), "k", {"v": 1}, ttl=ttl())
        assert store.search(("n",)) == []
    with pytest.raises(error, match="default_ttl must be a number of minutes"):
        ActormemStore(ttl={"default_ttl": ttl()})
