"""The bounds of ``actormem serve``'s API that :class:`~actormem.Memory` does not have,
shared by the server (its schemas refuse past them: 422) and the HTTP clients (which
refuse before sending, in the same words). No httpx here: the server imports it."""

from __future__ import annotations

__all__ = ["MAX_BATCH_TAGS", "MAX_JSON_INT", "MAX_LIMIT", "batch_tags_refusal"]

#: Most results one call may ask for over HTTP (a bigger ``limit`` is a 422).
MAX_LIMIT = 10_000
#: Largest integer a body may hold (``access_count``, ``offset``, ...): I-JSON's (RFC
#: 7493) limit for integers that every JSON parser reads exactly, 2**53 - 1 (a memory
#: file allows up to 2**63 - 1).
MAX_JSON_INT = 2**53 - 1
#: Most distinct tags in one ``store_many`` request. Each tag new to the memory is indexed
#: for the tag filters on the owner's task, which answers no other request meanwhile
#: (about 3.6 us a new tag on a 2-CPU VM, a tag seen before about 0.25 us: minor29), and
#: a batch is applied in one step: a 4 MiB body of distinct tags (307,200 of them) held
#: every request for about 1.1 s of CPU, 3-4 s under load. This bounds that step to about
#: 0.2 s; a batch of 10,000 entries still takes 6 distinct tags each.
MAX_BATCH_TAGS = 65_536


def batch_tags_refusal(distinct: int) -> str | None:
    """Why a batch of ``distinct`` distinct tags is refused (the 422's detail, which
    the clients raise as :class:`~actormem.InvalidEntryError` before sending), or None
    within :data:`MAX_BATCH_TAGS`. O(1)."""
    if distinct <= MAX_BATCH_TAGS:
        return None
    return (
        f"entries: the batch holds {distinct} distinct tags; the limit over HTTP is "
        f"{MAX_BATCH_TAGS} a request (each new tag is indexed on the owner's task, which "
        "answers no other request meanwhile): split the batch"
    )
