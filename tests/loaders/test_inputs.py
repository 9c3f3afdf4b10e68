"""Input that does not decode: every bad line is its own reject, in every reader.

One JSON Lines file holds a line of every kind that once took a whole command down (bytes
that are not UTF-8, overlong UTF-8, encoded surrogates, JSON nested 100,000 deep, lone
surrogates in an id and in an expr, NaN and infinite ids, a 5,000-digit integer, a BOM),
mixed with good lines, CRLF endings, blank lines and a last line without a newline.
``bexdb load`` on both engines loads the same ids and writes the same rejects (strict JSON
Lines, exit 3); ``bexdb subscribe`` rejects the batch with one clean error per bad line
(exit 3, nothing written); ``bexdb match`` answers every line of a same-shaped events file.
A bad ``--schema`` file is a usage error (exit 2) naming the file.  The expected rejects
are written out by hand below.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betree.formats.jsonl import MAX_DEPTH, loads_line
from betree.index import Index
from loaders.records import Record, parse_line, write_rejects
from tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = {"attributes": {"i": {"type": "int"}, "s": {"type": "string"}}}
BOM = b"\xef\xbb\xbf"
DEEP = b"[" * 100_000 + b"]" * 100_000
NOT_UNICODE = "(not valid Unicode)"
TOO_DEEP = "malformed JSON: nested too deeply (more than 128 levels)"

#: (line, the reject's id and error, or None if the line loads or is blank); the file is
#: these lines joined by "\n", and the last one has no newline.
LINES: list[tuple[bytes, tuple[Any, str] | None]] = [
    (BOM + b'{"id": 1, "expr": "i = 1"}\r', None),  # a BOM at the start of the file is ignored
    (b'{"id": 2, "expr": "\xff"}', (None, "not UTF-8: invalid start byte at byte 19")),
    (b'{"id": 3, "expr": "\xc0\xaf"}', (None, "not UTF-8: invalid start byte at byte 19")),
    (
        b'{"id": 4, "expr": "\xed\xa0\x80"}',
        (None, "not UTF-8: invalid continuation byte at byte 19"),
    ),
    (DEEP, (None, TOO_DEEP)),
    (
        b'{"id": 6, "expr": "i = 1", "x": ' + DEEP + b"}",
        (None, TOO_DEEP),
    ),
    (
        b'{"id": "\\ud800", "expr": "i = 1"}',
        (None, f"id holds a lone surrogate \\ud800 at character 1 {NOT_UNICODE}"),
    ),
    (
        b'{"id": 8, "expr": "s = \\"\\udc00\\""}',
        (8, f"expr holds a lone surrogate \\udc00 at character 6 {NOT_UNICODE}"),
    ),
    (
        b'{"id": 9, "expr": "i = 1 \\udbff"}',
        (9, f"expr holds a lone surrogate \\udbff at character 7 {NOT_UNICODE}"),
    ),
    (b'{"id": NaN, "expr": "i = 1"}', (None, "id must be a string or an integer, not NaN")),
    (
        b'{"id": -Infinity, "expr": "i = 1"}',
        (None, "id must be a string or an integer, not an infinite number"),
    ),
    (
        b'{"id": 1e400, "expr": "i = 1"}',
        (None, "id must be a string or an integer, not an infinite number"),
    ),
    (
        b'{"id": ' + b"9" * 5000 + b', "expr": "i = 1"}',
        (None, "malformed JSON: an integer of more than 4300 digits"),
    ),
    (
        b'{"id": 18446744073709551616, "expr": "i = 1"}',
        (18446744073709551616, "integer id outside the signed 64-bit range"),
    ),
    (b'{"id": 1.5, "expr": "i = 1"}', (1.5, "id must be a string or an integer")),
    (
        b'{"id": {"a": [1]}, "expr": "i = 1"}',
        (None, "id must be a string or an integer, not an object"),
    ),
    (b'{"id": [17], "expr": "i = 1"}', (None, "id must be a string or an integer, not an array")),
    (b'{"id": 18, "expr": NaN}', (18, "expr must be a string")),
    (b'{"id": 19, "expr": ["i = 1"]}', (19, "expr must be a string")),
    (b'"just a string"', (None, 'a record must be an object with "id" and "expr"')),
    (b'{"id": NaN}', (None, 'a record must be an object with "id" and "expr"')),
    (b'{"id": 22, "expr": "i = 22"}\r', None),
    (b"", None),
    (b" \t", None),
    (b"\r", None),
    (
        BOM + b'{"id": 26, "expr": "i = 26"}',
        (
            None,
            "malformed JSON: a byte order mark (U+FEFF) starts the line; "
            "only the file's first line may have one",
        ),
    ),
    (b'{"id": 27,\r"expr": "i = 27"}', None),  # a lone CR is white space, not a line end
    (b'{"id": "\\ud83d\\ude00", "expr": "s = \\"\\u00fc\\""}', None),  # a surrogate pair
    ('{"id": "ü", "expr": "i = 29"}'.encode(), None),
    (b'{"id": 30, "expr": "i = 30", "x": NaN}', None),  # fields other than id, expr ignored
    (b'{"id": 31, "expr": "i = 1", "x": ' + b"[" * 127 + b"]" * 127 + b"}", None),
    (b'{"id": 32, "expr": "i = 1", "x": ' + b"[" * 128 + b"]" * 128 + b"}", (None, TOO_DEEP)),
    (b'{"id": 33, "expr": "i = 1", "x": "' + b"[" * 200 + b'"}', None),  # brackets in a string
    (b'{"id": 34, "expr": "i = 34"}', None),  # no newline at the end of the file
]
LOADED = [1, 22, 27, "\U0001f600", "ü", 30, 31, 33, 34]
REJECTS = [
    {"line": n, "id": want[0], "error": want[1]}
    for n, (_, want) in enumerate(LINES, 1)
    if want is not None
]


def write_bad(tmp_path: Path) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(line for line, _ in LINES))
    return path


def write_schema(tmp_path: Path, doc: Any = SCHEMA) -> str:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(doc))
    return str(path)


def bexdb(*argv: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    """``bexdb ARGV`` in a child process: what a user runs, tracebacks and all."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tools.cli", *argv],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=120,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def strict_json(line: bytes) -> Any:
    """``line`` parsed as RFC 8259 JSON: UTF-8, no NaN or infinities, no lone surrogates."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    doc = json.loads(line.decode("utf-8"), parse_constant=refuse)
    json.dumps(doc, ensure_ascii=False).encode("utf-8")  # a lone surrogate raises
    return doc


def rejects_of(path: Path) -> list[Any]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    return [strict_json(line) for line in raw.split(b"\n")[:-1]]


def loaded_ids(store: Path) -> list[str]:
    with Index.open(store) as idx:
        return sorted(json.dumps(ident) for ident, _ in idx.subscriptions())


def test_python_load_rejects_each_bad_line(tmp_path: Path) -> None:
    rejects = tmp_path / "rejects.jsonl"
    done = bexdb(
        "load",
        str(tmp_path / "store"),
        str(write_bad(tmp_path)),
        "--engine",
        "python",
        "--schema",
        write_schema(tmp_path),
        "--rejects",
        str(rejects),
    )
    assert "Traceback" not in done.stderr
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["loaded"] == len(LOADED)
    assert rejects_of(rejects) == REJECTS
    assert loaded_ids(tmp_path / "store") == sorted(json.dumps(i) for i in LOADED)


def test_subscribe_rejects_the_batch_line_by_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = bexdb(
        "subscribe", str(store), str(write_bad(tmp_path)), "--schema", write_schema(tmp_path)
    )
    assert "Traceback" not in done.stderr
    assert done.returncode == 3
    assert done.stderr.splitlines() == [
        *(f"bexdb: line {r['line']}: {r['error']}" for r in REJECTS),
        "bexdb: nothing was subscribed",
    ]
    assert not store.exists()


def test_subscribe_reads_bom_crlf_and_a_last_line_without_newline(tmp_path: Path) -> None:
    good = BOM + b'{"id": 1, "expr": "i = 1"}\r\n\r\n{"id": "\\u00fc", "expr": "i = 2"}'
    store = tmp_path / "store"
    done = bexdb("subscribe", str(store), "--schema", write_schema(tmp_path), stdin=good)
    assert (done.returncode, done.stdout) == (0, "subscribed 2 (2 new, 0 replaced)\n"), done.stderr
    assert loaded_ids(store) == sorted(json.dumps(i) for i in (1, "ü"))


def test_match_answers_every_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    subs = tmp_path / "subs.jsonl"
    subs.write_text('{"id": 1, "expr": "i = 1"}\n{"id": 2, "expr": "s = \\"ü\\""}\n')
    assert main(["subscribe", str(store), str(subs), "--schema", write_schema(tmp_path)]) == 0
    events: list[tuple[bytes, dict[str, Any] | None]] = [
        (BOM + b'{"i": 1}\r', {"matches": [1]}),
        (b'{"s": "\xff"}', {"error": "not UTF-8: invalid start byte at byte 7"}),
        (b'{"s": "\xc0\xaf"}', {"error": "not UTF-8: invalid start byte at byte 7"}),
        (DEEP, {"error": TOO_DEEP}),
        (
            b'{"s": "\\ud800"}',
            {"error": f'attribute "s": the string holds a lone surrogate {NOT_UNICODE}'},
        ),
        (b'{"i": NaN}', {"error": 'attribute "i": expected an integer, got a float (nan)'}),
        (b"", None),
        (b"\r", None),
        (
            BOM + b'{"i": 1}',
            {
                "error": "malformed JSON: a byte order mark (U+FEFF) starts the line; "
                "only the file's first line may have one"
            },
        ),
        (b'{"s": "\\u00fc",\r"i": 5}', {"matches": [2]}),
        (b'{"i": 1}', {"matches": [1]}),  # no newline at the end
    ]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(line for line, _ in events))
    done = bexdb("match", str(store), str(path))
    assert "Traceback" not in done.stderr
    assert done.returncode == 3
    out = [strict_json(line.encode()) for line in done.stdout.splitlines()]
    assert out == [want for _, want in events if want is not None]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{not json", "malformed JSON: Expecting property name enclosed in double quotes"),
        (b'{"attributes":\n {"i": {"type": "int"}}\n', "malformed JSON: Expecting ',' delimiter"),
        (b'{"attributes": {"s": {"type": "string", "max": "\xff"}}}', "not UTF-8"),
        (b"[1]", "the document must be a JSON object"),
        (b'{"attributes": {"i": {"type": "integer"}}}', 'attribute "i": unknown type "integer"'),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (
            b'{"attributes": {"s": {"type": "string", "max": "\\ud800"}}}',
            f'"max" holds a lone surrogate {NOT_UNICODE}',
        ),
        (
            b'{"attributes": {"f": {"type": "float", "min": 1' + b"0" * 400 + b"}}}",
            '"min" must be a finite number',
        ),
        (None, "cannot read it: No such file or directory"),
    ],
)
@pytest.mark.parametrize("command", ["load", "subscribe"])
def test_a_bad_schema_file_is_a_usage_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    content: bytes | None,
    reason: str,
) -> None:
    schema = tmp_path / "schema.json"
    if content is not None:
        schema.write_bytes(content)
    subs = tmp_path / "subs.jsonl"
    subs.write_text('{"id": 1, "expr": "i = 1"}\n')
    store = tmp_path / "store"
    argv = [command, str(store), str(subs), "--schema", str(schema)]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--engine", "python"] if command == "load" else argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --schema: {schema}: " in err
    assert reason in err
    assert not store.exists()


def test_a_schema_file_may_start_with_a_bom(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_bytes(BOM + json.dumps(SCHEMA).encode())
    subs = tmp_path / "subs.jsonl"
    subs.write_text('{"id": 1, "expr": "i = 1"}\n')
    assert main(["subscribe", str(tmp_path / "store"), str(subs), "--schema", str(schema)]) == 0


@pytest.mark.spark
def test_spark_load_matches_the_python_engine(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """``bexdb load --engine spark`` (run in this process, so that the load takes the
    session fixture as the active session) over several input splits: exit 3, and the
    python engine's rejects, byte for byte, and loaded ids."""
    from loaders import python_load
    from loaders.records import read_jsonl
    from loaders.spark import driver

    bad = str(write_bad(tmp_path))
    python_rejects = io.StringIO()
    python_load.load(tmp_path / "py", read_jsonl(bad), SCHEMA, rejects=python_rejects)
    rejects = tmp_path / "rejects.jsonl"
    monkeypatch.setattr(driver, "MIN_SPLIT", 64 << 10)  # about 7 splits of the 410 KB
    code = main(
        [
            "load",
            str(tmp_path / "spark"),
            bad,
            "--schema",
            write_schema(tmp_path),
            "--rejects",
            str(rejects),
        ]
    )
    assert code == 3, capsys.readouterr().err
    assert rejects_of(rejects) == REJECTS
    assert rejects.read_text() == python_rejects.getvalue()
    assert loaded_ids(tmp_path / "spark") == loaded_ids(tmp_path / "py")
    assert loaded_ids(tmp_path / "spark") == sorted(json.dumps(i) for i in LOADED)


@pytest.mark.parametrize(
    ("field", "want"),
    [
        ('"\\ud800"', (None, f"id holds a lone surrogate \\ud800 at character 1 {NOT_UNICODE}")),
        ("[" * 5000, ("[" * 5000, None)),  # not a JSON id: the text is the id
        ("9" * 5000, ("9" * 5000, None)),
        ("NaN", ("NaN", None)),
        ('"7"', ("7", None)),
        ("7", (7, None)),
    ],
)
def test_a_csv_id_field_is_one_record(field: str, want: tuple[Any, str | None]) -> None:
    """A CSV id field that is JSON is read as JSON (Spark engine, no Spark needed)."""
    from loaders.spark.extract import CSV, parse_record

    record = parse_record(CSV, json.dumps({"id": field, "expr": "i = 1"}).encode())
    assert record is not None
    assert (record.id, record.error) == want


#: JSON-ish values: every float (NaN, infinities), every code point (lone surrogates too),
#: integers past 64 bits, nesting; written with ``json.dumps`` (NaN as ``NaN``, a
#: surrogate as its ``\\ud800`` escape).
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(
        st.characters(exclude_categories=())
        | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
        max_size=8,
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    ident=VALUES,
    expr=VALUES | st.sampled_from(["i = 1", 's = "\\ud800"', "i = 1 \ud800"]),
    noise=st.binary(max_size=4),
    cut=st.integers(min_value=0, max_value=60),
)
def test_any_line_is_a_record_or_a_reject_in_strict_json(
    ident: Any, expr: Any, noise: bytes, cut: int
) -> None:
    """Whatever a line holds, the reader gives a record or its reason, never an exception,
    and the rejects file stays strict JSON Lines (also with bytes spliced into the line)."""
    line = json.dumps({"id": ident, "expr": expr}).encode()
    for text in (line, line[:cut] + noise + line[cut:]):
        record = parse_line(text, 7)
        assert record is None or isinstance(record, Record)
        if record is None:
            continue
        if record.error is None:
            record.expr.encode("utf-8")  # a usable record is valid Unicode
        out = io.StringIO()
        write_rejects(out, [Record(7, record.id, None, record.error or "x")])
        assert strict_json(out.getvalue().encode()) == {
            "line": 7,
            "id": record.id,
            "error": record.error or "x",
        }


def _general(raw: bytes) -> object:
    """What ``json.loads`` makes of a line (the reader's general path), or its refusal."""
    try:
        return ("ok", repr(json.loads(raw.decode("utf-8"))))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return ("refused",)


def _outcome(raw: bytes) -> object:
    from storage.errors import InvalidInput

    try:
        return ("ok", repr(loads_line(raw)))
    except InvalidInput:
        return ("refused",)


_NUMBER_TEXTS = st.sampled_from(
    ["0", "-0", "1e400", "-1e400", "1e-400", "5e-324", "0.1", "1E5", "-0.0", "NaN", "Infinity",
     "18446744073709551615", "18446744073709551616", "-9223372036854775808",
     "-9223372036854775809", "1234567890123456789", "123456789012345678", "01", "1.",
     "12345678901234567890.5", "0.12345678901234567890"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    value=VALUES,
    numbers=st.lists(_NUMBER_TEXTS, max_size=3),
    noise=st.binary(max_size=3),
    cut=st.integers(min_value=0, max_value=40),
    depth=st.sampled_from([0, 0, 0, 127, 128, 129]),
)
def test_lines_read_as_json_loads_reads_them(
    value: Any, numbers: list[str], noise: bytes, cut: int, depth: int
) -> None:
    """The reader's fast path (orjson) gives exactly ``json.loads``'s value, or leaves the
    line to the general path: big integers stay ints, NaN and lone surrogates are read,
    bad bytes are refused alike (the nesting limit is the reader's own)."""
    body = json.dumps(value) if numbers == [] else "[" + ", ".join(numbers) + "]"
    line = ("[" * depth + body + "]" * depth).encode("utf-8", "surrogatepass")
    for raw in (line, line[:cut] + noise + line[cut:]):
        found = _outcome(raw)
        if found[0] == "ok" or raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
            assert found == _general(raw), raw


@pytest.mark.parametrize("inner", [b"1", b"2.5", b"18446744073709551616", b'"x"', b""])
def test_the_nesting_limit_is_exact_on_either_path(inner: bytes) -> None:
    """128 levels load, 129 are refused, whether orjson or json reads the line."""
    from storage.errors import InvalidInput

    for opener, closer in ((b"[", b"]"), (b'{"k": ', b"}")):
        if opener != b"[" and not inner:
            continue  # ({"k": } is not JSON)
        for levels, ok in ((MAX_DEPTH, True), (MAX_DEPTH + 1, False)):
            core = (opener * (levels - 1)) + b"[" + inner + b"]" + (closer * (levels - 1))
            if ok:
                assert repr(loads_line(core)) == repr(json.loads(core)), (levels, opener)
            else:
                with pytest.raises(InvalidInput, match="nested too deeply"):
                    loads_line(core)


_IDS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.integers(min_value=2**64, max_value=2**70),
    st.text(max_size=5),
)


@given(
    st.lists(
        st.one_of(
            st.builds(lambda ids: {"matches": ids}, st.lists(_IDS, max_size=30)),
            st.builds(lambda ids: {"matches": ids}, st.lists(st.integers(), max_size=30)),
            st.builds(lambda why: {"error": why}, st.text(max_size=20)),
        ),
        max_size=8,
    )
)
@settings(max_examples=300, deadline=None)
def test_result_lines_are_json_dumps_byte_for_byte(results: list[dict[str, Any]]) -> None:
    """``bexdb match`` writes integer ids through orjson (:func:`dump_results`): the
    bytes are ``json.dumps``'s, for ids at and past the ends of 64 bits, string ids (with
    commas, quotes, non-ASCII) and errors."""
    from betree.formats.jsonl import dump_results

    expected = "".join(json.dumps(r) + "\n" for r in results).encode()
    assert dump_results(results) == expected
    # as bexdb match and the Spark job give them: ids in a numpy array, after the
    # "line" (and "file") keys
    from betree.disk.nodes import id_array

    placed = [{"line": k, "file": 'ß,"x".jsonl'} | r for k, r in enumerate(results)]
    expected = "".join(json.dumps(r) + "\n" for r in placed).encode()
    arrays = [{**r, "matches": id_array(r["matches"])} if "matches" in r else r for r in placed]
    assert dump_results(arrays) == expected
    assert dump_results([{"matches": id_array(list(range(5)))[::2]}]) == b'{"matches": [0, 2, 4]}\n'
    assert (
        dump_results([{"matches": [2**63, -(2**63), 0, 2**64 - 1]}])
        == (json.dumps({"matches": [2**63, -(2**63), 0, 2**64 - 1]}) + "\n").encode()
    )
    assert (
        dump_results([{"matches": ["a, b", '"', "ß", 1]}])
        == (json.dumps({"matches": ["a, b", '"', "ß", 1]}) + "\n").encode()
    )


@given(
    st.lists(
        st.one_of(
            st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),
            st.sampled_from([b"", b"  ", b"\r", b"\xef\xbb\xbf{}", b'{"a": 1}', b"x" * 70_000]),
        ),
        max_size=40,
    ),
    st.booleans(),
    st.booleans(),
    st.lists(st.integers(1, 90_000), min_size=1, max_size=8),
    st.integers(1, 7),
)
@settings(max_examples=60, deadline=None)
def test_ready_batches_keep_every_line_of_a_pipe(
    lines: list[bytes], bom: bool, last_newline: bool, cuts: list[int], size: int
) -> None:
    """``bexdb match`` reads a pipe in whatever pieces its writer sends
    (betree.streams.stream.ready_batches): the batches hold exactly the non-blank lines that
    betree.formats.jsonl.input_lines gives for the same bytes, in order, none over ``size``,
    across a BOM, blank lines, carriage returns and lines longer than the pipe's buffer."""
    import tempfile
    import threading

    from betree.formats.jsonl import input_lines
    from betree.streams.stream import ready_batches

    data = (b"\xef\xbb\xbf" if bom else b"") + b"\n".join(lines)
    if last_newline and data:
        data += b"\n"
    expected = [line for line in input_lines(io.BytesIO(data)) if line.strip()]
    read_end, write_end = os.pipe()

    def write() -> None:
        with os.fdopen(write_end, "wb", buffering=0) as out:
            at, k = 0, 0
            while at < len(data):
                step = cuts[k % len(cuts)]
                out.write(data[at : at + step])
                at, k = at + step, k + 1

    writer = threading.Thread(target=write)
    writer.start()
    with os.fdopen(read_end, "rb") as fh:
        batches = list(ready_batches(fh, size))
    writer.join()
    assert [line for batch in batches for line in batch] == expected
    assert all(0 < len(batch) <= size for batch in batches)
    # a regular file is always ready: full batches, also through the descriptor
    full = [min(size, len(expected) - k) for k in range(0, len(expected), size)]
    with tempfile.TemporaryFile() as file:
        file.write(data)
        file.seek(0)
        assert [len(b) for b in ready_batches(file, size)] == full
    assert [len(b) for b in ready_batches(io.BytesIO(data), size)] == full
