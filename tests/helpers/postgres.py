"""A throwaway PostgreSQL cluster (Debian's ``postgresql`` package): initdb and pg_ctl in a
temporary folder, on a free localhost port, as an unprivileged user when run as root."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def pg_bindir() -> Path:
    """The newest server's bin folder: /usr/lib/postgresql/<version>/bin (Debian), else PATH."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise FileNotFoundError("PostgreSQL's initdb not found: apt-get install -y postgresql")
    return Path(initdb).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """``with Postgres() as pg:`` a running server; ``pg.env`` holds the DAGSTER_PG_* variables."""

    def __init__(self, db: str = "dagster", user: str = "dagster"):
        self.db, self.user, self.port = db, user, _free_port()
        self.bindir = pg_bindir()
        self.root = Path(tempfile.mkdtemp(prefix="faultline-pg-"))  # not under pytest's 0700 tmp
        self.data = self.root / "data"
        self.os_user = None
        if os.geteuid() == 0:  # initdb refuses root
            for name in ("postgres", "nobody"):
                try:
                    self.os_user = pwd.getpwnam(name)
                    break
                except KeyError:
                    continue
            os.chown(self.root, self.os_user.pw_uid, self.os_user.pw_gid)

    def _run(self, *argv: str) -> subprocess.CompletedProcess:
        kwargs = {}
        if self.os_user is not None:
            kwargs = {"user": self.os_user.pw_uid, "group": self.os_user.pw_gid, "extra_groups": []}
        env = {**os.environ, "HOME": str(self.root), "LC_ALL": "C.UTF-8"}
        return subprocess.run(
            [str(self.bindir / argv[0]), *argv[1:]],
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            **kwargs,
        )

    @property
    def env(self) -> dict[str, str]:
        return {
            "DAGSTER_PG_HOST": "127.0.0.1",
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_DB": self.db,
            "DAGSTER_PG_USER": self.user,
            "DAGSTER_PG_PASSWORD": "unused-trust-auth",
        }

    def start(self) -> Postgres:
        self._run("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-sync")
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.root / "server.log"), "-w", "start")
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, self.db)
        return self

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Postgres:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
