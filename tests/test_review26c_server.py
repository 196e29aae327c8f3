"""review26c: a JSON body sent without ``Content-Type: application/json`` (``curl -d``,
a new user's first request) was refused with pydantic's "Input should be a valid
dictionary or object to extract fields from" on ``body``, though the body *is* a JSON
object: FastAPI does not parse a body of another content type. The 422 now says so."""

from __future__ import annotations

import httpx
import pytest

from actormem import open_memory
from actormem.server._app import create_app

BODY = '{"category":"fact","memory":"deploys go to blue"}'


@pytest.mark.parametrize(
    "content_type", [None, "application/x-www-form-urlencoded", "text/plain"]
)
async def test_a_json_body_without_its_content_type_is_refused_saying_so(
    content_type: str | None,
) -> None:
    async with open_memory() as memory:
        transport = httpx.ASGITransport(app=create_app(memory))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            headers = {} if content_type is None else {"content-type": content_type}
            answer = await client.post("/v1/entries", content=BODY, headers=headers)
            assert answer.status_code == 422
            problem = answer.json()
            assert problem["field"] == "body"
            assert "Content-Type: application/json" in problem["detail"]
            assert "valid dictionary" not in problem["detail"]
            assert len(memory) == 0


async def test_a_json_body_with_its_content_type_is_stored() -> None:
    async with open_memory() as memory:
        transport = httpx.ASGITransport(app=create_app(memory))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            for content_type in ("application/json", "application/json; charset=utf-8"):
                answer = await client.post(
                    "/v1/entries", content=BODY, headers={"content-type": content_type}
                )
                assert answer.status_code == 200, answer.text
            # A wrong type inside a JSON body is still named by its field.
            answer = await client.post("/v1/entries", json={"category": "fact", "memory": 1})
            assert answer.json()["field"] == "memory"
