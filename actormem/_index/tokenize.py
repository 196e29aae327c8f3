"""Text to index terms: the standard tokenizer of the lexical scorers.

Theory of operation
-------------------
A :class:`Tokenizer` turns a text into a list of terms in three steps, each the usual one
of lexical retrieval (Manning, Raghavan & Schütze, *Introduction to Information Retrieval*,
ch. 2):

1. **Split** the case-folded text (:meth:`str.casefold`, Unicode full case folding) on runs
   of Unicode word characters, the regular expression ``\\w+``. Punctuation and spaces
   separate terms; digits and underscores belong to them, so ``"D8:6"`` gives
   ``["d8", "6"]`` and ``"snake_case"`` one term.
2. **Drop stop words**: terms in :attr:`Tokenizer.stopwords` (compared after case folding,
   before stemming, as Lucene's ``StopFilter`` does ahead of its stemmer).
3. **Stem** with a Snowball stemmer from PyStemmer (``pip install PyStemmer``), when
   :attr:`Tokenizer.stemmer` names one of its algorithms (``"english"`` is Porter2).

Stop-word lists come from maintained sources (:func:`stop_words`: the ``stop-words``
package, or NLTK's lists as ``bm25s`` ships them), or from the caller. Nothing here is
hand-written linguistics.

The tokenizer is a frozen value: two equal tokenizers produce equal terms, so an index
and a brute-force reference built from the same configuration agree term for term.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from .._util import Final, install_hint

__all__ = ["Tokenizer", "stop_words"]

_WORD = re.compile(r"\w+")


def _convert_stopwords(value: Iterable[str] | None) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        raise TypeError("stopwords must be a collection of str, not one str (see stop_words())")
    return frozenset(word.casefold() for word in value)


def _check_stemmer(instance: object, attribute: object, value: str | None) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise TypeError(f"stemmer must be a str or None, not {type(value).__name__}")
    _stem_function(value)  # raises if PyStemmer is missing or the algorithm is unknown


@functools.cache
def _stem_function(algorithm: str) -> Callable[[list[str]], list[str]]:
    try:
        import Stemmer  # type: ignore[import-not-found,unused-ignore]  # PyStemmer
    except ImportError:  # pragma: no cover - depends on the environment
        raise ModuleNotFoundError(
            f"stemming needs PyStemmer: pip install PyStemmer, or {install_hint('stem')}",
            name="Stemmer",
        ) from None
    try:
        stemmer: Any = Stemmer.Stemmer(algorithm)
    except KeyError:
        raise ValueError(
            f"unknown Snowball algorithm {algorithm!r}; PyStemmer has {Stemmer.algorithms()}"
        ) from None
    words: Callable[[list[str]], list[str]] = stemmer.stemWords
    return words


@functools.cache
def stop_words(language: str = "english", source: str = "stop-words") -> frozenset[str]:
    """A maintained stop-word list, case-folded.

    Sources:

    * ``"stop-words"``: the ``stop-words`` package (``pip install stop-words``), broad
      lists per language (about 1,300 English words, among them content words such as
      ``"new"`` or ``"home"``).
    * ``"nltk"``: NLTK's lists, derived from the Snowball project's, as the ``bm25s``
      package ships them (``pip install bm25s``; no download at run time). The English
      one has 179 function words and hurt recall least on LoCoMo
      (``docs/retrieval.md``).

    Pass the result as ``Tokenizer(stopwords=stop_words("english", "nltk"))``.

    Args:
        language: A language name, lower case (``"english"``, ``"french"``, ...).
        source: ``"stop-words"`` (default) or ``"nltk"``.

    Returns:
        A frozenset of case-folded words.

    Raises:
        ImportError: The source's package is not installed.
        ValueError: Unknown source, or the source has no list for ``language``.
    """
    if source == "stop-words":
        try:
            from stop_words import (  # type: ignore[import-untyped,unused-ignore]
                StopWordError,
                get_stop_words,
            )
        except ImportError:  # pragma: no cover - depends on the environment
            raise ModuleNotFoundError(
                "stop word lists need the stop-words package: pip install stop-words, "
                f"or {install_hint('stem')}",
                name="stop_words",
            ) from None
        try:
            words = get_stop_words(language)
        except StopWordError as exc:
            raise ValueError(f"no stop-word list for {language!r}: {exc}") from None
    elif source == "nltk":
        try:
            from bm25s import stopwords as lists  # type: ignore[import-untyped,unused-ignore]
        except ImportError:  # pragma: no cover - depends on the environment
            raise ModuleNotFoundError(
                "NLTK's stop-word lists come with bm25s: pip install bm25s, "
                f"or {install_hint('stem')}",
                name="bm25s",
            ) from None
        name = "STOPWORDS_EN_PLUS" if language == "english" else f"STOPWORDS_{language.upper()}"
        words = getattr(lists, name, None)
        if words is None:
            raise ValueError(f"bm25s ships no NLTK stop-word list for {language!r}")
    else:
        raise ValueError(f"unknown stop-word source {source!r}: use 'stop-words' or 'nltk'")
    return frozenset(word.casefold() for word in words)


@attrs.frozen(kw_only=True)
class Tokenizer(metaclass=Final):
    """Split, case-fold, filter and stem a text into index terms.

    Example::

        Tokenizer()("Grafana's dashboards")            # ['grafana', 's', 'dashboards']
        Tokenizer(stemmer="english")("dashboards")    # ['dashboard']

    Attributes:
        stemmer: A Snowball algorithm name known to PyStemmer (``"english"``, ``"porter"``,
            ``"german"``, ...), or ``None`` (default) for no stemming.
        stopwords: Words to drop, any iterable of str (case-folded on construction);
            empty by default. :func:`stop_words` gives a maintained list.

    Raises:
        ImportError: ``stemmer`` is set and PyStemmer is not installed.
        ValueError: PyStemmer has no algorithm named ``stemmer``.
        TypeError: ``stopwords`` is a single str.
    """

    stemmer: str | None = attrs.field(default=None, validator=_check_stemmer)
    stopwords: frozenset[str] = attrs.field(
        factory=frozenset, converter=_convert_stopwords, repr=lambda s: f"<{len(s)} words>"
    )

    def __call__(self, text: str) -> list[str]:
        """The terms of ``text``, in order, with repeats.

        Runtime complexity: O(len(text)).
        """
        terms = _WORD.findall(text.casefold())
        if self.stopwords:
            stop = self.stopwords
            terms = [term for term in terms if term not in stop]
        if self.stemmer is not None and terms:
            terms = _stem_function(self.stemmer)(terms)
        return terms

    @property
    def name(self) -> str:
        """A short description for reports, e.g. ``"words+english+stop1298"``."""
        parts = ["words"]
        if self.stemmer is not None:
            parts.append(self.stemmer)
        if self.stopwords:
            parts.append(f"stop{len(self.stopwords)}")
        return "+".join(parts)
