"""Tool-call records (the format of ``shared/data/tool_calls.jsonl``) and the entries the
agent hooks make of them.

One JSON object per line::

    {"source": str, "episode": str, "step": int, "tool": str, "input": any JSON,
     "result": str, "reward"?: number}

(``input`` nested at most :data:`~actormem._json.MAX_VALUE_DEPTH`, 64, levels deep.)

Other keys are ignored, so richer records still load. The reader checks a whole file
before anything is done with it and raises :class:`~actormem._storage.jsonl.JsonlError`
naming the file and the 1-based line of the first bad record.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from pathlib import Path
from typing import Any

import attrs

from .._entry import MemoryCategory, MemoryEntry, memory_text_ok
from .._index.dense import entry_document, text_hash
from .._json import MAX_VALUE_DEPTH
from .._storage.jsonl import (
    SQLITE_MAGIC,
    JsonlError,
    JsonVector,
    entry_from_json,
    file_sha256,
    is_unit_vector,
    json_lines,
    need,
    parse_line,
    vector_from_json,
)
from ._hooks import _INPUT_ENCODER, format_trajectory, trajectory_text

__all__ = [
    "IMPORT_ID_NAMESPACE",
    "ImportLines",
    "ToolCall",
    "line_id",
    "read_import_file",
    "read_tool_calls",
    "tool_call",
    "tool_call_entry",
]

#: :func:`tool_call` takes a record whose fields all have their exact JSON types (what
#: ``json.loads`` gives a well-formed line) through one inline check instead of a
#: :func:`~actormem._storage.jsonl.need` call per field; anything else (a missing key, a
#: wrong type, a boolean) goes the checked way, which raises the same errors as before.
#: False: every record the checked way (the path before it; the same calls).
_FAST_TOOL_CALL = True
#: Ints the inline check takes as a ``reward`` (``float`` of any of them is finite);
#: a larger one goes the checked way, which refuses it as not finite.
_INT_REWARD = 2**1023


@attrs.frozen(kw_only=True, slots=True)
class ToolCall:
    """One recorded tool call (one line of a tool-call file).

    Attributes:
        source: Where the record comes from (a dataset name), non-empty.
        episode: The episode (trajectory) it belongs to within ``source``, non-empty.
        step: Position in the episode, an int >= 0. Calls with equal steps keep their
            file order (``tool_lookups.jsonl`` numbers every call 0).
        tool: The tool's name.
        input: The call's arguments, any JSON value (normally an object).
        result: The tool's text output.
        reward: The episode's reward where the data has one, else ``None``.
        text: :func:`~actormem.format_trajectory` of ``tool``, ``input`` and ``result``
            when :func:`tool_call` made the call and a
            :class:`~actormem.MemoryEntry` takes that text as its ``memory``, else
            ``None``. Not an argument: set by :func:`tool_call`, which formats every
            call anyway to check it, so a replay need not format it again
            (:meth:`~actormem.MemoryHooks.after_tool_call`'s text). Not compared.
    """

    source: str
    episode: str
    step: int
    tool: str
    input: Any
    result: str
    reward: float | None = None
    text: str | None = attrs.field(default=None, init=False, eq=False, repr=False)


def _tree_encoder() -> Any:
    """The C encoder ``_INPUT_ENCODER.encode`` makes on every call, made once and without
    the circular-reference check (``markers=None``), or None without the C encoder (or
    with an indent, which the C encoder does not do). Called as ``encoder(value, 0)``:
    the chunks of the same text, or the same error, for a value that holds no container
    twice on one path (what a JSON parser gives); on a cyclic value it recurses to a
    RecursionError instead of raising ValueError, so it takes parsed values only."""
    make = getattr(json.encoder, "c_make_encoder", None)
    enc = _INPUT_ENCODER
    if make is None or enc.indent is not None:
        return None
    codec = json.encoder
    quote = codec.encode_basestring_ascii if enc.ensure_ascii else codec.encode_basestring
    return make(
        None, enc.default, quote, enc.indent, enc.key_separator, enc.item_separator,
        enc.sort_keys, enc.skipkeys, enc.allow_nan,
    )  # fmt: skip


#: The tool-call files' records (parsed JSON: no value holds itself) have their input
#: written by one C encoder made once (:func:`_tree_encoder`) instead of
#: ``_INPUT_ENCODER.encode``, which makes a new one per call (with a fresh
#: circular-reference table and two Python frames): the same text or the same error,
#: ~0.5 us a call less. Only for the values a file's lines parse to; :func:`tool_call`
#: on a caller's dict formats the usual way. False: every call formatted by
#: :func:`~actormem.format_trajectory` (the path before it).
_ENCODE_PARSED_ONCE = True
_TREE_ENCODE: Any = _tree_encoder()


def tool_call(obj: dict[str, Any]) -> ToolCall:
    """The :class:`ToolCall` of one parsed record, its ``text`` set (see there).

    Raises:
        ValueError, TypeError: A field is missing, of the wrong type or out of range, or
            :func:`~actormem.format_trajectory` refuses the call.

    O(size of the record).
    """
    return _tool_call(obj, False)


def _tool_call(obj: dict[str, Any], parsed: bool) -> ToolCall:
    """:func:`tool_call`; ``parsed``: ``obj`` came from a JSON parser (no value in it
    holds itself), so its input may go through :data:`_TREE_ENCODE`."""
    if _FAST_TOOL_CALL:
        source = obj.get("source")
        episode = obj.get("episode")
        step = obj.get("step")
        tool = obj.get("tool")
        result = obj.get("result")
        reward = obj.get("reward")
        # Exact types only (a bool is no int here): what the checked way accepts, and
        # gives the same values for (a reward made a float).
        if (
            type(source) is str
            and source
            and type(episode) is str
            and episode
            and type(step) is int
            and step >= 0
            and type(tool) is str
            and type(result) is str
            and "input" in obj
            and (
                reward is None
                or (type(reward) is float and math.isfinite(reward))
                or (type(reward) is int and -_INT_REWARD < reward < _INT_REWARD)
            )
        ):
            reward = None if reward is None else float(reward)
            return _made(source, episode, step, tool, obj["input"], result, reward, parsed)
    return _checked_tool_call(obj, parsed)


def _made(
    source: str,
    episode: str,
    step: int,
    tool: str,
    input: Any,
    result: str,
    reward: float | None,
    parsed: bool = False,
) -> ToolCall:
    """The :class:`ToolCall` of checked fields, formatted (raising as
    :func:`~actormem.format_trajectory` does), its text kept in ``call.text`` when an
    entry would take it. ``parsed``: see :func:`_tool_call`."""
    encode = _TREE_ENCODE
    if parsed and _ENCODE_PARSED_ONCE and encode is not None:
        # tool and result are str (checked): format_trajectory's own checks pass.
        try:
            encoded = "".join(encode(input, 0))
        except RecursionError:
            raise ValueError(_TOO_DEEP) from None
        # Each level of nesting writes a "[" or "{": fewer of them, no walk needed.
        if encoded.count("[") + encoded.count("{") > MAX_VALUE_DEPTH and _too_deep(input):
            raise ValueError(_TOO_DEEP)
        text = trajectory_text(tool, encoded, result)
        setters = _SLOT_SETTERS
        if _CALLS_BY_SLOTS and setters is not None:
            call = _NEW(ToolCall)
            s_source, s_episode, s_step, s_tool, s_input, s_result, s_reward, s_text = setters
            s_source(call, source)
            s_episode(call, episode)
            s_step(call, step)
            s_tool(call, tool)
            s_input(call, input)
            s_result(call, result)
            s_reward(call, reward)
            s_text(call, text if memory_text_ok(text) else None)
            return call
    call = ToolCall(
        source=source, episode=episode, step=step, tool=tool, input=input, result=result,
        reward=reward,
    )  # fmt: skip
    if not (parsed and _ENCODE_PARSED_ONCE and encode is not None):
        try:
            # format_trajectory refuses what it cannot write.
            text = format_trajectory(call.tool, call.input, call.result)
        except RecursionError:
            raise ValueError(_TOO_DEEP) from None
        if _too_deep(input):  # (no cycle in it: format_trajectory refuses those)
            raise ValueError(_TOO_DEEP)
    if memory_text_ok(text):
        object.__setattr__(call, "text", text)  # frozen: set once, as it is made
    return call


_TOO_DEEP = f"'input' is nested deeper than {MAX_VALUE_DEPTH} levels"


def _too_deep(value: Any) -> bool:
    """Whether ``value`` holds arrays or objects nested deeper than
    :data:`~actormem._json.MAX_VALUE_DEPTH` levels (the limit an entry's value has). A
    tool call's input deeper than that is refused when read: one deep enough to be
    parsed could leave too little stack to write it again later (the reader's own
    encoding, or ``Episode.first_query`` in a swarm's agent), a bare ``RecursionError``
    naming no file. No value of the real data sets is deeper than 3. Iterative;
    ``value`` holds no cycle. O(size of value)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth >= MAX_VALUE_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


#: :class:`ToolCall`'s fields, in the order :func:`_made` fills their slots.
_CALL_FIELDS = ("source", "episode", "step", "tool", "input", "result", "reward", "text")


def _slot_setters(cls: type = ToolCall) -> tuple[Any, ...] | None:
    """The ``__set__`` of each of ``cls``'s slots in the order of :data:`_CALL_FIELDS`,
    when the file reader may fill a call's slots directly (:data:`_CALLS_BY_SLOTS`): an
    attrs class with slots and no ``__dict__``, whose fields are exactly those, none
    with a validator, a converter or an ``on_setattr`` hook, and no
    ``__attrs_post_init__`` / ``__attrs_pre_init__``, so its ``__init__`` would do
    nothing but set them. Else None (the ``__init__`` is used). O(fields)."""
    if not attrs.has(cls) or "__dict__" in dir(cls):
        return None
    fields = attrs.fields(cls)
    if tuple(f.name for f in fields) != _CALL_FIELDS:
        return None
    if any(f.validator or f.converter or f.on_setattr for f in fields):
        return None
    if hasattr(cls, "__attrs_post_init__") or hasattr(cls, "__attrs_pre_init__"):
        return None
    setters = []
    for name in _CALL_FIELDS:
        slot: Any = vars(cls).get(name)
        if type(slot).__name__ != "member_descriptor":
            return None
        setters.append(slot.__set__)
    return tuple(setters)


#: The file reader makes each :class:`ToolCall` by setting its eight slots (a new
#: object, then each slot's descriptor) instead of through the attrs ``__init__`` (which
#: sets them one by one through ``object.__setattr__`` bound anew, then the text again):
#: the same object, field for field, ~0.7 us a call less. Only when
#: :func:`_slot_setters` finds it safe, and only for the values a file's lines parse to.
#: False: the attrs ``__init__`` (the path before it).
_CALLS_BY_SLOTS = True
_NEW = object.__new__
_SLOT_SETTERS = _slot_setters()


def _checked_tool_call(obj: dict[str, Any], parsed: bool = False) -> ToolCall:
    source = need(obj, "source", str, "a string")
    episode = need(obj, "episode", str, "a string")
    if not source or not episode:
        raise ValueError("'source' and 'episode' must not be empty")
    step = need(obj, "step", int, "an integer")
    if step < 0:
        raise ValueError(f"'step' must be >= 0, got {step}")
    tool = need(obj, "tool", str, "a string")
    if "input" not in obj:
        raise ValueError("missing 'input'")
    result = need(obj, "result", str, "a string")
    reward = obj.get("reward")
    if reward is not None:
        if isinstance(reward, bool) or not isinstance(reward, (int, float)):
            raise ValueError(f"'reward' must be a number, not {type(reward).__name__}")
        try:
            reward = float(reward)  # an int too large for a float: OverflowError
        except OverflowError:
            reward = math.inf
        if not math.isfinite(reward):
            raise ValueError("'reward' must be finite")
    return _made(source, episode, step, tool, obj["input"], result, reward, parsed)


def read_tool_calls(path: Path) -> tuple[list[ToolCall], str]:
    """Read and check a whole tool-call file.

    Args:
        path: A JSONL file of tool calls (see the module docs).

    Returns:
        ``(calls, sha256)``: the calls in file order, and the hex SHA-256 of the file's
        bytes (for reports that compare runs).

    Raises:
        JsonlError: The file cannot be read, or a line is not JSON or not a tool call.
            Names the file and the line.

    Runtime complexity: O(size of the file).
    """
    if _READ_ONCE:
        read = _read_once(path)
        if read is not None:
            return read
    calls: list[ToolCall] = []
    for number, value in json_lines(path):
        calls.append(_line_call(path, number, value))
    return calls, file_sha256(path)


def _line_call(path: Path, number: int, value: object) -> ToolCall:
    """The tool call of line ``number``'s JSON ``value``, or :class:`JsonlError` naming
    the file and the line. O(size of the value)."""
    if not isinstance(value, dict):
        raise JsonlError(path, number, f"expected a JSON object, got {type(value).__name__}")
    try:
        return _tool_call(value, True)  # a parsed line's value
    except (ValueError, TypeError) as exc:
        raise JsonlError(path, number, f"not a tool call: {exc}") from None


#: :func:`read_tool_calls` reads the file's bytes once, takes their SHA-256 and decodes
#: them whole, then parses each line with the JSON module's scanner itself (no
#: ``json.loads`` / ``decode`` / ``raw_decode`` frames a line); a line the scanner
#: does not take whole (leading whitespace, an error) goes through ``json.loads`` as
#: before, which gives its value or its error. A file that cannot be read or is not
#: UTF-8 goes the streaming way, which raises the same errors as before. False: the
#: streaming way for every file (the path before it; the same calls, digest, errors).
_READ_ONCE = True

#: :func:`_read_once` decodes the file's lines one by one (its bytes split at
#: ``b"\n"``) instead of the whole file into one str then split: a single character
#: beyond U+FFFF anywhere (an emoji in one tool result) made that str 4 bytes a
#: character, ~4x the file (6.3 MB for the 1.6 MB ``tool_calls.jsonl``), while each line
#: decoded alone is as narrow as its own characters. The same lines, digest and errors
#: (a file that is not UTF-8 still goes the streaming way); ~1/3 fewer page faults
#: and ~8 ms less CPU for the main job's two files on the AMD VM. False: the whole
#: text decoded (the path before it).
_DECODE_BY_LINE = True
_UTF8_BOM = b"\xef\xbb\xbf"

#: ``json.loads``'s own scanner (the C one where built) and JSON's whitespace.
_SCAN: Any = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]
_JSON_SPACE: Any = json.decoder.WHITESPACE.match  # type: ignore[attr-defined]


def _read_once(path: Path) -> tuple[list[ToolCall], str] | None:
    """:func:`read_tool_calls` from the file's bytes read once (see :data:`_READ_ONCE`),
    or None when the file cannot be read or is not UTF-8 (the caller then reads it the
    streaming way, which raises the error). O(size of the file); holds the file's bytes
    and its lines at once."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if data.startswith(SQLITE_MAGIC):
        return None  # a database given for the JSONL file: the streaming way says so
    digest = hashlib.sha256(data).hexdigest()
    lines: list[str]
    if _DECODE_BY_LINE:
        # The same lines: UTF-8 never has the byte b"\n" inside a character, so the
        # file is UTF-8 exactly when each of its pieces is, and the pieces decode to
        # the text's lines.
        pieces = data.split(b"\n")
        del data  # (its digest is taken; the pieces hold the bytes)
        if pieces[0].startswith(_UTF8_BOM):
            pieces[0] = pieces[0][len(_UTF8_BOM) :]  # as json_lines skips it
        try:
            lines = [piece.decode("utf-8") for piece in pieces]
        except UnicodeDecodeError:
            return None
        del pieces
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if text.startswith("\ufeff"):
            text = text[1:]  # a byte-order mark, as json_lines skips it
        lines = text.split("\n")
    calls: list[ToolCall] = []
    scan = _SCAN
    space = _JSON_SPACE
    last = len(lines)  # the one line without a "\n" after it (empty if the file ends so)
    for number, line in enumerate(lines, start=1):
        # The streaming reader's lines end at b"\n" and keep it; UTF-8 never has that
        # byte inside a character, so these are the same lines, each without its "\n".
        if not line.strip():
            continue
        try:
            value, end = scan(line, 0)
            if end != len(line) and space(line, end).end() != len(line):
                raise ValueError("extra data")
        except Exception:  # json.loads of the line as streamed says what json_lines would
            value = parse_line(path, number, line if number == last else line + "\n")
        calls.append(_line_call(path, number, value))
    return calls, digest


def tool_call_entry(call: ToolCall, *, episode: str | None = None) -> MemoryEntry:
    """The ``TRAJECTORY`` entry :class:`~actormem.MemoryHooks` would store for ``call``,
    in namespace ``(source, episode)`` (``episode`` overrides the call's own id).

    Raises:
        TypeError, ValueError: As :func:`~actormem.format_trajectory`.
    """
    entry = MemoryEntry.new(
        MemoryCategory.TRAJECTORY, format_trajectory(call.tool, call.input, call.result)
    )
    return entry.with_namespace(call.source, call.episode if episode is None else episode)


#: Namespace of the ids :func:`line_id` derives (a fixed, random UUID; never change it,
#: or re-running an import made before the change would store its lines again).
IMPORT_ID_NAMESPACE = uuid.UUID("3f0c5d0e-8b7a-4f1e-9c64-2a51d8e0b7c3")


def line_id(value: Any) -> uuid.UUID:
    """The stable id of an import line without an ``id``: ``uuid5`` of the line's
    canonical JSON (keys sorted, no spaces, non-ASCII kept) in
    :data:`IMPORT_ID_NAMESPACE`. The same content always gives the same id, whatever the
    key order or spacing of the line, so importing a file twice replaces its entries
    instead of duplicating them. O(size of the line)."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return uuid.uuid5(IMPORT_ID_NAMESPACE, canonical)


@attrs.frozen(kw_only=True, slots=True)
class ImportLines:
    """The checked content of an ``actormem import`` file.

    Attributes:
        entries: What to store, in order (with ``later_wins``, each id once, at the
            place of its last line).
        entry_lines: Lines that were entries.
        tool_call_lines: Lines that were tool calls.
        repeated: Lines dropped because a later line had the same id (``later_wins``).
        vectors: The dense vectors of the entries that carry one (exported entries),
            by entry id, each made from that entry's text (its ``text_hash`` matched).
        stale_vectors: Vectors left out because their ``text_hash`` is not that of
            their entry's text (the line was edited after the export).
        not_unit_vectors: Vectors left out because their length is not 1 (within
            :data:`~actormem._storage.jsonl.UNIT_TOLERANCE`): all zero, or scaled.
    """

    entries: list[MemoryEntry]
    entry_lines: int
    tool_call_lines: int
    repeated: int
    vectors: dict[uuid.UUID, JsonVector] = attrs.field(factory=dict)
    stale_vectors: int = 0
    not_unit_vectors: int = 0


def read_import_file(path: Path, *, later_wins: bool = False) -> ImportLines:
    """Read and check a whole file for ``actormem import``: entries, tool calls, or both.

    A line with ``tool`` and ``result`` keys is a tool call and becomes its trajectory
    entry (:func:`tool_call_entry`); a line with a ``memory`` key is an entry. A line
    without an ``id`` (every tool call) gets :func:`line_id`, derived from its content,
    so that running an import again never stores a line twice.

    An entry line may carry its dense ``vector`` (as ``actormem export`` writes it, see
    :func:`~actormem._storage.jsonl.vector_from_json`); a malformed one is an error of
    that line, one made from another text than the entry's is left out (counted).

    Two lines with the same id (given, or derived: two identical lines), or with the same
    namespace and ``key``, are refused, naming both lines, unless ``later_wins``: then
    the later line replaces the earlier one entirely (its text and every other field),
    as if the earlier were not there.

    Args:
        path: The JSON Lines file; a UTF-8 byte-order mark at its start is skipped.
        later_wins: Let a later line with an id already given replace the earlier line.

    Returns:
        An :class:`ImportLines`.

    Raises:
        JsonlError: The file cannot be read, a line is neither kind, or (without
            ``later_wins``) a line repeats the id of an earlier line (file and line named).

    Runtime complexity: O(size of the file).
    """
    found: dict[uuid.UUID, tuple[int, MemoryEntry]] = {}
    keyed: dict[tuple[tuple[str, ...], str], uuid.UUID] = {}
    vectors: dict[uuid.UUID, JsonVector] = {}
    n_entries = n_calls = repeated = stale = not_unit = 0
    for number, value in json_lines(path):
        if not isinstance(value, dict):
            raise JsonlError(path, number, f"expected a JSON object, got {type(value).__name__}")
        vector: JsonVector | None = None
        try:
            if "tool" in value and "result" in value:
                entry = tool_call_entry(tool_call(value))
                n_calls += 1
            elif "memory" in value:
                if "vector" in value:
                    vector = vector_from_json(value["vector"])
                    entry = entry_from_json({k: v for k, v in value.items() if k != "vector"})
                else:
                    entry = entry_from_json(value)
                n_entries += 1
            else:
                raise ValueError(
                    "neither an entry (no 'memory' key) nor a tool call (no 'tool'/'result')"
                )
        except (ValueError, TypeError) as exc:
            raise JsonlError(path, number, str(exc)) from None
        given = "id" in value and "memory" in value
        if not given:
            entry = attrs.evolve(entry, id=line_id(value))
        earlier = found.pop(entry.id, None)
        what = f"id {entry.id}" if given else "content (so the same derived id)"
        if earlier is None and entry.key is not None:
            # A key names one entry per namespace too: a store with a live (namespace,
            # key) replaces that entry, so two such lines would mix like two ids would.
            same = keyed.get((entry.namespace, entry.key))
            if same is not None and same in found:
                earlier = found.pop(same)
                what = f"namespace and key {entry.key!r}"
        if earlier is not None:
            if not later_wins:
                raise JsonlError(
                    path,
                    number,
                    f"the same {what} as line {earlier[0]}; pass --later-wins to let the "
                    "later line replace the earlier one",
                )
            repeated += 1
            vectors.pop(earlier[1].id, None)
        found[entry.id] = (number, entry)
        if vector is not None:
            if vector.text_hash != text_hash(entry_document(entry)):
                stale += 1
            elif not is_unit_vector(vector.data):
                not_unit += 1
            else:
                vectors[entry.id] = vector
        if entry.key is not None:
            keyed[(entry.namespace, entry.key)] = entry.id
    return ImportLines(
        entries=[entry for _, entry in found.values()],
        entry_lines=n_entries,
        tool_call_lines=n_calls,
        repeated=repeated,
        vectors=vectors,
        stale_vectors=stale,
        not_unit_vectors=not_unit,
    )
