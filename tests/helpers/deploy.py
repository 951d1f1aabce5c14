"""Driving a running deployment from a test: the webserver's GraphQL API, processes by parent,
waiting for runs in the instance."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import dagster as dg

REPO = {"repositoryLocationName": "faultline", "repositoryName": "__repository__"}


def graphql(url: str, query: str, **variables) -> dict:
    """One GraphQL request to the webserver; its ``data``, or an AssertionError with the errors."""
    body = json.dumps({"query": query, "variables": variables}).encode()
    req = urllib.request.Request(f"{url}/graphql", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        out = json.loads(r.read())
    assert not out.get("errors"), out["errors"]
    return out["data"]


def stop_schedule(url: str, name: str) -> str:
    data = graphql(
        url,
        "query($s: ScheduleSelector!) { scheduleOrError(scheduleSelector: $s) {"
        " __typename ... on Schedule { scheduleState { id } } } }",
        s={**REPO, "scheduleName": name},
    )
    state_id = data["scheduleOrError"]["scheduleState"]["id"]
    out = graphql(
        url,
        "mutation($id: String) { stopRunningSchedule(id: $id) { __typename"
        " ... on ScheduleStateResult { scheduleState { status } } ... on PythonError { message } } }",
        id=state_id,
    )["stopRunningSchedule"]
    return out.get("scheduleState", {}).get("status") or out.get("message", out["__typename"])


def start_sensor(url: str, name: str, cursor: str | None = None) -> str:
    selector = {**REPO, "sensorName": name}
    if cursor is not None:
        out = graphql(
            url,
            "mutation($s: SensorSelector!, $c: String) { setSensorCursor(sensorSelector: $s, cursor: $c) {"
            " __typename ... on PythonError { message } } }",
            s=selector,
            c=cursor,
        )["setSensorCursor"]
        assert out["__typename"] == "Sensor", out
    out = graphql(
        url,
        "mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) { __typename"
        " ... on Sensor { sensorState { status } } ... on PythonError { message } } }",
        s=selector,
    )["startSensor"]
    return out.get("sensorState", {}).get("status") or out.get("message", out["__typename"])


def partitions_materialized(url: str, asset: str) -> int:
    """What the UI shows: the number of materialized partitions of ``asset``."""
    data = graphql(
        url,
        "query($k: AssetKeyInput!) { assetNodeOrError(assetKey: $k) { __typename"
        " ... on AssetNode { partitionStats { numMaterialized } } } }",
        k={"path": [asset]},
    )
    return data["assetNodeOrError"]["partitionStats"]["numMaterialized"]


def wait_for(what: str, check: Callable[[], object], timeout_s: float, poll_s: float = 0.5):
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(poll_s)


def runs(instance: dg.DagsterInstance, **tags: str) -> list[dg.RunRecord]:
    """Run records with these tags, oldest first."""
    return list(reversed(instance.get_run_records(dg.RunsFilter(tags=tags))))


def finished(records: list[dg.RunRecord]) -> bool:
    return bool(records) and all(r.dagster_run.is_finished for r in records)


def step_intervals(instance: dg.DagsterInstance, run_id: str, step: str) -> list[tuple[float, float]]:
    """(start, end) of each execution of ``step`` in a run, from its event log."""
    starts, out = [], []
    for e in instance.all_logs(run_id):
        if e.step_key != step or e.dagster_event is None:
            continue
        if e.dagster_event_type == dg.DagsterEventType.STEP_START:
            starts.append(e.timestamp)
        elif e.dagster_event_type in (dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE):
            out.append((starts.pop(0), e.timestamp))
    return out


def processes() -> dict[int, tuple[int, str]]:
    """Every live process: pid -> (parent pid, command line)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[0] == "Z":
                continue
            cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        found[int(stat.parent.name)] = (int(fields[1]), cmd)
    return found


def children(pid: int, contains: str = "") -> list[int]:
    return sorted(p for p, (ppid, cmd) in processes().items() if ppid == pid and contains in cmd)


def descendants(pid: int) -> set[int]:
    procs, out, todo = processes(), set(), [pid]
    while todo:
        parent = todo.pop()
        for p, (ppid, _) in procs.items():
            if ppid == parent and p not in out:
                out.add(p)
                todo.append(p)
    return out
