"""``actormem mcp`` driven by the MCP SDK's own client over stdio (a real child process)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install -e '.[test]')")

from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


@asynccontextmanager
async def session(*args: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "actormem", "mcp", *args], cwd=str(REPO)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


def payload(result: Any) -> Any:
    assert not result.is_error, result.content
    assert result.structured_content == json.loads(result.content[0].text)
    return result.structured_content


async def test_tools_listed_with_their_arguments() -> None:
    async with session("--in-memory") as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
    assert set(tools) == {"remember", "recall", "forget", "stats"}
    assert set(tools["recall"].input_schema["properties"]) == {
        "query",
        "limit",
        "namespace",
        "category",
        "tags",
    }
    assert tools["remember"].input_schema["required"] == ["text"]


async def test_remember_recall_forget_stats(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with session("--path", str(db)) as s:
        first = payload(
            await s.call_tool(
                "remember",
                {
                    "text": "deploys go to the blue cluster",
                    "tags": ["infra"],
                    "namespace": ["team-a"],
                },
            )
        )
        payload(await s.call_tool("remember", {"text": "lunch is at noon", "category": "insight"}))
        hits = payload(await s.call_tool("recall", {"query": "deploy blue", "limit": 1}))["hits"]
        assert [h["id"] for h in hits] == [first["id"]]
        assert hits[0]["memory"] == "deploys go to the blue cluster"
        assert hits[0]["score"] > 0
        scoped = payload(
            await s.call_tool("recall", {"query": "noon", "namespace": ["team-a"], "limit": 5})
        )["hits"]
        assert [h["id"] for h in scoped] == [first["id"]]  # the other entry is at the root
        only = payload(await s.call_tool("recall", {"query": "noon", "category": "insight"}))[
            "hits"
        ]
        assert [h["memory"] for h in only] == ["lunch is at noon"]
        stats = payload(await s.call_tool("stats", {}))
        assert stats["entries"] == 2
        assert payload(await s.call_tool("forget", {"id": first["id"]})) == {"deleted": True}
        assert payload(await s.call_tool("forget", {"id": first["id"]})) == {"deleted": False}
    # The file holds what the tools stored (committed when the server's stdin closed).
    async with session("--path", str(db)) as s:
        assert payload(await s.call_tool("stats", {}))["entries"] == 1


BAD_CALLS = [
    ("remember", {"text": ""}, "empty"),
    ("remember", {"text": "  "}, "empty"),
    ("remember", {"text": "x", "category": "gossip"}, "unknown category"),
    ("remember", {"text": "x", "relevance": 2.0}, "relevance"),
    ("remember", {"text": "x", "tags": [""]}, "tag"),
    ("recall", {"query": "x", "limit": -1}, "limit"),
    ("recall", {"query": "x", "category": "gossip"}, "unknown category"),
    ("forget", {"id": "not-a-uuid"}, "UUID"),
]


async def test_bad_arguments_are_tool_errors_and_change_nothing() -> None:
    async with session("--in-memory") as s:
        for tool, args, words in BAD_CALLS:
            result = await s.call_tool(tool, args)
            assert result.is_error, (tool, args)
            assert words in result.content[0].text, (tool, args, result.content[0].text)
        assert payload(await s.call_tool("stats", {}))["entries"] == 0


def test_missing_extra_and_bad_options_are_one_line(tmp_path: Path) -> None:
    import subprocess

    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "actormem",
            "mcp",
            "--server",
            "http://127.0.0.1:9",
            "--capacity",
            "5",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "actormem mcp: error: --capacity does not apply to --server"
    ]


def test_example_runs() -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "mcp_client.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "tools: forget, recall, remember, stats",
        "recall: ['deploys go to the blue cluster']",
        "forget: {'deleted': True}",
        "entries left: 1",
    ]
