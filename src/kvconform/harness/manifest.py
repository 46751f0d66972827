"""Suite integrity: the version and a manifest of every file that decides a verdict.

    python -m kvconform.harness.manifest          # rewrite conformance/manifest.json
    python -m kvconform.harness.manifest --check  # exit 1 if it is stale

The manifest lists each scenario, vector, schema and spec file with its
SHA-256; the suite digest is the SHA-256 of those lines. A run refuses to
start when files are missing, added or altered (unless told
``--allow-modified``), and every report carries the version and the digest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import kvconform
from kvconform import limits
from kvconform.harness import paths

MANIFEST_FORMAT = "kvconform-manifest/1"


def manifest_path() -> Path:
    return paths.conformance_dir() / "manifest.json"


def _tracked_files() -> dict[str, Path]:
    """Every file whose content can change a verdict, by a stable relative name."""
    groups = {
        "scenarios": (paths.scenarios_dir(), "**/*.yaml"),
        "vectors": (paths.vectors_dir(), "*.json"),
        "schema": (paths.conformance_dir() / "schema", "**/*.json"),
        "spec": (paths.spec_dir(), "*.md"),
    }
    files: dict[str, Path] = {}
    for name, (root, pattern) in groups.items():
        for path in sorted(root.glob(pattern)):
            files[f"{name}/{path.relative_to(root).as_posix()}"] = path
    return files


#: How much of a file is hashed at a time (memory stays at this, whatever the size).
_CHUNK = 1 << 20


def _sha256(path: Path) -> str:
    """The file's SHA-256; a folder, FIFO or device in its place is never opened, and a
    file larger than :data:`~kvconform.limits.MAX_FILE_BYTES` (which no load would read)
    is not read at all: it is "altered" by a word that no SHA-256 can be."""
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    too_large = f"larger than {limits.MAX_FILE_BYTES} bytes"
    if st.st_size > limits.MAX_FILE_BYTES:
        return too_large
    digest = hashlib.sha256()
    read = 0
    with path.open("rb") as stream:  # in chunks, and no further than the limit: it may grow
        while chunk := stream.read(_CHUNK):
            read += len(chunk)
            if read > limits.MAX_FILE_BYTES:
                return too_large
            digest.update(chunk)
    return digest.hexdigest()


def file_hashes() -> dict[str, str]:
    """The SHA-256 of every tracked file as it is on disk now, by its manifest name."""
    return {name: _sha256(path) for name, path in _tracked_files().items()}


def digest_of(entries: dict[str, str]) -> str:
    lines = "".join(f"{name} {sha}\n" for name, sha in sorted(entries.items()))
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def compute() -> dict[str, object]:
    files = file_hashes()
    return {
        "format": MANIFEST_FORMAT,
        "suite_version": kvconform.SUITE_VERSION,
        "count": len(files),
        "digest": digest_of(files),
        "files": files,
    }


@dataclass(frozen=True)
class Integrity:
    """How the installed files compare with the manifest."""

    version: str
    digest: str
    missing: tuple[str, ...] = ()
    altered: tuple[str, ...] = ()
    added: tuple[str, ...] = ()

    @property
    def intact(self) -> bool:
        return not (self.missing or self.altered or self.added)

    def problems(self) -> str:
        parts = []
        for label, names in (
            ("missing", self.missing),
            ("altered", self.altered),
            ("not in the manifest", self.added),
        ):
            if names:
                shown = ", ".join(names[:5]) + (
                    f" and {len(names) - 5} more" if len(names) > 5 else ""
                )
                parts.append(f"{label}: {shown}")
        return "; ".join(parts)


def check() -> Integrity:
    """Compare the files on disk with the shipped manifest."""
    path = manifest_path()
    try:
        if path.stat().st_size > limits.MAX_FILE_BYTES:
            raise ValueError(f"larger than {limits.MAX_FILE_BYTES} bytes")
        recorded = json.loads(path.read_text(encoding="utf-8"))
        files: dict[str, str] = recorded["files"]
    except (OSError, ValueError, KeyError) as exc:
        return Integrity(kvconform.SUITE_VERSION, "", missing=(f"{path.name} ({exc})",))
    actual = file_hashes()
    return Integrity(
        version=recorded.get("suite_version", "?"),
        digest=digest_of(actual),
        missing=tuple(sorted(set(files) - set(actual))),
        altered=tuple(sorted(n for n in files if n in actual and actual[n] != files[n])),
        added=tuple(sorted(set(actual) - set(files))),
    )


def render() -> str:
    return json.dumps(compute(), indent=2, sort_keys=True) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvconform.harness.manifest")
    parser.add_argument("--check", action="store_true", help="exit 1 if the manifest is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = manifest_path().read_text(encoding="utf-8") if manifest_path().exists() else ""
        if current != text:
            print(
                f"{manifest_path()} is stale: run python -m kvconform.harness.manifest",
                file=sys.stderr,
            )
            return 1
        return 0
    manifest_path().write_text(text, encoding="utf-8")
    print(f"wrote {manifest_path()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
