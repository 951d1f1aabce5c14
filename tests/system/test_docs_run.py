"""Docs that run: every command example in README.md, docs/*.md and sql/README.md runs against
the warehouse `faultline demo` builds, from a folder laid out as after the demo (./demo,
./warehouse, the repository's sql/ and .venv/), and says something (a query that returns no
row on the demo is a stale example). Shown output (a ``$ command`` block) must match. A command
that cannot run here (a server, a cluster, a bucket, a rewrite of the shipped model) is listed
in NOT_HERE with the reason and where it is tested; the list must name only commands the docs
still show."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers.demo import demo_warehouse

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "sql" / "README.md"]
RUNS = re.compile(
    r"^(?:\.venv/bin/)?(?:faultline|duckdb)\b|^\{ echo .*\| (?:\.venv/bin/)?duckdb\b|^gzip -c .*\| (?:\.venv/bin/)?faultline\b"
)
NOT_HERE = {
    "python3 -m venv .venv": "the install itself (CI installs from scratch: .ci/run)",
    ".venv/bin/python -m pytest": "the test suite",
    "export ": "sets the environment for the commands after it",
    'mkdir -p "$DAGSTER_HOME"': "sets up a deployment's instance (tests/system/test_deploy.py runs docs/deployment.md)",
    "cp deploy/dagster-postgres.yaml": "sets up a deployment's instance (tests/system/test_deploy.py runs docs/deployment.md)",
    "faultline run --date": "a deployment's nightly run (tests/system/test_deploy.py runs docs/deployment.md)",
    "faultline serve": "starts a deployment's three long-running processes (tests/system/test_deploy.py serves and stops one)",
    "faultline run --landing s3://": "needs a bucket (tests/system/test_object_storage.py runs it against moto)",
    "faultline sql --warehouse s3://": "needs a bucket (tests/system/test_object_storage.py)",
    "faultline train-classifier": "rewrites or retrains the shipped model (tests/unit/test_model.py trains one)",
    "faultline simulate --out sim/landing --scenario lottery": "the 512-node month: minutes (docs/evaluation.md)",
    "faultline run --landing sim/landing": "ingests that month",
    "faultline evaluate --truth sim/landing/_truth": "scores that month (the demo's own evaluate runs below)",
    "faultline known check": "shows the error a malformed file gives (tests/pipeline/test_known_warehouse.py)",
}


@dataclass
class Example:
    doc: str
    line: int
    command: str
    shown: list[str] = field(default_factory=list)  # output lines a `$ command` block shows
    typed: list[str] = field(default_factory=list)  # lines typed at the DuckDB shell's `D ` prompt

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def _strip_comment(line: str) -> str:
    """The command without a trailing `# comment` (a # outside quotes after a space)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def examples() -> list[Example]:
    out: list[Example] = []
    for doc in DOCS:
        lines = doc.read_text(encoding="utf-8").splitlines()
        name = doc.relative_to(ROOT).as_posix()
        i = 0
        while i < len(lines):
            fence = re.match(r"^```(\w*)\s*$", lines[i])
            if not fence:
                i += 1
                continue
            lang, start, body = fence.group(1), i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            i += 1
            if lang in ("bash", "sh", "shell"):
                pending = ""
                for k, raw in enumerate(body):
                    text = (pending + raw.strip()) if pending else _strip_comment(raw.strip())
                    if text.endswith("\\"):
                        pending = text[:-1] + " "
                        continue
                    pending = ""
                    if text and not text.startswith("#"):
                        out.append(Example(name, start + k + 1, _strip_comment(text)))
            elif lang in ("text", "console", ""):
                for k, raw in enumerate(body):
                    if raw.startswith("$ "):
                        ex = Example(name, start + k + 1, _strip_comment(raw[2:].strip()))
                        for more in body[k + 1 :]:
                            if more.startswith("$ ") or not more.strip():
                                break
                            (ex.typed if more.startswith("D ") else ex.shown).append(more.removeprefix("D "))
                        out.append(ex)
    return out


EXAMPLES = examples()
TO_RUN = [e for e in EXAMPLES if RUNS.match(e.command) and not any(e.command.startswith(k) for k in NOT_HERE)]


def test_every_example_runs_here_or_says_why_not():
    unexplained = [
        e.id + ": " + e.command
        for e in EXAMPLES
        if e not in TO_RUN and not any(e.command.startswith(k) for k in NOT_HERE)
    ]
    assert not unexplained, "examples neither run nor explained in NOT_HERE:\n" + "\n".join(unexplained)
    stale = [k for k in NOT_HERE if not any(e.command.startswith(k) for e in EXAMPLES)]
    assert not stale, f"NOT_HERE names commands the docs no longer show: {stale}"
    assert len(TO_RUN) >= 20


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A folder as after `faultline demo`, with the repository's sql/ and .venv/ beside it."""
    base, wh, _, _ = demo_warehouse(tmp_path_factory.getbasetemp() / "faultline-cli-demo")
    here = tmp_path_factory.mktemp("docs-run")
    for name, target in (("warehouse", wh), ("demo", base / "demo"), ("sql", ROOT / "sql"), (".venv", ROOT / ".venv")):
        (here / name).symlink_to(target, target_is_directory=True)
    return here


def _check_shown(ex: Example, output: str) -> None:
    """Each shown line, cut where it says `...`, is the start of an output line."""
    got = output.splitlines()
    for line in ex.shown:
        head = line.split("...")[0].rstrip(", ")
        assert any(g.startswith(head) for g in got), f"{ex.id}: shown {head!r} is not in the output:\n{output[:2000]}"


@pytest.mark.parametrize("ex", TO_RUN, ids=[e.id for e in TO_RUN])
def test_example_runs_on_the_demo_warehouse(ex, folder):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAULTLINE_")}
    env["PATH"] = f"{folder / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "200"
    res = subprocess.run(
        ["bash", "-c", ex.command],
        cwd=folder,
        env=env,
        input="\n".join(ex.typed) + "\n" if ex.typed else "",
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = res.stdout + res.stderr
    assert res.returncode == 0, f"{ex.id}: `{ex.command}` exited {res.returncode}:\n{output[-3000:]}"
    assert "(0 row(s))" not in res.stdout and "Traceback (most recent" not in res.stderr, f"{ex.id}:\n{output[-3000:]}"
    if ex.typed or "| duckdb" in ex.command or "| .venv/bin/duckdb" in ex.command:
        assert res.stdout.count("\n") >= 5 and not res.stderr.strip(), f"{ex.id}: `{ex.command}`:\n{output[-3000:]}"
    if " explain job " in f" {ex.command} ":
        assert "Verdict:" in output and "not a failure" not in output, output
    _check_shown(ex, output)
