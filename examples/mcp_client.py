"""Drive `actormem mcp` as an MCP client would: start it, remember, recall, forget.

Run: python examples/mcp_client.py   (needs `pip install -e '.[mcp]'`)
"""

from __future__ import annotations

import json
import sys
from typing import Any

import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult


def result(reply: CallToolResult) -> dict[str, Any]:
    """A tool's structured result (every actormem tool returns a JSON object)."""
    if reply.is_error:
        raise RuntimeError(reply.content[0].text)  # type: ignore[union-attr]
    return json.loads(reply.content[0].text)  # type: ignore[no-any-return,union-attr]


async def main() -> None:
    server = StdioServerParameters(command=sys.executable, args=["-m", "actormem", "mcp"])
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = sorted(t.name for t in (await session.list_tools()).tools)
        print("tools:", ", ".join(tools))
        stored = result(
            await session.call_tool(
                "remember", {"text": "deploys go to the blue cluster", "tags": ["infra"]}
            )
        )
        await session.call_tool("remember", {"text": "lunch is at noon"})
        hits = result(await session.call_tool("recall", {"query": "how do I deploy", "limit": 1}))
        print("recall:", [hit["memory"] for hit in hits["hits"]])
        gone = result(await session.call_tool("forget", {"id": stored["id"]}))
        print("forget:", gone)
        stats = result(await session.call_tool("stats", {}))
        print("entries left:", stats["entries"])


if __name__ == "__main__":
    trio.run(main)
