"""A LangChain retriever over a memory hosted in this process (no trio code of yours).

Run: python examples/langchain_retriever.py   (needs `pip install -e '.[langchain]'`)
"""

from __future__ import annotations

import asyncio

from actormem import MemoryCategory, MemoryEntry
from actormem.client import HostedMemory
from actormem.integrations.langchain import ActormemRetriever

with HostedMemory(capacity=1_000) as memory:
    memory.sync.store_many(
        [
            MemoryEntry.new(MemoryCategory.FACT, "deploys go to the blue cluster"),
            MemoryEntry.new(MemoryCategory.ERROR_PATTERN, "a deploy timeout: retry once"),
            MemoryEntry.new(MemoryCategory.FACT, "lunch is at noon"),
        ]
    )
    retriever = ActormemRetriever(memory=memory, k=2)
    for doc in retriever.invoke("the deploy timed out"):
        print(f"{doc.metadata['score']:.2f} {doc.metadata['category']:<13} {doc.page_content}")
    # From asyncio code (word overlap ranks every entry: k bounds what comes back):
    docs = asyncio.run(ActormemRetriever(memory=memory, k=1).ainvoke("lunch"))
    print("async:", [doc.page_content for doc in docs])
