"""Shared fixtures: a small landing folder written by hand with real-format lines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# run partitions in-process unless a test asks for worker processes (they cost a spawn each)
os.environ.setdefault("FAULTLINE_WORKERS", "1")
# runs never go into a developer's Dagster instance (faultline run records into DAGSTER_HOME)
os.environ.pop("DAGSTER_HOME", None)

from helpers.landing import make_landing  # noqa: E402


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    return make_landing(tmp_path / "landing")


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "warehouse"


#: skips allowed in CI: optional platform features only (the Hyperscan wheel exists for x86-64 Linux)
ALLOWED_SKIPS = ("no hyperscan wheel on this platform",)
_skipped: list[tuple[str, str]] = []


def pytest_runtest_logreport(report) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append((report.nodeid, reason))


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def pytest_sessionfinish(session, exitstatus) -> None:
    """In CI a skip for any reason but a declared optional platform feature fails the run."""
    bad = [(n, r) for n, r in _skipped if not any(a in r for a in ALLOWED_SKIPS)]
    if bad and _in_ci() and session.exitstatus == 0:
        for nodeid, reason in bad:
            print(f"\nskipped in CI, which is not allowed: {nodeid}: {reason}")
        session.exitstatus = 1
