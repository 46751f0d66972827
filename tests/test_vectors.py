"""The known-answer vector files in ``vectors/``.

Every expected value is recomputed here by a second FNV-1a 64 implementation
that shares no code with ``reference/hasher.py``: it multiplies by the prime as
shifts and adds, and builds each op's encoded bytes with ``struct``. A bug in
the reference that the generator faithfully copied into the vector files would
therefore have to be made twice, independently, to pass.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
VECTORS_DIR = REPO_ROOT / "vectors"
PUBLISHED_TSV = REPO_ROOT.parent / "shared" / "reference-data" / "fnv1a64-published-vectors.tsv"

FILES = ("fnv1a64-published.json", "fnv1a64-fold.json", "encoding.json")
ID_PREFIX = {
    "fnv1a64-published.json": "fnv1a64.published.",
    "fnv1a64-fold.json": "fnv1a64.fold.",
    "encoding.json": "encoding.",
}
ID_PATTERN = re.compile(r"[a-z0-9]+(\.[a-z0-9-]+)+")
HEX64 = re.compile(r"0x[0-9a-f]{16}")
REQUIREMENT = re.compile(r"HASH-(?:[1-9]|1[1-4])")  # HASH-10 is withdrawn

# ---------------------------------------------------------------------------
# A second, independent FNV-1a 64 (does not import the reference)
# ---------------------------------------------------------------------------

MASK64 = 0xFFFF_FFFF_FFFF_FFFF
BASIS = 0xCBF2_9CE4_8422_2325


def times_prime(h: int) -> int:
    """``h * 0x100000001b3 mod 2**64``, with the prime split as 2**40 + 2**8 + 0xb3."""
    return ((h << 40) + (h << 8) + h * 0xB3) & MASK64


def fold(h: int, data: bytes) -> int:
    for byte in data:
        h = times_prime(h ^ byte)
    return h


def fold_fnv1(h: int, data: bytes) -> int:
    """The FNV-1 order (multiply, then xor): the misreading HASH-2 rules out."""
    for byte in data:
        h = times_prime(h) ^ byte
    return h


def le_u64(value: int) -> bytes:
    return struct.pack("<Q", value)


def enc_str(text: str, length_format: str = "<Q") -> bytes:
    raw = text.encode("utf-8")
    return raw + struct.pack(length_format, len(raw))


def op_bytes_payload(op: dict[str, Any]) -> bytes:
    return bytes.fromhex(op["hex"]) * int(op.get("repeat", 1))


def encode_op(op: dict[str, Any]) -> bytes:
    """The bytes an op folds into the state (HASH-4 .. HASH-8, HASH-14)."""
    kind = op["op"]
    if kind == "bytes":
        return op_bytes_payload(op)
    if kind == "str":
        return enc_str(op["value"])
    if kind == "u64":
        return le_u64(int(op["value"], 10))
    if kind == "f64":
        return le_u64(int(op["bits"][2:], 16))
    if kind == "present":
        return enc_str("some" if op["value"] else "none")
    if kind == "instance":
        return enc_str("instance") + le_u64(int(op["value"], 10))
    raise AssertionError(f"unknown op {kind!r}")


def run_independent(ops: Sequence[dict[str, Any]]) -> list[str]:
    h = BASIS
    out: list[str] = []
    for op in ops:
        if op["op"] == "finish":
            out.append(f"0x{h:016x}")
        else:
            h = fold(h, encode_op(op))
    return out


def test_independent_implementation_is_sane() -> None:
    # Anchors for the implementation above, not taken from the vector files.
    assert run_independent([{"op": "finish"}]) == ["0xcbf29ce484222325"]
    assert fold(BASIS, b"a") == 0xAF63DC4C8601EC8C
    assert fold(BASIS, b"foobar") == 0x85944171F73967E8
    assert times_prime(MASK64) == (MASK64 * 0x100000001B3) % (1 << 64)


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((VECTORS_DIR / name).read_text(encoding="utf-8"))
    return doc


@pytest.fixture(scope="module")
def docs() -> dict[str, dict[str, Any]]:
    return {name: load(name) for name in FILES}


def all_vectors(docs: dict[str, dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, doc in docs.items():
        for vec in doc["vectors"]:
            yield name, vec


def by_id(docs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {vec["id"]: vec for _, vec in all_vectors(docs)}


# ---------------------------------------------------------------------------
# (a) the committed files are what the generator writes
# ---------------------------------------------------------------------------


def run_generator(*args: str) -> subprocess.CompletedProcess[str]:
    """The generator's command in this process: its ``main``, which ``python -m
    kvconform.harness.vectorgen`` runs, with what it prints and the status it ends with
    (a ``SystemExit`` as the interpreter would end it). ``test_generator_check_passes``
    runs the command as a process of its own."""
    from kvconform.harness import vectorgen

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = vectorgen.main(list(args))
        except SystemExit as exc:
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
                status = 1
            else:
                status = exc.code or 0
    return subprocess.CompletedProcess(["vectorgen", *args], status, out.getvalue(), err.getvalue())


def test_generator_check_passes() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kvconform.harness.vectorgen", "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert run_generator("--check").returncode == 0  # and in process, as the others run it


def copy_vectors(tmp_path: Path) -> Path:
    """A private copy of the vector files, so that tampering never touches the checkout."""
    folder = tmp_path / "vectors"
    folder.mkdir()
    for name in FILES:
        shutil.copy2(VECTORS_DIR / name, folder / name)
    return folder


def write_doc(path: Path, doc: dict[str, Any]) -> None:
    """Write a vector file the way the generator formats it."""
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def drift_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("drifted:")]


def test_generator_check_names_a_drifted_file(tmp_path: Path) -> None:
    folder = copy_vectors(tmp_path)
    where = ("--vectors", str(folder))
    no_tsv = str(tmp_path / "absent.tsv")

    # Without the published table the generator reads the rows back from the
    # committed file, and a clean copy still checks clean.
    clean = run_generator(*where, "--check", "--tsv", no_tsv)
    assert clean.returncode == 0, clean.stderr

    # An input edit (the program of encoding.str.ascii) leaves its expect stale.
    target = folder / "encoding.json"
    text = target.read_text(encoding="utf-8")
    assert '"value": "qwen3"' in text
    target.write_text(text.replace('"value": "qwen3"', '"value": "qwen4"', 1), encoding="utf-8")
    drifted = run_generator(*where, "--check", "--tsv", no_tsv)
    assert drifted.returncode == 1
    lines = drift_lines(drifted)
    assert len(lines) == 1, drifted.stderr
    assert "encoding.json: encoding.str.ascii: expect" in lines[0]
    assert "fnv1a64-fold.json" not in drifted.stderr


def test_generator_check_names_the_vector_whose_expect_drifted(tmp_path: Path) -> None:
    folder = copy_vectors(tmp_path)
    target = folder / "encoding.json"
    doc = json.loads(target.read_text(encoding="utf-8"))
    vec = next(v for v in doc["vectors"] if v["id"] == "encoding.f64.neg-zero")
    right = vec["expect"][0]
    vec["expect"] = ["0x0123456789abcdef"]
    write_doc(target, doc)

    drifted = run_generator("--vectors", str(folder), "--check")
    assert drifted.returncode == 1
    lines = drift_lines(drifted)
    assert len(lines) == 1, drifted.stderr
    assert "encoding.json: encoding.f64.neg-zero: expect" in lines[0]
    assert "0x0123456789abcdef" in lines[0] and right in lines[0]

    # Writing replaces the drifted value, and only that: the file is the committed one again.
    fixed = run_generator("--vectors", str(folder))
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.splitlines() == ["wrote vectors/encoding.json"]
    assert target.read_bytes() == (VECTORS_DIR / "encoding.json").read_bytes()


def test_generator_fills_in_the_expect_of_an_added_vector(tmp_path: Path) -> None:
    folder = copy_vectors(tmp_path)
    target = folder / "encoding.json"
    doc = json.loads(target.read_text(encoding="utf-8"))
    committed = json.loads(json.dumps(doc["vectors"]))
    no_expect: dict[str, Any] = {
        "id": "encoding.test.no-expect",
        "ops": [
            {"op": "str", "value": "kv"},
            {"value": "18446744073709551615", "op": "u64"},  # fields out of order
            {"op": "finish"},
        ],
        "catches": "nothing: an added vector with neither expect nor requires",
    }
    wrong_expect: dict[str, Any] = {
        "id": "encoding.test.wrong-expect",
        "ops": [
            {"op": "present", "value": True},
            {"op": "finish"},
            {"op": "instance", "value": "9"},
            {"op": "finish"},
        ],
        "expect": ["0x0000000000000000"],
        "requires": ["HASH-9", "HASH-11", "HASH-1", "HASH-2", "HASH-3", "HASH-4", "HASH-5"],
        "catches": "nothing: an added vector with a wrong expect",
        "note": "Added by a test.",
    }
    doc["vectors"] += [no_expect, wrong_expect]
    write_doc(target, doc)

    drifted = run_generator("--vectors", str(folder), "--check")
    assert drifted.returncode == 1
    lines = drift_lines(drifted)
    assert any("encoding.test.no-expect: expect missing" in line for line in lines), lines
    assert any("encoding.test.wrong-expect: expect" in line for line in lines), lines
    assert all("encoding.test." in line for line in lines), lines

    written = run_generator("--vectors", str(folder))
    assert written.returncode == 0, written.stderr
    new = json.loads(target.read_text(encoding="utf-8"))
    assert new["vectors"][: len(committed)] == committed  # the other vectors are untouched
    got = {v["id"]: v for v in new["vectors"][len(committed) :]}
    assert list(got) == ["encoding.test.no-expect", "encoding.test.wrong-expect"]
    for vid, vec in got.items():
        assert vec["expect"] == run_independent(vec["ops"]), vid
    # Missing inputs are filled in; present ones are kept (in canonical order).
    filled = got["encoding.test.no-expect"]
    assert list(filled) == ["id", "ops", "expect", "requires", "catches"]
    assert filled["ops"][1] == {"op": "u64", "value": "18446744073709551615"}
    assert filled["requires"] == [f"HASH-{n}" for n in (1, 2, 3, 4, 5, 11, 12)]
    kept = got["encoding.test.wrong-expect"]
    assert list(kept) == ["id", "ops", "expect", "requires", "catches", "note"]
    assert kept["requires"] == [f"HASH-{n}" for n in (1, 2, 3, 4, 5, 9, 11)]
    assert kept["note"] == "Added by a test."
    assert len(kept["expect"]) == 2
    assert run_generator("--vectors", str(folder), "--check").returncode == 0


def test_a_missing_encoding_file_is_reported_not_regenerated(tmp_path: Path) -> None:
    folder = copy_vectors(tmp_path)
    (folder / "encoding.json").unlink()
    check = run_generator("--vectors", str(folder), "--check")
    assert check.returncode == 1
    assert "vectors/encoding.json: missing" in check.stderr
    write = run_generator("--vectors", str(folder))
    assert write.returncode == 1
    assert "encoding.json: missing" in write.stderr
    assert not (folder / "encoding.json").exists()


def test_a_malformed_input_is_refused_naming_the_vector(tmp_path: Path) -> None:
    folder = copy_vectors(tmp_path)
    target = folder / "encoding.json"
    doc = json.loads(target.read_text(encoding="utf-8"))
    vec = next(v for v in doc["vectors"] if v["id"] == "encoding.u64.zero")
    vec["ops"][0]["op"] = "u32"
    write_doc(target, doc)
    before = target.read_bytes()
    for mode in (("--check",), ()):
        result = run_generator("--vectors", str(folder), *mode)
        assert result.returncode == 2, result.stderr
        assert "encoding.json: encoding.u64.zero: unknown op 'u32'" in result.stderr
    assert target.read_bytes() == before


# ---------------------------------------------------------------------------
# (b) the published vectors
# ---------------------------------------------------------------------------


def test_all_published_vectors_are_present(docs: dict[str, dict[str, Any]]) -> None:
    doc = docs["fnv1a64-published.json"]
    assert "test_fnv.c" in doc["source"]
    assert "fnv1a_64_vector" in doc["source"]
    assert "Noll" in doc["source"]
    vectors = doc["vectors"]
    assert [v["id"] for v in vectors] == [f"fnv1a64.published.{n:03d}" for n in range(1, 125)]
    for vec in vectors:
        assert vec["source_form"]
        assert [op["op"] for op in vec["ops"]] == ["bytes", "finish"]
        assert len(vec["expect"]) == 1


def read_published_tsv(path: Path) -> list[tuple[bytes, str, str]]:
    rows: list[tuple[bytes, str, str]] = []
    for line in path.read_text(encoding="ascii").splitlines():
        if line and not line.startswith("#"):
            hex_in, result, form = line.split("\t")
            rows.append((bytes.fromhex(hex_in), result, form))
    return rows


def test_published_vectors_equal_the_published_table(docs: dict[str, dict[str, Any]]) -> None:
    if not PUBLISHED_TSV.is_file():
        pytest.skip(f"published table not reachable beside the checkout: {PUBLISHED_TSV}")
    rows = read_published_tsv(PUBLISHED_TSV)
    vectors = docs["fnv1a64-published.json"]["vectors"]
    assert len(rows) == 124
    assert len(vectors) == len(rows)
    for (data, result, form), vec in zip(rows, vectors, strict=True):
        assert op_bytes_payload(vec["ops"][0]) == data, vec["id"]
        assert vec["expect"] == [result], vec["id"]
        assert vec["source_form"] == form, vec["id"]


# ---------------------------------------------------------------------------
# (c) every vector, recomputed independently
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", FILES)
def test_every_vector_recomputes_independently(name: str, docs: dict[str, dict[str, Any]]) -> None:
    failures = [
        f"{vec['id']}: file says {vec['expect']}, recomputed {got}"
        for vec in docs[name]["vectors"]
        if (got := run_independent(vec["ops"])) != vec["expect"]
    ]
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------------------
# File and vector structure
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", FILES)
def test_file_structure(name: str, docs: dict[str, dict[str, Any]]) -> None:
    doc = docs[name]
    assert set(doc) == {"format", "file", "description", "source", "requires", "vectors"}
    assert doc["format"] == "kvconform-vectors/1"
    assert doc["file"] == name
    assert doc["description"] and doc["source"]
    union = {r for vec in doc["vectors"] for r in vec["requires"]}
    assert set(doc["requires"]) == union
    assert (VECTORS_DIR / name).read_text(encoding="utf-8").endswith("}\n")


@pytest.mark.parametrize("name", FILES)
def test_every_vector_is_well_formed(name: str, docs: dict[str, dict[str, Any]]) -> None:
    allowed = {"id", "ops", "expect", "requires", "catches", "note", "source_form"}
    for vec in docs[name]["vectors"]:
        vid = vec["id"]
        assert set(vec) <= allowed, vid
        assert ID_PATTERN.fullmatch(vid) and vid.startswith(ID_PREFIX[name]), vid
        assert vec["requires"], vid
        assert all(REQUIREMENT.fullmatch(r) for r in vec["requires"]), vid
        assert isinstance(vec["catches"], str) and vec["catches"].strip(), vid
        assert vec["ops"] and vec["ops"][-1] == {"op": "finish"}, vid
        finishes = sum(1 for op in vec["ops"] if op["op"] == "finish")
        assert len(vec["expect"]) == finishes, vid
        assert all(HEX64.fullmatch(x) for x in vec["expect"]), vid
        for op in vec["ops"]:
            kind = op["op"]
            if kind == "bytes":
                assert re.fullmatch(r"([0-9a-f]{2})*", op["hex"]), vid
                assert op.get("repeat", 1) >= 1 and isinstance(op.get("repeat", 1), int), vid
            elif kind in ("u64", "instance"):
                assert re.fullmatch(r"[0-9]+", op["value"]) and int(op["value"]) <= MASK64, vid
            elif kind == "f64":
                assert HEX64.fullmatch(op["bits"]), vid
            elif kind == "present":
                assert isinstance(op["value"], bool), vid
            elif kind == "str":
                assert isinstance(op["value"], str), vid
            else:
                assert kind == "finish", vid


def test_ids_are_unique_across_files(docs: dict[str, dict[str, Any]]) -> None:
    ids = [vec["id"] for _, vec in all_vectors(docs)]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates


def test_fold_file_coverage(docs: dict[str, dict[str, Any]]) -> None:
    ids = {vec["id"] for vec in docs["fnv1a64-fold.json"]["vectors"]}
    assert {f"fnv1a64.fold.byte.{b:02x}" for b in range(256)} <= ids
    lengths = [
        len(op_bytes_payload(vec["ops"][0]))
        for vec in docs["fnv1a64-fold.json"]["vectors"]
        if vec["id"].startswith("fnv1a64.fold.long.")
    ]
    assert any(n >= 1 << 20 for n in lengths)
    widths = set()
    for vec in docs["fnv1a64-fold.json"]["vectors"]:
        if vec["id"].startswith("fnv1a64.fold.utf8."):
            text = op_bytes_payload(vec["ops"][0]).decode("utf-8")
            widths |= {len(ch.encode("utf-8")) for ch in text}
    assert {2, 3, 4} <= widths


def test_encoding_file_covers_every_op_kind(docs: dict[str, dict[str, Any]]) -> None:
    kinds = {op["op"] for vec in docs["encoding.json"]["vectors"] for op in vec["ops"]}
    assert kinds == {"bytes", "str", "u64", "f64", "present", "instance", "finish"}
    requires = set(docs["encoding.json"]["requires"])
    assert {f"HASH-{n}" for n in (*range(1, 10), *range(11, 15))} == requires  # HASH-10 withdrawn


# ---------------------------------------------------------------------------
# (d) hand-checked facts
# ---------------------------------------------------------------------------


def test_fnv1_order_gives_a_different_value_for_a(docs: dict[str, dict[str, Any]]) -> None:
    vec = by_id(docs)["fnv1a64.published.002"]
    assert vec["source_form"] == '"a"'
    assert vec["expect"] == ["0xaf63dc4c8601ec8c"]
    assert f"0x{fold_fnv1(BASIS, b'a'):016x}" != vec["expect"][0]


def test_fnv1_order_differs_on_every_nonzero_single_byte(
    docs: dict[str, dict[str, Any]],
) -> None:
    vectors = by_id(docs)
    for b in range(1, 256):
        vec = vectors[f"fnv1a64.fold.byte.{b:02x}"]
        assert f"0x{fold_fnv1(BASIS, bytes([b])):016x}" != vec["expect"][0], vec["id"]
    # xor with zero is the identity, so on 0x00 the two orders agree.
    zero = vectors["fnv1a64.fold.byte.00"]
    assert f"0x{fold_fnv1(BASIS, bytes(1)):016x}" == zero["expect"][0]
    assert "FNV-1 order" not in zero["catches"]


@pytest.mark.parametrize("name", ["fnv1a64-published.json", "fnv1a64-fold.json"])
def test_raw_fold_catches_claims_hold(name: str, docs: dict[str, dict[str, Any]]) -> None:
    """A raw-fold vector claiming to catch FNV-1 order does separate the two orders."""
    for vec in docs[name]["vectors"]:
        if "FNV-1 order" in vec["catches"]:
            data = op_bytes_payload(vec["ops"][0])
            assert f"0x{fold_fnv1(BASIS, data):016x}" != vec["expect"][0], vec["id"]


def test_length_delimiter_separates_adjacent_strings(docs: dict[str, dict[str, Any]]) -> None:
    vectors = by_id(docs)
    ab_c = vectors["encoding.str.ab-then-c"]
    a_bc = vectors["encoding.str.a-then-bc"]
    assert ab_c["expect"] != a_bc["expect"]
    # Without the delimiter the two programs fold the same bytes.
    assert fold(BASIS, b"ab" + b"c") == fold(BASIS, b"a" + b"bc")


@pytest.mark.parametrize(
    ("vid", "parts"),
    [("encoding.str.ab-then-c", ("ab", "c")), ("encoding.str.a-then-bc", ("a", "bc"))],
)
def test_big_endian_length_is_caught(
    vid: str, parts: tuple[str, str], docs: dict[str, dict[str, Any]]
) -> None:
    expect = by_id(docs)[vid]["expect"][0]
    little = fold(BASIS, b"".join(enc_str(p) for p in parts))
    big = fold(BASIS, b"".join(enc_str(p, ">Q") for p in parts))
    assert f"0x{little:016x}" == expect
    assert f"0x{big:016x}" != expect
    # ... and so are a 32-bit length and a length placed before the bytes.
    short = fold(BASIS, b"".join(enc_str(p, "<I") for p in parts))
    assert f"0x{short:016x}" != expect
    before = fold(BASIS, b"".join(le_u64(len(p)) + p.encode() for p in parts))
    assert f"0x{before:016x}" != expect


@pytest.mark.parametrize(
    "vid", ["encoding.str.e-acute", "encoding.str.g-clef", "encoding.str.mixed"]
)
def test_length_counts_utf8_bytes(vid: str, docs: dict[str, dict[str, Any]]) -> None:
    vec = by_id(docs)[vid]
    text = vec["ops"][0]["value"]
    raw = text.encode("utf-8")
    assert len(raw) != len(text)
    wrong_lengths = {len(text), len(text.encode("utf-16-le")) // 2} - {len(raw)}
    for wrong in wrong_lengths:
        assert f"0x{fold(BASIS, raw + le_u64(wrong)):016x}" != vec["expect"][0]


def test_float_edges(docs: dict[str, dict[str, Any]]) -> None:
    vectors = by_id(docs)
    assert vectors["encoding.f64.pos-zero"]["expect"] != vectors["encoding.f64.neg-zero"]["expect"]
    nans = [
        vectors[f"encoding.f64.{n}"]["expect"][0]
        for n in ("nan-quiet", "nan-negative", "nan-payload", "nan-signalling")
    ]
    assert len(set(nans)) == len(nans)
    assert vectors["encoding.f64.1e-6"]["ops"][0]["bits"] == "0x3eb0c6f7a0b5ed8d"
    assert vectors["encoding.f64.1e-5"]["ops"][0]["bits"] == "0x3ee4f8b588e368f1"
    # No type tag: a u64 and an f64 with the same bit pattern encode identically.
    assert (
        vectors["encoding.untagged.u64-with-f64-bits"]["expect"]
        == vectors["encoding.untagged.f64-one"]["expect"]
    )
    assert vectors["encoding.untagged.f64-one"]["ops"][0]["bits"] == "0x3ff0000000000000"
    # Eight zero bytes, however they are named.
    zeros = {
        vectors[f"encoding.{n}"]["expect"][0] for n in ("str.empty", "u64.zero", "f64.pos-zero")
    }
    assert zeros == {f"0x{fold(BASIS, bytes(8)):016x}"}


def test_presence_and_instance(docs: dict[str, dict[str, Any]]) -> None:
    vectors = by_id(docs)
    absent = vectors["encoding.present.false"]["expect"][0]
    assert absent != vectors["encoding.present.true"]["expect"][0]
    assert absent != "0xcbf29ce484222325"  # absent is never "mix nothing"
    assert vectors["encoding.present.false-then-str"]["expect"][0] != (
        f"0x{fold(BASIS, enc_str('x')):016x}"
    )
    one = vectors["encoding.instance.1"]["expect"][0]
    assert one != f"0x{fold(BASIS, le_u64(1)):016x}"  # the marker is mixed


def test_finish_does_not_reset(docs: dict[str, dict[str, Any]]) -> None:
    vectors = by_id(docs)
    mid = vectors["encoding.finish.mid-sequence"]["expect"]
    assert mid[0] == f"0x{fold(BASIS, enc_str('qwen3')):016x}"
    assert mid[1] == vectors["encoding.finish.mid-sequence-reference"]["expect"][0]
    twice = vectors["encoding.finish.twice"]["expect"]
    assert len(twice) == 2 and twice[0] == twice[1]


def test_model_key_discriminants(docs: dict[str, dict[str, Any]]) -> None:
    vectors = by_id(docs)
    keys = [
        vectors[f"encoding.model-key.{n}"]["expect"][0]
        for n in ("qwen3", "llama", "qwen3-new-alloc")
    ]
    assert len(set(keys)) == 3


# ---------------------------------------------------------------------------
# Each "catches" claim that can be stated as code is checked against a mutant
# encoder that makes exactly that misreading.
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Misreading:
    """An encoder, correct by default; each field set makes one misreading."""

    fnv1_order: bool = False
    int_format: str = "<Q"  # u64 values, f64 bits and instance ids
    int_mask: int = MASK64
    length_format: str = "<Q"
    length_unit: str = "utf8"  # "utf8" | "codepoints" | "utf16"
    length_first: bool = False
    no_length: bool = False
    nul_terminator: bool = False
    c_strings: bool = False  # input stops at the first NUL
    signed_bytes: bool = False
    normalize_zero: bool = False
    canonical_nan: bool = False
    presence: str = "string"  # "string" | "byte" | "absent-is-nothing"
    instance_marker: bool = True
    finish_resets: bool = False
    type_tag: bool = False


def mutant_str(text: str, m: Misreading) -> bytes:
    if m.c_strings:
        text = text.split("\0", 1)[0]
    raw = text.encode("utf-8")
    if m.nul_terminator:
        raw += b"\0"
    if m.no_length:
        return raw
    count = {
        "utf8": len(raw),
        "codepoints": len(text),
        "utf16": len(text.encode("utf-16-le")) // 2,
    }[m.length_unit]
    length = struct.pack(m.length_format, count)
    return length + raw if m.length_first else raw + length


def mutant_int(value: int, m: Misreading) -> bytes:
    return struct.pack(m.int_format, value & m.int_mask)


def mutant_encode(op: dict[str, Any], m: Misreading) -> bytes:
    kind = op["op"]
    tag = bytes([sorted(("bytes", "str", "u64", "f64", "present", "instance")).index(kind)])
    out: bytes
    if kind == "bytes":
        out = op_bytes_payload(op)
        if m.c_strings:
            out = out.split(b"\0", 1)[0]
    elif kind == "str":
        out = mutant_str(op["value"], m)
    elif kind == "u64":
        out = mutant_int(int(op["value"]), m)
    elif kind == "f64":
        bits = int(op["bits"], 16)
        if m.normalize_zero and bits == 1 << 63:
            bits = 0
        is_nan = (bits >> 52) & 0x7FF == 0x7FF and bits & ((1 << 52) - 1)
        if m.canonical_nan and is_nan:
            bits = 0x7FF8000000000000
        out = mutant_int(bits, m)
    elif kind == "present":
        if m.presence == "byte":
            out = bytes([int(op["value"])])
        elif m.presence == "absent-is-nothing" and not op["value"]:
            out = b""
        else:
            out = mutant_str("some" if op["value"] else "none", m)
    elif kind == "instance":
        marker = mutant_str("instance", m) if m.instance_marker else b""
        out = marker + mutant_int(int(op["value"]), m)
    else:
        raise AssertionError(kind)
    return tag + out if m.type_tag else out


def run_mutant(ops: Sequence[dict[str, Any]], m: Misreading) -> list[str]:
    h = BASIS
    out: list[str] = []
    for op in ops:
        if op["op"] == "finish":
            out.append(f"0x{h:016x}")
            if m.finish_resets:
                h = BASIS
            continue
        for byte in mutant_encode(op, m):
            if m.signed_bytes and byte >= 0x80:
                byte |= MASK64 ^ 0xFF
            h = times_prime(h) ^ byte if m.fnv1_order else times_prime(h ^ byte)
    return out


#: A phrase a vector's "catches" may contain, and the misreading it claims.
CLAIMS: dict[str, Misreading] = {
    "FNV-1 order": Misreading(fnv1_order=True),
    "big-endian": Misreading(int_format=">Q", length_format=">Q"),
    "integers truncated to 32 bits": Misreading(int_mask=0xFFFF_FFFF),
    "a 32-bit id": Misreading(int_format="<I", int_mask=0xFFFF_FFFF),
    "a 32-bit length": Misreading(length_format="<I"),
    "length mixed before the bytes": Misreading(length_first=True),
    "length counted in characters": Misreading(length_unit="codepoints"),
    "code points (": Misreading(length_unit="codepoints"),
    "UTF-16 units (": Misreading(length_unit="utf16"),
    "or UTF-16 units instead": Misreading(length_unit="utf16"),
    "without a length delimiter": Misreading(no_length=True),
    "the empty string mixing nothing": Misreading(no_length=True),
    "a NUL terminator appended": Misreading(nul_terminator=True),
    "NUL-terminated": Misreading(c_strings=True),
    "C string": Misreading(c_strings=True),
    "NUL byte skipped": Misreading(c_strings=True),
    "NUL bytes skipped": Misreading(c_strings=True),
    "signed char": Misreading(signed_bytes=True),
    "-0.0 normalized": Misreading(normalize_zero=True),
    "NaN canonicalized": Misreading(canonical_nan=True),
    "presence mixed as a byte": Misreading(presence="byte"),
    "absent mixed as nothing": Misreading(presence="absent-is-nothing"),
    'without its "instance" marker': Misreading(instance_marker=False),
    "finish resetting the state": Misreading(finish_resets=True),
    "a type tag": Misreading(type_tag=True),
}


@pytest.mark.parametrize("name", FILES)
def test_mutant_machinery_is_correct_by_default(name: str, docs: dict[str, dict[str, Any]]) -> None:
    for vec in docs[name]["vectors"]:
        if sum(len(op.get("hex", "")) * op.get("repeat", 1) for op in vec["ops"]) < 4096:
            assert run_mutant(vec["ops"], Misreading()) == vec["expect"], vec["id"]


@pytest.mark.parametrize("name", FILES)
def test_catches_claims_hold(name: str, docs: dict[str, dict[str, Any]]) -> None:
    """A vector that claims to catch a misreading gives a different answer under it."""
    failures: list[str] = []
    for vec in docs[name]["vectors"]:
        for phrase, misreading in CLAIMS.items():
            if phrase in vec["catches"] and run_mutant(vec["ops"], misreading) == vec["expect"]:
                failures.append(f"{vec['id']}: does not catch {phrase!r}")
    assert not failures, "\n".join(failures)


def test_every_mechanized_claim_is_made_somewhere(docs: dict[str, dict[str, Any]]) -> None:
    catches = [vec["catches"] for _, vec in all_vectors(docs)]
    unclaimed = [p for p in CLAIMS if not any(p in c for c in catches)]
    assert not unclaimed


def test_misreadings_are_caught_by_the_encoding_file(docs: dict[str, dict[str, Any]]) -> None:
    """Every mechanized misreading fails at least one vector of encoding.json."""
    vectors = docs["encoding.json"]["vectors"]
    for phrase, misreading in CLAIMS.items():
        assert any(run_mutant(v["ops"], misreading) != v["expect"] for v in vectors), phrase
