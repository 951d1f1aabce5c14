"""bench/eval_unseen.py: it scores exactly the dev lines whose sources the older corpus file lacks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import eval_unseen  # noqa: E402

from faultline.classify import corpus  # noqa: E402

SOURCE = "https://github.com/ssrg-vt/popcorn-kernel/issues/85"


def _write(path: Path, recs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    return path


def test_scores_only_the_sources_the_old_file_lacks(tmp_path, capsys):
    dev = corpus.load("dev")
    new_lines = [r for r in dev if r["source"] == SOURCE]
    old = _write(tmp_path / "old.jsonl", [r for r in dev[:200] if r["source"] != SOURCE])
    new = _write(tmp_path / "new.jsonl", dev[:200] + new_lines)
    assert eval_unseen.main(["--old", str(old), "--new", str(new)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["eval_unseen rules", "eval_unseen +model"]
    assert all(f"lines={len(new_lines)} " in line and " sources=1 " in line for line in out)


def test_nothing_new_is_exit_2_with_one_line(tmp_path, capsys):
    old = _write(tmp_path / "old.jsonl", corpus.load("dev")[:50])
    assert eval_unseen.main(["--old", str(old), "--new", str(old)]) == 2
    assert "has no source" in capsys.readouterr().err
