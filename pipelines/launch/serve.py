"""One host's Dagster deployment (``faultline serve``): one code server for the code location,
dagster-daemon and dagster-webserver pointed at it, the runs the code server's children;
started together, a child restarted when it exits, all stopped together with nothing left."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

#: the code location the code server loads (the installed package, from any directory)
MODULE = "faultline.definitions"
LOCATION = "faultline"
WORKSPACE = "serve-workspace.yaml"  # in DAGSTER_HOME
PR_SET_PDEATHSIG = 1


class ServeError(RuntimeError):
    """The deployment could not start (one line: what and where)."""


def default_instance_config(postgres: bool = False) -> str:
    """The shipped ``dagster.yaml`` (``deploy/``): SQLite storage, or PostgreSQL from env."""
    name = "dagster-postgres.yaml" if postgres else "dagster.yaml"
    return resources.files("faultline.deploy").joinpath(name).read_text()


def prepare_home(home: str | os.PathLike, postgres: bool = False) -> tuple[Path, bool]:
    """``home`` with a ``dagster.yaml`` (the shipped one written when it has none).
    Returns the folder and whether the file was written."""
    root = Path(home).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    config = root / "dagster.yaml"
    if config.exists():
        return root, False
    tmp = config.with_suffix(".yaml.tmp")
    tmp.write_text(default_instance_config(postgres))
    tmp.replace(config)
    return root, True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _script(name: str) -> str:
    """A console script of this environment (beside its python), else from PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        raise ServeError(f"{name} not found beside {sys.executable} or on PATH (pip install dagster-webserver)")
    return found


def _die_with_parent(sig: int) -> Callable[[], None]:
    """A ``preexec_fn``: the child gets ``sig`` when this process dies (Linux; elsewhere a no-op)."""

    def setup() -> None:
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)
        except (OSError, AttributeError):
            pass

    return setup


def _group_members(pgid: int) -> set[int]:
    """Live processes of a process group but multiprocessing's resource tracker (it lives as
    long as its parent), from /proc (empty where there is none)."""
    found = set()
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid or fields[0] == "Z":  # state, ppid, pgrp follow the name
                continue
            if b"resource_tracker" in (entry.parent / "cmdline").read_bytes():
                continue
        except (OSError, ValueError, IndexError):
            continue
        found.add(int(entry.parent.name))
    return found


@dataclass
class Child:
    """One supervised process: how to start it and how it ends."""

    name: str
    argv: list[str]
    stop_signal: int  # what it handles as "stop" (the code server handles none: it is killed)
    proc: subprocess.Popen | None = None
    starts: list[float] = field(default_factory=list)


@dataclass
class Stack:
    """The three processes of one host, their ports and where they log."""

    home: Path
    host: str = "127.0.0.1"
    port: int = 3000
    code_port: int = 0
    log_dir: Path | None = None
    say: Callable[[str], None] = print
    grace_s: float = 20.0
    children: list[Child] = field(default_factory=list)
    stopping: bool = False

    def __post_init__(self) -> None:
        self.code_port = self.code_port or free_port()
        workspace = ["-w", str(self.home / WORKSPACE)]
        self.children = [
            Child(
                "code-server",
                [sys.executable, "-m", "dagster", "api", "grpc", "-m", MODULE, "--location-name", LOCATION]
                + ["-h", "127.0.0.1", "-p", str(self.code_port)],
                signal.SIGKILL,
            ),
            Child("daemon", [_script("dagster-daemon"), "run", *workspace], signal.SIGTERM),
            Child(
                "webserver",
                [_script("dagster-webserver"), "-h", self.host, "-p", str(self.port), *workspace],
                signal.SIGTERM,
            ),
        ]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def child(self, name: str) -> Child:
        return next(c for c in self.children if c.name == name)

    def _env(self) -> dict[str, str]:
        return {**os.environ, "DAGSTER_HOME": str(self.home)}

    def _spawn(self, c: Child) -> None:
        out = None  # this process's stdout (a terminal, a service manager's journal)
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = open(self.log_dir / f"{c.name}.log", "ab")  # noqa: SIM115 - the child keeps it
        try:
            c.proc = subprocess.Popen(
                c.argv,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: a terminal's Ctrl-C reaches only us, we forward
                preexec_fn=_die_with_parent(signal.SIGKILL if c.stop_signal == signal.SIGKILL else signal.SIGTERM),
            )
        finally:
            if out is not None:
                out.close()
        c.starts.append(time.monotonic())
        self.say(f"{c.name} started (pid {c.proc.pid})")

    def _wait_until(self, ready: Callable[[], bool], c: Child, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            if c.proc is None or c.proc.poll() is not None:
                raise ServeError(f"{c.name} exited with {c.proc.returncode if c.proc else '?'} while starting")
            if time.monotonic() > deadline:
                raise ServeError(f"{c.name} not ready after {timeout_s:.0f}s")
            time.sleep(0.3)

    def _code_ready(self) -> bool:
        with socket.socket() as s:
            s.settimeout(1)
            return s.connect_ex(("127.0.0.1", self.code_port)) == 0

    def _web_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/server_info", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def write_workspace(self) -> Path:
        """The workspace of the daemon and the webserver: the code server, named ``faultline``
        whatever its port (schedule, sensor and run history are keyed by the location's name)."""
        path = self.home / WORKSPACE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            "# written by faultline serve at each start: the code server it runs\n"
            "load_from:\n  - grpc_server:\n"
            f"      host: 127.0.0.1\n      port: {self.code_port}\n      location_name: {LOCATION}\n"
        )
        tmp.replace(path)
        return path

    def start(self, timeout_s: float = 180.0) -> None:
        """Start the code server (it binds its port once the code location has loaded), then
        the daemon and the webserver; return once the webserver answers."""
        code, daemon, web = self.children
        self.write_workspace()
        self._spawn(code)
        try:
            self._wait_until(self._code_ready, code, timeout_s)
            self._spawn(daemon)
            self._spawn(web)
            self._wait_until(self._web_ready, web, timeout_s)
        except BaseException:
            self.stop()
            raise

    def supervise(self, max_restarts: int = 5, window_s: float = 600.0, poll_s: float = 0.5) -> int:
        """Until ``stopping``: restart a child that exited; give up (return 1) when one
        restarts more than ``max_restarts`` times in ``window_s``."""
        while not self.stopping:
            for c in self.children:
                if self.stopping or c.proc is None or c.proc.poll() is None:
                    continue
                self.say(f"{c.name} exited with {c.proc.returncode}; restarting it")
                recent = [t for t in c.starts if time.monotonic() - t < window_s]
                if len(recent) > max_restarts:
                    self.say(f"{c.name} restarted {len(recent)} times in {window_s:.0f}s; stopping")
                    return 1
                self._spawn(c)
            time.sleep(poll_s)
        return 0

    def _end(self, c: Child, sig: int) -> None:
        """Signal ``c``'s whole process group and reap it; SIGKILL what is left after the grace."""
        if c.proc is None or (c.proc.poll() is not None and not _group_members(c.proc.pid)):
            return
        pgid = c.proc.pid  # the leader of its own group (start_new_session)
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + self.grace_s
        while time.monotonic() < deadline:
            others = _group_members(pgid) - {c.proc.pid}
            if not others and (c.proc.poll() is not None or c.stop_signal == signal.SIGKILL):
                break  # the code server handles no signal: once its runs are gone it is killed
            time.sleep(0.2)
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        c.proc.wait()
        self.say(f"{c.name} stopped ({c.proc.returncode})")

    def stop(self) -> None:
        """Stop the webserver and the daemon, then the runs (SIGTERM: each marks its run
        failed) and the code server; reap everything."""
        self.stopping = True
        code, daemon, web = self.children
        for c in (web, daemon):
            self._end(c, signal.SIGTERM)
        self._end(code, signal.SIGTERM)  # its runs stop; the server itself ignores it and is killed


def serve(
    home: str | os.PathLike,
    host: str = "127.0.0.1",
    port: int = 3000,
    log_dir: str | os.PathLike | None = None,
    say: Callable[[str], None] = print,
) -> int:
    """Run the stack until SIGTERM, SIGINT or SIGHUP; returns the exit code."""
    stack = Stack(Path(home), host=host, port=port, log_dir=Path(log_dir) if log_dir else None, say=say)

    def on_signal(signum, _frame):
        stack.stopping = True

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    try:
        stack.start()
        say(f"Dagster UI at {stack.url} (DAGSTER_HOME={stack.home})")
        return stack.supervise()
    finally:
        stack.stop()
