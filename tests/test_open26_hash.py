"""The index image's two checks on XXH3-128 (``actormem._index.imagehash``, knob ``_XXH3``; branch
open26): the marker that ties the rows to the image and checksums its bytes, and the
texts' digest in the image's header.

With the knob on (the default) an image is format 2 and its marker ``"xxh3:"`` and 32
hex digits; off, format 1 and a bare BLAKE2b marker (the code before). Under both, a
stale, foreign, truncated or corrupted image is refused in the same way (the same log
lines) and the index rebuilt from the rows; an image made under the other setting (an
older actormem's) is never used: the open rebuilds the index and the next clean close
writes this setting's image, which the open after that uses.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
import xxhash

from actormem._index import imagehash as _hash
from actormem._index import persist
from actormem._index.scoring import Scorer
from actormem._storage import sqlite_format
from actormem._storage.sqlite_format import IMAGE_KEY, image_marker

from .test_index_image import SCORERS, _meta, _parts, _put_image, _reopen, _write

KNOB = [True, False]


def _set(monkeypatch: pytest.MonkeyPatch, xxh3: bool) -> None:
    monkeypatch.setattr(_hash, "_XXH3", xxh3)


def _format(path: Path) -> int:
    fmt: int = json.loads(_parts(path)["header"])["format"]
    return fmt


# -- the hash and the marker ---------------------------------------------------------


@pytest.mark.parametrize("xxh3", KNOB)
def test_the_hash_and_the_marker_s_form(xxh3: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    _set(monkeypatch, xxh3)
    h = _hash.new128()
    h.update(b"abc")
    h.update(memoryview(b"def"))
    want = (
        xxhash.xxh3_128(b"abcdef")
        if xxh3
        else __import__("hashlib").blake2b(b"abcdef", digest_size=16)
    )
    assert h.hexdigest() == want.hexdigest()
    assert _hash.image_format() == (2 if xxh3 else 1)
    parts = {"header": b"{}", "postings": b"\x01\x02"}
    marker = image_marker(parts)
    assert marker.startswith("xxh3:") is xxh3
    assert len(marker) == 32 + 5 * xxh3
    assert sqlite_format.marker_current(marker)
    # The names and lengths are hashed: moving a byte between parts changes it.
    assert image_marker({"header": b"{}\x01", "postings": b"\x02"}) != marker
    _set(monkeypatch, not xxh3)
    assert not sqlite_format.marker_current(marker)
    assert image_marker(parts) != marker
    for bad in (None, 3, b"xxh3:00", ""):
        assert not sqlite_format.marker_current(bad) or (bad == "" and xxh3)


@pytest.mark.parametrize("xxh3", KNOB)
def test_a_marker_of_the_other_form_is_not_read(
    tmp_path: Path, xxh3: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``_read_image_quietly``: an image whose marker has the other form gives no image
    and no mismatch (it is not hashed at all), even with its bytes intact."""
    path = tmp_path / "m.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("CREATE TABLE index_image (name TEXT PRIMARY KEY, data BLOB)")
    parts = {"header": b"{}", "postings": b"1234"}
    conn.executemany("INSERT INTO index_image VALUES (?, ?)", parts.items())
    _set(monkeypatch, not xxh3)
    conn.execute("INSERT INTO meta VALUES (?, ?)", (IMAGE_KEY, image_marker(parts)))
    _set(monkeypatch, xxh3)
    assert sqlite_format._read_image_quietly(conn) == (None, "")
    conn.execute("UPDATE meta SET value = ?", (image_marker(parts),))
    assert sqlite_format._read_image_quietly(conn) == (parts, "")
    conn.execute("UPDATE meta SET value = ?", (image_marker({**parts, "postings": b"1235"}),))
    assert sqlite_format._read_image_quietly(conn) == (None, sqlite_format.MARKER_MISMATCH)
    conn.close()


@pytest.mark.parametrize("xxh3", KNOB)
def test_a_marker_of_neither_form_is_a_mismatch(
    tmp_path: Path, xxh3: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a well-formed marker of the other hash is passed over quietly (an upgrade);
    a marker of neither form (garbage, cut short, upper case, a blob, the other form's
    prefix on this form's digits) gives no image and the mismatch (the warning)."""
    _set(monkeypatch, xxh3)
    path = tmp_path / "m.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value)")
    conn.execute("CREATE TABLE index_image (name TEXT PRIMARY KEY, data BLOB)")
    parts = {"header": b"{}", "postings": b"1234"}
    conn.executemany("INSERT INTO index_image VALUES (?, ?)", parts.items())
    digits = "0123456789abcdef" * 2
    other = digits if xxh3 else "xxh3:" + digits
    conn.execute("INSERT INTO meta VALUES (?, ?)", (IMAGE_KEY, other))
    assert sqlite_format._read_image_quietly(conn) == (None, "")
    for bad in ("x", other[:-1], other.upper(), other + "0", b"\x00" * 16, 7):
        conn.execute("UPDATE meta SET value = ?", (bad,))
        assert sqlite_format._read_image_quietly(conn) == (None, sqlite_format.MARKER_MISMATCH), bad
    # a marker of a hash this actormem does not know: a newer actormem's (cli27)
    # (with the knob off, the path before: a marker without "xxh3:" is of its form, and
    # these bytes do not hash to it)
    conn.execute("UPDATE meta SET value = ?", ("xxh4:" + digits,))
    newer = sqlite_format.MARKER_NEWER.format(prefix="xxh4:")
    want = newer if xxh3 else sqlite_format.MARKER_MISMATCH
    assert sqlite_format._read_image_quietly(conn) == (None, want)
    conn.close()


# -- an image of the other format, in a file ------------------------------------------


@pytest.mark.parametrize("make", SCORERS)
@pytest.mark.parametrize("written", KNOB)
async def test_an_image_of_the_other_format_is_rebuilt_once(
    tmp_path: Path,
    make: Callable[[], Scorer],
    written: bool,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A file closed under one setting (``written=False``: an older actormem's BLAKE2b
    image, format 1), opened under the other: the image is not used, quietly (nothing
    is wrong with the file), the answers are a rebuild's; the close writes this
    setting's image, used by the next open; the other setting then rebuilds again."""
    path = tmp_path / "m.db"
    _set(monkeypatch, written)
    before = await _write(path, make)
    old_marker = _meta(path)[IMAGE_KEY]
    assert old_marker.startswith("xxh3:") is written
    assert _format(path) == (2 if written else 1)
    _set(monkeypatch, not written)
    with caplog.at_level(logging.WARNING, "actormem"):
        await _reopen(path, make, used=False, before=before)
    assert "image" not in caplog.text
    marker = _meta(path)[IMAGE_KEY]
    assert marker != old_marker
    assert marker.startswith("xxh3:") is not written
    assert _format(path) == (1 if written else 2)
    await _reopen(path, make, used=True, before=before)
    assert _meta(path)[IMAGE_KEY] == marker
    _set(monkeypatch, written)
    await _reopen(path, make, used=False, before=before)
    await _reopen(path, make, used=True, before=before)


@pytest.mark.parametrize("make", SCORERS)
async def test_an_old_image_re_marked_is_refused_by_its_format(
    tmp_path: Path,
    make: Callable[[], Scorer],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An old (format 1, BLAKE2b digest) image given a marker of the new form over its
    bytes (a tool that re-marks images): the marker matches, the header's format does
    not; nor does a format-2 header over the old BLAKE2b digest: the digest differs."""
    path = tmp_path / "m.db"
    _set(monkeypatch, False)
    await _write(path, make)
    old = _parts(path)
    _set(monkeypatch, True)
    _put_image(path, old)  # the new form's marker over the old bytes
    with caplog.at_level(logging.WARNING, "actormem"):
        await _reopen(path, make, used=False)
    assert "not an image of format 2" in caplog.text
    head = json.loads(old["header"])
    caplog.clear()
    _put_image(path, {**old, "header": json.dumps({**head, "format": 2}).encode()})
    with caplog.at_level(logging.WARNING, "actormem"):
        await _reopen(path, make, used=False)
    # (BM25's header has a digest of its stopwords too, compared before the texts')
    assert "digest: the image has" in caplog.text or "stopwords" in caplog.text
    await _reopen(path, make, used=True)  # the close wrote a format-2 image


# -- stale, foreign, truncated, corrupted: refused alike under both settings ----------


async def _refusals(
    tmp_path: Path, make: Callable[[], Scorer], caplog: pytest.LogCaptureFixture
) -> list[tuple[str, list[str]]]:
    """Each damaged case opened: its name and the warnings logged (the index always
    rebuilt, equal to a rebuild's, the close writing a good image again)."""
    out: list[tuple[str, list[str]]] = []
    other = tmp_path / "other.db"
    await _write(other, make, seed=7)

    async def case(name: str, damage: Callable[[Path], None]) -> None:
        path = tmp_path / f"{name.replace(' ', '_')}.db"
        await _write(path, make, seed=3)
        damage(path)
        caplog.clear()
        with caplog.at_level(logging.WARNING, "actormem"):
            await _reopen(path, make, used=False)
        out.append((name, [r.getMessage() for r in caplog.records]))
        assert IMAGE_KEY in _meta(path), name  # the close wrote a good image again
        await _reopen(path, make, used=True)

    def stale(path: Path) -> None:
        with closing(sqlite3.connect(path)) as conn, conn:  # closed (3.13 warns)
            conn.execute(
                "UPDATE entries SET memory = memory || ' x'"
                " WHERE seq = (SELECT min(seq) FROM entries)"
            )

    def foreign(path: Path) -> None:  # another file's image, with its own marker
        _put_image(path, _parts(other), _meta(other)[IMAGE_KEY])

    def truncated(path: Path) -> None:  # a part cut short, the marker left
        good = _parts(path)
        _put_image(path, {**good, "postings": good["postings"][:-8]}, _meta(path)[IMAGE_KEY])

    def truncated_remarked(path: Path) -> None:  # cut short, re-marked
        good = _parts(path)
        _put_image(path, {**good, "postings": good["postings"][:-8]})

    def flipped(path: Path) -> None:  # a bit flipped, the marker left
        good = _parts(path)
        blob = bytearray(good["postings"])
        blob[len(blob) // 3] ^= 0x01
        _put_image(path, {**good, "postings": bytes(blob)}, _meta(path)[IMAGE_KEY])

    def digest_changed(path: Path) -> None:  # the header's digest, re-marked
        good = _parts(path)
        head = json.loads(good["header"])
        d = head["digest"]
        head["digest"] = d[:-1] + ("0" if d[-1] != "0" else "1")
        _put_image(path, {**good, "header": json.dumps(head).encode()})

    def marker_changed(path: Path) -> None:  # the marker's last digit
        good = _parts(path)
        m = _meta(path)[IMAGE_KEY]
        _put_image(path, good, m[:-1] + ("0" if m[-1] != "0" else "1"))

    for name, damage in (
        ("stale", stale),
        ("foreign", foreign),
        ("truncated", truncated),
        ("truncated re-marked", truncated_remarked),
        ("flipped", flipped),
        ("digest changed", digest_changed),
        ("marker changed", marker_changed),
    ):
        await case(name, damage)
    return out


def _normalised(messages: list[str]) -> list[str]:
    """The log lines with the digests' and formats' values taken out (they differ
    between the two hashes by construction)."""
    out = []
    for m in messages:
        for fmt in ("format 2", "format 1"):
            m = m.replace(fmt, "format N")
        out.append(m.split(" the image has ")[0] if "digest: the image has" in m else m)
    return out


@pytest.mark.parametrize("make", SCORERS)
async def test_damaged_images_are_refused_alike_under_both_hashes(
    tmp_path: Path,
    make: Callable[[], Scorer],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    got = {}
    for xxh3 in KNOB:
        _set(monkeypatch, xxh3)
        folder = tmp_path / str(xxh3)
        folder.mkdir()
        got[xxh3] = await _refusals(folder, make, caplog)
    for (name, on), (name_off, off) in zip(got[True], got[False], strict=True):
        assert name == name_off
        assert on, name  # refused with a warning, not quietly
        assert _normalised(on) == _normalised(off), name
    warned = dict(got[True])
    assert "does not match its marker" in warned["truncated"][0]
    assert "does not match its marker" in warned["flipped"][0]
    assert "does not match its marker" in warned["marker changed"][0]
    assert "was not used" in warned["stale"][0]
    assert "was not used" in warned["foreign"][0]
    assert "was not used" in warned["truncated re-marked"][0]
    assert "digest" in warned["digest changed"][0]


def test_the_text_digest_follows_the_knob(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = ["a", "bé", "c" * 3000]
    _set(monkeypatch, True)
    on = persist.text_digest(texts)
    _set(monkeypatch, False)
    off = persist.text_digest(texts)
    assert on != off
    assert len(on) == len(off) == 32
    _set(monkeypatch, True)
    assert persist.text_digest(texts) == on
    assert persist.text_digest(texts[:-1]) != on
