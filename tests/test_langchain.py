"""The LangChain retriever over a hosted memory, from sync code and from asyncio."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

pytest.importorskip(
    "langchain_core", reason="langchain-core is not installed (pip install -e '.[test]')"
)

from pydantic import ValidationError  # noqa: E402

from actormem import InvalidQueryError, MemoryCategory, MemoryEntry  # noqa: E402
from actormem.client import HostedMemory  # noqa: E402
from actormem.integrations.langchain import ActormemRetriever  # noqa: E402

FACT = MemoryEntry.new(MemoryCategory.FACT, "deploys go to the blue cluster").with_namespace("ops")
TIP = MemoryEntry.new(MemoryCategory.INSIGHT, "retry the blue deploy after a timeout")
OTHER = MemoryEntry.new(MemoryCategory.FACT, "lunch is at noon")


@pytest.fixture
def memory() -> Iterator[HostedMemory]:
    with HostedMemory() as hosted:
        hosted.sync.store_many([FACT, TIP, OTHER])
        yield hosted


def test_invoke_gives_documents_best_first_with_scores(memory: HostedMemory) -> None:
    docs = ActormemRetriever(memory=memory, k=2).invoke("blue deploy")
    expected = memory.sync.retrieve_scored("blue deploy", 2)
    assert [d.id for d in docs] == [str(h.entry.id) for h in expected]
    assert [d.page_content for d in docs] == [h.entry.memory for h in expected]
    assert [d.metadata["score"] for d in docs] == [h.score for h in expected]
    assert {d.metadata["category"] for d in docs} == {"fact", "insight"}


def test_filters_and_k(memory: HostedMemory) -> None:
    only_ops = ActormemRetriever(memory=memory, k=5, namespace=["ops"]).invoke("blue")
    assert [d.id for d in only_ops] == [str(FACT.id)]
    insights = ActormemRetriever(memory=memory, category=MemoryCategory.INSIGHT).invoke("blue")
    assert [d.id for d in insights] == [str(TIP.id)]
    assert ActormemRetriever(memory=memory, k=0).invoke("blue") == []


def test_ainvoke_under_asyncio(memory: HostedMemory) -> None:
    retriever = ActormemRetriever(memory=memory, k=1)
    docs = asyncio.run(retriever.ainvoke("noon"))
    assert [d.id for d in docs] == [str(OTHER.id)]


def test_bad_input_is_refused(memory: HostedMemory) -> None:
    with pytest.raises(ValidationError):
        ActormemRetriever(memory=memory, k=-1)
    with pytest.raises(InvalidQueryError):
        ActormemRetriever(memory=memory, namespace=[""]).invoke("blue")


def test_require_tags(memory: HostedMemory) -> None:
    tagged = MemoryEntry.new(MemoryCategory.FACT, "blue is the canary colour").with_tag("canary")
    memory.sync.store(tagged)
    docs = ActormemRetriever(memory=memory, require_tags=["canary"], k=5).invoke("blue")
    assert [d.id for d in docs] == [str(tagged.id)]


def test_example_runs() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, str(root / "examples" / "langchain_retriever.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "async: ['lunch is at noon']"
    assert {line.split()[-1] for line in lines[:2]} == {"cluster", "once"}
