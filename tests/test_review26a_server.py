"""Review 26a: a payload (``value``) nested deeper than the memory's limit is refused
over HTTP naming the limit and the field at every depth.

From 256 to about 1,000 levels the server answered 422 with pydantic's "Circular
reference detected (depth exceeded)" on ``body`` (its dump of the body failed before
the memory's own "nested deeper than 64 levels" check could say it).
"""

from __future__ import annotations

import httpx
import pytest
import trio

from actormem import open_memory
from actormem._json import MAX_VALUE_DEPTH
from actormem.server._app import create_app


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [MAX_VALUE_DEPTH + 2, 100, 300, 900])
async def test_a_too_deep_value_is_refused_by_name(depth: int) -> None:
    async with open_memory() as memory:
        transport = httpx.ASGITransport(app=create_app(memory))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            body = '{"category":"fact","memory":"deep","value":' + _nested(depth) + "}"
            answer = await client.post(
                "/v1/entries", content=body, headers={"content-type": "application/json"}
            )
            assert answer.status_code == 422
            problem = answer.json()
            assert f"nested deeper than {MAX_VALUE_DEPTH} levels" in problem["detail"]
            assert problem["field"] == "value"
            assert len(memory) == 0
            await trio.lowlevel.checkpoint()


async def test_a_value_at_the_limit_is_stored() -> None:
    async with open_memory() as memory:
        transport = httpx.ASGITransport(app=create_app(memory))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            body = '{"category":"fact","memory":"deep","value":' + _nested(MAX_VALUE_DEPTH) + "}"
            answer = await client.post(
                "/v1/entries", content=body, headers={"content-type": "application/json"}
            )
            assert answer.status_code == 200, answer.text
            assert len(memory) == 1
