"""CPU of one write to a client: the actormem server's (``_protocol_send``: trio's
``send_all`` loop noting each ``send`` that took bytes, for the send deadline) against
hypercorn's own ``TCPServer.protocol_send``, in one run (robust42).

    python -m stress.bench_server_writes [--writes 20000] [--size 300] [--rounds 8]
                                         [--json OUT]

Each round makes ``--writes`` writes of ``--size`` bytes into one end of a loopback
socket pair while a task of the same trio run drains the other end (its CPU is counted
too: one thread), timed by the thread's CPU clock. Rounds alternate the two sides (the
first of each pair alternates too); prints the medians per write and their ratio, and
with ``--json`` every round.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import trio
from hypercorn.events import RawData

from actormem.server import _run
from stress._bench_args import output_file, positive_int


class _Connection:
    """What ``protocol_send`` reads of its ``TCPServer``."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.config = _run._Config()
        self.stream = stream
        self.send_lock = trio.Lock()
        self.protocol = None


async def _round(ours: bool, writes: int, size: int) -> float:
    a, b = trio.socket.socketpair()
    sender, reader = trio.SocketStream(a), trio.SocketStream(b)
    conn = _Connection(sender)
    send = _run._protocol_send if ours else _run._bare_send
    event = RawData(b"x" * size)

    async def drain() -> None:
        while await reader.receive_some(1 << 20):
            pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        start = time.thread_time()
        for _ in range(writes):
            await send(conn, event)  # type: ignore[arg-type]
        spent = time.thread_time() - start
        await sender.aclose()
    await reader.aclose()
    return spent


async def _run_all(args: argparse.Namespace) -> dict[str, Any]:
    rounds: dict[str, list[float]] = {"hypercorn": [], "actormem": []}
    for r in range(args.rounds):
        for ours in (False, True) if r % 2 == 0 else (True, False):
            spent = await _round(ours, args.writes, args.size)
            rounds["actormem" if ours else "hypercorn"].append(spent)
    base = statistics.median(rounds["hypercorn"])
    mine = statistics.median(rounds["actormem"])
    return {
        "command": "python -m stress.bench_server_writes " + " ".join(sys.argv[1:]),
        "writes": args.writes,
        "size": args.size,
        "hypercorn_us_per_write": base / args.writes * 1e6,
        "actormem_us_per_write": mine / args.writes * 1e6,
        "ratio": mine / base,
        "rounds_s": rounds,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m stress.bench_server_writes")
    parser.add_argument("--writes", type=positive_int, default=20_000, help="writes a round")
    parser.add_argument("--size", type=positive_int, default=300, help="bytes a write")
    parser.add_argument("--rounds", type=positive_int, default=8, help="rounds a side")
    parser.add_argument("--json", type=output_file, metavar="OUT")
    args = parser.parse_args(argv)
    result = trio.run(_run_all, args)
    print(
        f"{args.writes} writes of {args.size} B: hypercorn's "
        f"{result['hypercorn_us_per_write']:.2f} us, actormem's "
        f"{result['actormem_us_per_write']:.2f} us a write (x{result['ratio']:.3f})"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
