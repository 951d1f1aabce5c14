"""The real-line corpus (``models/corpus/``): verbatim public lines with provenance and labels.

A fifth of the *origins* (an issue thread, or a repository for its files) is reserved for
scoring only; which one is decided by a hash of the origin, so no one picks it."""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources
from pathlib import Path

SPLITS = ("dev", "reserved")
_REPO_FILE = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+):\S+@[0-9a-f]{40}$")
_GITHUB = re.compile(r"^https://github\.com/(?P<repo>[\w.-]+/[\w.-]+)/(?:issues|pull|discussions)/\d+")


def origin(source: str) -> str:
    """What a source is independent of: its issue/PR thread, or the repository of a file."""
    m = _REPO_FILE.match(source)
    if m:
        return "github.com/" + m.group("repo").lower()
    m = _GITHUB.match(source)
    if m:
        return m.group(0).lower().removeprefix("https://")
    return source.lower().split("#")[0]


def split_of(source: str) -> str:
    """``reserved`` for about one origin in five, ``dev`` for the rest."""
    h = int(hashlib.sha256(("faultline-corpus:" + origin(source)).encode()).hexdigest()[:8], 16)
    return "reserved" if h % 5 == 0 else "dev"


def reserved_by_rank(sources: list[str], salt: str = "faultline-jobs:") -> set[str]:
    """For a small set (the job-output cases): the fifth of origins with the smallest hash,
    so the reserved share is a fifth however the hashes fall."""
    origins = sorted({origin(s) for s in sources}, key=lambda o: hashlib.sha256((salt + o).encode()).hexdigest())
    return set(origins[: -(-len(origins) // 5)])


def corpus_dir() -> Path:
    return Path(str(resources.files("faultline.models").joinpath("corpus")))


def load(split: str = "dev", folder: str | Path | None = None) -> list[dict]:
    """The corpus lines of one split, in file order (excerpts keep their lines together)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}")
    path = Path(folder or corpus_dir()) / f"{split}.jsonl"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
