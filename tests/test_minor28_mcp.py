"""minor28: ``serve_streams`` does not answer a request whose id is of another JSON type
(``3.5``, ``true``, ``null``, an array) with -32600, as ``serve_stdio`` does (mcp27),
and cannot: the SDK's transports parse each message before it reaches the streams and
read such a request as a notification without the id. This test holds that reason:
should the SDK ever keep the id (or refuse the message), ``serve_streams`` can answer
these requests too and its docstring's caveat is to go."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mcp")

from mcp.types import JSONRPCNotification, jsonrpc_message_adapter  # noqa: E402


@pytest.mark.parametrize("ident", [3.5, True, None, [1], {"a": 1}])
def test_the_sdk_reads_a_bad_id_request_as_a_notification_without_the_id(ident: object) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/list"})
    message = jsonrpc_message_adapter.validate_json(line, by_name=False)
    assert isinstance(message, JSONRPCNotification)
    assert "id" not in message.model_dump()
    assert not message.model_extra
    assert "id" not in json.loads(message.model_dump_json())
