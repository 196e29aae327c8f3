"""A LangChain retriever over an actormem memory (docs/integrations.md).

:class:`ActormemRetriever` is a ``langchain_core.retrievers.BaseRetriever``: chains and
agents call ``retriever.invoke(query)`` / ``await retriever.ainvoke(query)`` and get
``Document`` objects, best first. Each document's ``page_content`` is the entry's text;
its ``metadata`` holds the score and the entry's fields (as
:func:`~actormem._storage.jsonl.entry_to_json` writes them), its ``id`` the entry's id.

The memory is any of actormem's handles that live outside a trio run:

* :class:`~actormem.client.HostedMemory` (this process; its owner in a thread),
* :class:`~actormem.client.AsyncClient` or :class:`~actormem.client.Client` (a server).

``invoke`` needs a synchronous path (``HostedMemory`` or ``Client``); ``ainvoke`` works
with all three (a ``Client`` is then called in a worker thread).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import anyio.to_thread
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from .._entry import MemoryCategory, ScoredEntry
from .._storage.jsonl import entry_to_json

__all__ = ["ActormemRetriever"]


class ActormemRetriever(BaseRetriever):
    """The ``k`` entries of ``memory`` most relevant to a query, as LangChain documents.

    Attributes:
        memory: A ``HostedMemory``, ``AsyncClient`` or ``Client`` (see the module docs).
        k: Most documents per query (the retrieve's ``limit``), >= 0.
        namespace: Keep entries whose namespace starts with these segments.
        category: Keep entries of this category (or of any of these).
        require_tags: Keep entries carrying every one of these tags (the retrieve's
            ``tags=``; LangChain's own ``tags`` field labels runs, as on every retriever).

    Each query costs one ``retrieve_scored`` of the memory (see
    :meth:`actormem.Memory.retrieve_scored`), plus a round trip for a client.

    Raises (from ``invoke``/``ainvoke``):
        InvalidQueryError: An over-long query or a bad filter.
        TypeError: ``invoke`` on an ``AsyncClient`` (use ``ainvoke``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Any
    k: int = Field(default=4, ge=0)
    namespace: Sequence[str] | None = None
    category: MemoryCategory | Sequence[MemoryCategory] | None = None
    require_tags: Sequence[str] | None = None

    def _filters(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "category": self.category, "tags": self.require_tags}

    @staticmethod
    def _documents(hits: list[ScoredEntry]) -> list[Document]:
        return [
            Document(
                page_content=hit.entry.memory,
                metadata={"score": hit.score, **entry_to_json(hit.entry)},
                id=str(hit.entry.id),
            )
            for hit in hits
        ]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        memory = getattr(self.memory, "sync", self.memory)  # HostedMemory's blocking face
        if inspect.iscoroutinefunction(memory.retrieve_scored):
            raise TypeError(
                f"{type(self.memory).__name__} is async only: use `await retriever.ainvoke()`"
            )
        return self._documents(memory.retrieve_scored(query, self.k, **self._filters()))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        call = self.memory.retrieve_scored
        if inspect.iscoroutinefunction(call):
            hits = await call(query, self.k, **self._filters())
        else:  # a synchronous client: keep the event loop free
            hits = await anyio.to_thread.run_sync(lambda: call(query, self.k, **self._filters()))
        return self._documents(hits)
