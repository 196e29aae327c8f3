"""A vocabulary of strings that answers "which items contain this substring?".

Theory of operation
-------------------
The word-overlap scorer counts a query word as matched when it is a *substring* of the
entry's lower-cased text ("deploy" matches "deploys"). A query word has no whitespace, so
it can only occur inside one whitespace-separated token of the text; the same holds for a
whole query inside a tag. So the question "which entries contain w?" becomes "which
vocabulary items contain w?" followed by a posting-list union.

:class:`SubstringVocab` keeps every distinct item (a token or a tag) with an integer id,
and a *gram index*: for every distinct 3-character substring (gram) of an item, the ids
of the items that contain it; an item of 1 or 2 characters is listed under itself and
its characters instead. Adding an item costs one list append per distinct 3-gram, not
also one per character or 2-gram (the characters were 40% of the appends, and the scorer
answers the common one-character words without the vocabulary). A word of 3 characters
is answered by its gram list; a longer word by the rarest of its 3-grams, each candidate
verified with ``word in item`` (a C-speed search). A word of 1 or 2 characters is in an
item of 3 or more characters iff it is in one of the item's 3-grams, so it is first
answered by the union of the gram lists of the 3-grams that contain it (kept per word,
updated when a 3-gram first appears or goes) plus its own list of shorter items; that
answer then becomes the word's own gram list (the word is *active*), kept exact from
then on like any other, so the union is paid once per word ever looked up.

Items are reference-counted by the owner. An item whose count drops to zero is removed
from the item table at once; its ids linger in gram lists until half of a list is dead,
when that list is rebuilt (amortized O(1) per removal). Readers skip dead ids, so they
never need the owner to have finished that clean-up.

Readers use :meth:`lookup` synchronously while the owner is parked, so no structure
changes under them; :meth:`lookup_steps` is the same answer in bounded steps, safe with
owner writes between them (it reads only prefixes of gram lists, which the owner only
appends to or replaces whole, and never holds an iterator over a dict across a yield).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from itertools import chain, compress, repeat
from operator import contains

__all__ = ["SubstringVocab", "grams_of"]

_MAX_GRAM = 3
#: Long words whose lookups are remembered.
_CACHE_SIZE = 4096
#: How many of a long word's 3-grams are probed for the shortest candidate list.
_PROBES = 8
#: Ids :meth:`SubstringVocab.lookup_steps` reads between two yields (verified with
#: ``word in item`` for a long word; a quarter of it, as it is a Python loop).
_STEP = 512


def grams_of(item: str) -> set[str]:
    """The gram keys ``item`` is always listed under: its distinct 3-character
    substrings, or for an item of 1 or 2 characters, itself and its characters.
    O(len(item))."""
    n = len(item)
    if n <= 2:
        return {item, *item}
    return {item[i : i + 3] for i in range(n - 2)}


def _parts(gram: str) -> set[str]:
    """The 1- and 2-character substrings of a 3-character ``gram``."""
    return {gram[:2], gram[1:], *gram}


class SubstringVocab:
    """Distinct strings with reference counts and a 1/2/3-gram index.

    Runtime complexity: :meth:`acquire` and :meth:`release` are O(len(item)) amortized;
    :meth:`lookup` is O(g + c) where g is the length of the rarest gram list of the word
    and c the cost of verifying those candidates.
    """

    __slots__ = (
        "_active",
        "_cache",
        "_dead",
        "_grams",
        "_ids",
        "_items",
        "_next_id",
        "_refs",
        "_sub",
    )

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._items: dict[int, str] = {}
        #: id -> its count of users, for the items with more than one (most have one:
        #: the word-overlap index acquires each token once).
        self._refs: dict[int, int] = {}
        self._grams: dict[str, list[int]] = {}
        self._dead: dict[str, int] = {}
        #: 1- or 2-character string -> the 3-gram keys of ``_grams`` that contain it.
        self._sub: dict[str, set[str]] = {}
        #: 1- and 2-character words whose gram list holds every item containing them.
        self._active: set[str] = set()
        self._next_id = 0
        # Long-word lookups: word -> (the gram list verified, how much of it, matches).
        # Gram lists only grow in place (a rebuild makes a new list), so a cached answer
        # stays right and only the list's new tail needs verifying.
        self._cache: dict[str, tuple[list[int], int, list[int]]] = {}

    def __len__(self) -> int:
        return len(self._items)

    @property
    def id_limit(self) -> int:
        """One more than the largest id ever handed out (ids are never reused). O(1)."""
        return self._next_id

    def id_of(self, item: str) -> int | None:
        """The id of ``item``, or ``None`` if it is not in the vocabulary. O(1)."""
        return self._ids.get(item)

    def acquire(self, item: str) -> int:
        """Count one more user of ``item``, adding it if new; return its id."""
        iid = self._ids.get(item)
        if iid is not None:
            refs = self._refs
            refs[iid] = refs.get(iid, 1) + 1
            return iid
        iid = self._next_id
        self._next_id += 1
        self._ids[item] = iid
        self._items[iid] = item
        grams = self._grams
        for g in self._keys(item):
            lst = grams.get(g)
            if lst is None:
                grams[g] = [iid]
                if len(g) == 3:
                    sub = self._sub
                    for part in _parts(g):
                        keys = sub.get(part)
                        if keys is None:
                            sub[part] = {g}
                        else:
                            keys.add(g)
            else:
                lst.append(iid)
        return iid

    def release(self, item: str) -> bool:
        """Count one user of ``item`` less; remove it at zero. Return True if removed."""
        iid = self._ids[item]
        refs = self._refs.pop(iid, 1) - 1
        if refs:
            if refs > 1:
                self._refs[iid] = refs
            return False
        del self._ids[item], self._items[iid]
        dead, grams, items = self._dead, self._grams, self._items
        for g in self._keys(item):
            d = dead.get(g, 0) + 1
            lst = grams[g]
            if 2 * d > len(lst):
                kept = list(filter(items.__contains__, lst))
                if kept:
                    grams[g] = kept
                else:
                    del grams[g]
                    if len(g) == 3:
                        for part in _parts(g):
                            keys = self._sub[part]
                            keys.discard(g)
                            if not keys:
                                del self._sub[part]
                dead.pop(g, None)
            else:
                dead[g] = d
        return True

    def _keys(self, item: str) -> set[str]:
        """The gram lists ``item`` is in: :func:`grams_of` plus the active words it
        contains. O(len(item))."""
        keys = grams_of(item)
        n = len(item)
        active = self._active
        if n > 2 and active:
            keys |= active.intersection(item)
            keys |= {item[i : i + 2] for i in range(n - 1)} & active
        return keys

    def _candidates(self, word: str) -> list[int] | None:
        """The shortest gram list among up to ``_PROBES`` of ``word``'s 3-grams, spread
        over the word (all of them for words up to ``_PROBES + 2`` long); None when one
        of them is absent, so nothing contains ``word``. O(1) dict probes."""
        grams = self._grams
        n = len(word) - 2
        if n <= _PROBES:
            starts: range | list[int] = range(n)
        else:
            step = (n - 1) / (_PROBES - 1)
            starts = [round(i * step) for i in range(_PROBES)]
        best: list[int] | None = None
        for i in starts:
            lst = grams.get(word[i : i + 3])
            if lst is None:
                return None
            if best is None or len(lst) < len(best):
                best = lst
        return best

    def gram_size(self, word: str) -> int:
        """Length of the candidate list(s) :meth:`lookup` would read for ``word``. O(1)
        dict probes, O(3-grams containing it) for a word of 1 or 2 characters."""
        if len(word) <= 2:
            grams = self._grams
            own = grams.get(word)
            if word in self._active:
                return 0 if own is None else len(own)
            return (0 if own is None else len(own)) + sum(
                len(grams[k]) for k in self._sub.get(word, ())
            )
        lst = self._grams.get(word) if len(word) <= _MAX_GRAM else self._candidates(word)
        return 0 if lst is None else len(lst)

    def lookup(self, word: str) -> list[int]:
        """Ids of the items that contain ``word`` as a substring (``word`` non-empty).

        The answer may also hold ids of items removed since (callers skip them: ids are
        never reused). Do not modify the returned list. Long words' answers are cached;
        a repeated lookup only verifies the items added since. O(g) for a gram list of g
        ids (O(new ids) on a repeat); for a word of 1 or 2 characters, O(the gram lists
        of the 3-grams that contain it), deduplicated, once (then O(1)).
        """
        if len(word) <= 2:
            grams = self._grams
            if word in self._active:
                return grams.get(word) or []
            lists = [grams[k] for k in self._sub.get(word, ())]
            own = grams.get(word)
            if own is not None:
                lists.append(own)
            # Distinct live ids, in C; from now on the word's own list, kept exact.
            items = self._items
            if sum(map(len, lists)) > len(items):  # cheaper to test every item
                found = list(compress(items, map(contains, items.values(), repeat(word))))
            else:
                found = list(filter(items.__contains__, dict.fromkeys(chain.from_iterable(lists))))
            self._active.add(word)
            self._dead.pop(word, None)
            if found:
                grams[word] = found
            else:
                grams.pop(word, None)
            return found
        if len(word) <= _MAX_GRAM:
            return self._grams.get(word) or []
        best = self._candidates(word)
        if best is None:
            return []
        items = self._items
        hit = self._cache.get(word)
        if hit is not None and hit[0] is best:
            _, scanned, found = hit
            if scanned == len(best):
                return found
            start = scanned
        else:
            found = []
            start = 0
            if len(self._cache) >= _CACHE_SIZE:
                del self._cache[next(iter(self._cache))]  # oldest first
        for i in best[start:] if start else best:
            item = items.get(i)
            if item is not None and word in item:
                found.append(i)
        self._cache[word] = (best, len(best), found)
        return found

    def lookup_steps(self, word: str) -> Generator[None, None, list[int]]:
        """:meth:`lookup` in bounded steps: yields after every ``_STEP`` ids read (a
        quarter of that for the verified candidates of a long word). The owner may add
        and remove items between the yields: the answer then holds every id that was in
        the vocabulary at the start and still is, possibly ids added or removed since
        (callers filter by what they can see). Do not modify the returned list; it may
        be a gram list the owner appends to, so read only its first ``len()`` ids at once.

        A word of 1 or 2 characters not yet active is activated only when its union
        fits one step; otherwise the union is computed in steps and not kept (the caller
        caches what it derives). O(:meth:`lookup`)."""
        if len(word) <= 2:
            if word in self._active:
                return self._grams.get(word) or []
            grams = self._grams
            lists = [grams[k] for k in self._sub.get(word, ())]
            own = grams.get(word)
            if own is not None:
                lists.append(own)
            if sum(map(len, lists)) <= _STEP:
                return self.lookup(word)
            seen: set[int] = set()
            for lst in lists:
                for start in range(0, len(lst), _STEP):
                    seen.update(lst[start : start + _STEP])
                    yield
            return list(seen)
        if len(word) <= _MAX_GRAM:
            return self._grams.get(word) or []
        best = self._candidates(word)
        if best is None:
            return []
        hit = self._cache.get(word)
        if hit is not None and hit[0] is best:
            _, scanned, old = hit
            if scanned == len(best):
                return old
            found = list(old)  # other readers may hold the cached list
        else:
            scanned, found = 0, []
        end = len(best)
        items = self._items
        step = max(1, _STEP // 4)
        for start in range(scanned, end, step):
            if start > scanned:
                yield
            for i in best[start : start + step]:
                item = items.get(i)
                if item is not None and word in item:
                    found.append(i)
        cache = self._cache
        if word not in cache and len(cache) >= _CACHE_SIZE:
            del cache[next(iter(cache))]  # oldest first
        cache[word] = (best, end, found)
        return found

    def lookup_items(self, word: str) -> list[str]:
        """The items that contain ``word`` (non-empty): :meth:`lookup` without the
        removed ids, as strings. Same cost, the mapping in C."""
        return list(filter(None, map(self._items.get, self.lookup(word))))

    @property
    def item_of(self) -> Callable[[int], str | None]:
        """:meth:`item` as a bound C function (``dict.get``), for ``map``. O(1)."""
        return self._items.get

    @property
    def items(self) -> dict[int, str]:
        """The items by id (the vocabulary's own dict: read it, never change it). O(1)."""
        return self._items

    def item(self, iid: int) -> str | None:
        """The item with id ``iid``, or ``None`` if it was removed. O(1)."""
        return self._items.get(iid)

    def _check(self, expected: Iterable[str] | None = None) -> None:
        """Assert the invariants; with ``expected`` (a multiset of items), the counts too."""
        assert set(self._ids.values()) == set(self._items) >= set(self._refs)
        assert all(n > 1 for n in self._refs.values())
        for item, iid in self._ids.items():
            assert self._items[iid] == item
            for g in self._keys(item):
                assert iid in self._grams[g], (item, g)
        for w in self._active:
            assert 1 <= len(w) <= 2
            live = {i for i in self._grams.get(w, ()) if i in self._items}
            assert live == {i for i, it in self._items.items() if w in it}, w
        want: dict[str, set[str]] = {}
        for g in self._grams:
            if len(g) == 3:
                for part in _parts(g):
                    want.setdefault(part, set()).add(g)
        assert want == self._sub
        for g, lst in self._grams.items():
            assert lst, g
            assert len(set(lst)) == len(lst), g
            dead = sum(1 for i in lst if i not in self._items)
            assert dead == self._dead.get(g, 0), (g, dead, self._dead.get(g))
            assert 2 * dead <= len(lst)
        if expected is not None:
            counts: dict[str, int] = {}
            for item in expected:
                counts[item] = counts.get(item, 0) + 1
            assert counts == {it: self._refs.get(i, 1) for it, i in self._ids.items()}
