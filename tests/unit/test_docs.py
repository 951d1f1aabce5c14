"""The README stays short and names only files and commands that exist; no doc points outside."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from faultline.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PATHLIKE = re.compile(r"^(?:\.?/)?[\w.-]+(?:/[\w.*-]+)*/?$")
#: files that exist in a landing folder or a built warehouse, not in the repository
GENERATED = {"faultline.duckdb", "inventory.csv", "sacct.txt", "report.html", "report.md"}


def _named_paths(text: str) -> set[str]:
    links = re.findall(r"\]\(([^)#\s]+)\)", text)
    ticks = [t for t in re.findall(r"`([^`\s]+)`", text) if "/" in t or re.search(r"\.(md|py|yaml|sql|toml)$", t)]
    return {p for p in links + ticks if PATHLIKE.match(p) and not p.startswith(("http", "s3:"))}


def test_readme_is_short():
    assert len(README.splitlines()) <= 250


def test_every_path_the_readme_names_exists():
    missing = []
    for p in sorted(_named_paths(README)):
        if Path(p).name in GENERATED or "*" in p or "<" in p or p.startswith(("demo/", "landing/")):
            continue  # written by `faultline demo` or found in a landing folder
        if not (ROOT / p).exists():
            missing.append(p)
    assert missing == []


def test_every_command_the_readme_names_exists():
    named = set(re.findall(r"`faultline ([a-z][a-z-]+)", README))
    assert named and named <= set(main.commands), named - set(main.commands)


def test_no_tracked_file_points_outside_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    hits = []
    for f in files:
        p = ROOT / f
        if p.suffix in {".md", ".py", ".yaml", ".toml", ".sql", ".j2", ".txt", ".sh"} and p.is_file():
            if "../shared" in p.read_text(errors="replace") and f != "tests/unit/test_docs.py":
                hits.append(f)
    assert hits == []
