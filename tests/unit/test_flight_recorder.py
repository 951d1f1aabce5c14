"""Tests for faultline.ingest.flight_recorder: safe loading, per-rank summary, suspect rank."""

from __future__ import annotations

import copy
import io
import json
import os
import pickle

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faultline.ingest.flight_recorder import (
    FlightRecorderError,
    FlightRecorderRefused,
    _NoGlobalsUnpickler,
    default_pg_id,
    load_dump,
    load_dump_files,
    rank_from_filename,
    summarize_dumps,
    suspect_rank,
)
from faultline.schema import FLIGHT_SUMMARY

WORLD = 8
SEQ = 88214


def make_dump(
    *,
    enqueued: int = SEQ,
    started: int = SEQ,
    completed: int = SEQ - 1,
    name: str = "nccl:all_reduce",
    n: int = 4,
    extra_pg: bool = True,
) -> dict:
    """A dump shaped like PyTorch's JSON flight-recorder output (version 2.x)."""
    entries = []
    for s in range(enqueued - n + 1, enqueued + 1):
        state = "completed" if s <= completed else ("started" if s <= started else "scheduled")
        entries.append(
            {
                "record_id": s,
                "pg_id": 0,
                "process_group": ["0", "default_pg"],
                "collective_seq_id": s,
                "p2p_seq_id": 0,
                "op_id": s,
                "profiling_name": name if s == enqueued else "nccl:all_reduce",
                "time_created_ns": 1795936447000000000 + s,
                "input_sizes": [[262144]],
                "input_dtypes": ["Float"],
                "output_sizes": [[262144]],
                "output_dtypes": ["Float"],
                "state": state,
                "time_discovered_started_ns": None,
                "time_discovered_completed_ns": None,
                "retired": state == "completed",
                "timeout_ms": 600000,
                "is_p2p": False,
                "frames": [{"name": "all_reduce", "filename": "distributed_c10d.py", "line": 2501}],
            }
        )
    pg_status = {
        "0": {
            "last_enqueued_collective": enqueued,
            "last_started_collective": started,
            "last_completed_collective": completed,
        }
    }
    pg_config = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(WORLD)))}}
    if extra_pg:  # a second group whose progress must not leak into the default one
        pg_status["1"] = {
            "last_enqueued_collective": 7,
            "last_started_collective": 7,
            "last_completed_collective": 7,
        }
        pg_config["1"] = {"name": "1", "desc": "undefined", "ranks": "[0, 1]"}
        entries.append(
            {
                "record_id": 99999999,
                "pg_id": 1,
                "process_group": ["1", "undefined"],
                "collective_seq_id": 99999999,
                "profiling_name": "nccl:broadcast",
                "state": "completed",
                "time_created_ns": 1,
                "input_sizes": [],
                "frames": [],
            }
        )
    return {
        "version": "2.4",
        "comm_lib_version": "2.21.5",
        "pg_config": pg_config,
        "pg_status": pg_status,
        "entries": entries,
    }


def as_json(d: dict) -> bytes:
    return json.dumps(d).encode()


def load_world(overrides: dict[int, dict] | None = None) -> dict[int, dict]:
    overrides = overrides or {}
    return {r: load_dump(as_json(overrides.get(r, make_dump()))) for r in range(WORLD)}


# --------------------------------------------------------------------------- loading


def test_load_json_dump():
    d = load_dump(as_json(make_dump()))
    assert d["version"] == "2.4"
    assert default_pg_id(d) == "0"
    # leading whitespace / BOM tolerated
    assert load_dump(b"\xef\xbb\xbf  \n" + as_json(make_dump()))["version"] == "2.4"
    assert load_dump(as_json(make_dump()).decode())["version"] == "2.4"


def test_pickle_is_refused_by_default():
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        data = pickle.dumps(make_dump(), protocol=proto)
        with pytest.raises(FlightRecorderRefused) as exc:
            load_dump(data)
        msg = str(exc.value)
        assert "pickle" in msg and "refused for safety" in msg
        assert "_dump_nccl_trace_json" in msg  # says how to export JSON
    assert issubclass(FlightRecorderRefused, FlightRecorderError)
    assert issubclass(FlightRecorderError, ValueError)


def test_torch_save_zip_is_refused():
    with pytest.raises(FlightRecorderRefused, match="zip"):
        load_dump(b"PK\x03\x04" + b"\0" * 100)


class _Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_malicious_pickle_never_executes(tmp_path):
    marker = tmp_path / "pwned"
    if os.name == "posix":
        # premise check: the payload is live (a naive pickle.loads runs it)
        control = tmp_path / "control"
        pickle.loads(pickle.dumps(_Evil(control)))
        assert control.exists()
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        data = pickle.dumps({"entries": [_Evil(marker)], "pg_status": {}}, protocol=proto)
        with pytest.raises(FlightRecorderRefused):
            load_dump(data)
        with pytest.raises(FlightRecorderRefused):
            load_dump(data, allow_restricted_pickle=True)
        # second line of defence on its own: the Unpickler's find_class refuses globals
        with pytest.raises(FlightRecorderRefused, match="system"):
            _NoGlobalsUnpickler(io.BytesIO(data)).load()
    assert not marker.exists()


def test_restricted_pickle_reader_is_opt_in_and_reads_plain_dumps():
    dump = make_dump()
    dump["entries"][0]["process_group"] = ("0", "default_pg")  # tuples as torch writes them
    data = pickle.dumps(dump)
    with pytest.raises(FlightRecorderRefused):
        load_dump(data)
    got = load_dump(data, allow_restricted_pickle=True)
    assert got["pg_status"]["0"]["last_enqueued_collective"] == SEQ
    assert got["entries"][0]["process_group"] == ("0", "default_pg")


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "expected a JSON object"),
        (b"[1, 2]", "expected a JSON object"),
        (b"{not json", "invalid JSON"),
        (b'{"foo": 1}', "neither 'entries' nor 'pg_status'"),
        (b'{"entries": {}}', "'entries' must be a list"),
        (b'{"entries": [1]}', "entries[0] must be a mapping"),
        (b'{"pg_status": []}', "'pg_status' must be a mapping"),
        (b'{"pg_status": {"0": 5}}', "pg_status['0'] must be a mapping"),
        (b'{"entries": [], "pg_config": 3}', "'pg_config' must be a mapping"),
        (b"{" * 100000, "invalid JSON"),
        (b"\xff\xfe garbage", "expected a JSON object"),
    ],
)
def test_load_dump_rejects_bad_structure(data, message):
    with pytest.raises(FlightRecorderError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_dump(data)


def test_load_dump_size_bound():
    data = as_json(make_dump())
    with pytest.raises(FlightRecorderError, match="over the 100-byte limit"):
        load_dump(data, max_bytes=100)
    assert load_dump(data, max_bytes=len(data))["version"] == "2.4"


def test_rank_from_filename_and_load_files(tmp_path):
    assert rank_from_filename("nccl_trace_rank_5") == 5
    assert rank_from_filename("nccl_trace_rank_12.json") == 12
    assert rank_from_filename("3.json") == 3
    assert rank_from_filename("dump.json") is None
    for r in range(3):
        (tmp_path / f"nccl_trace_rank_{r}.json").write_bytes(as_json(make_dump(completed=SEQ - r)))
    dumps = load_dump_files(sorted(tmp_path.glob("*.json")))
    assert sorted(dumps) == [0, 1, 2]
    assert dumps[2]["pg_status"]["0"]["last_completed_collective"] == SEQ - 2


# --------------------------------------------------------------------------- summary


def test_summarize_dumps_exact():
    dumps = load_world({5: make_dump(enqueued=SEQ - 1, started=SEQ - 1, completed=SEQ - 1)})
    s = summarize_dumps(dumps)
    assert s.schema == FLIGHT_SUMMARY
    assert s.rows() == [(r, "0", SEQ, SEQ, SEQ - 1, SEQ, "nccl:all_reduce", "started", 5) for r in range(5)] + [
        (5, "0", SEQ - 1, SEQ - 1, SEQ - 1, SEQ - 1, "nccl:all_reduce", "completed", 5)
    ] + [(r, "0", SEQ, SEQ, SEQ - 1, SEQ, "nccl:all_reduce", "started", 5) for r in (6, 7)]


def test_summarize_without_pg_status_uses_entries():
    d = make_dump(extra_pg=False)
    del d["pg_status"]
    s = summarize_dumps({0: load_dump(as_json(d))})
    assert s.select("last_enqueued", "last_started", "last_completed", "last_entry_seq").row(0) == (
        SEQ,
        SEQ,
        SEQ - 1,
        SEQ,
    )


def test_summarize_empty():
    s = summarize_dumps({})
    assert s.height == 0 and s.schema == FLIGHT_SUMMARY


# --------------------------------------------------------------------------- suspect


def test_suspect_rank_5_behind_never_enqueued():
    # Everybody enqueued and started collective SEQ and waits in it; rank 5 never got there.
    dumps = load_world({5: make_dump(enqueued=SEQ - 1, started=SEQ - 1, completed=SEQ - 1)})
    rank, reason = suspect_rank(dumps)
    assert rank == 5
    assert reason == f"rank 5 last enqueued collective is {SEQ - 1}, behind the other 7 ranks at {SEQ}"


def test_suspect_rank_5_behind_on_completed():
    dumps = load_world({5: make_dump(completed=SEQ - 3)})
    rank, reason = suspect_rank(dumps)
    assert rank == 5
    assert "last completed collective" in reason and str(SEQ - 3) in reason


def test_suspect_rank_desync_name():
    dumps = load_world({5: make_dump(name="nccl:all_gather")})
    rank, reason = suspect_rank(dumps)
    assert rank == 5
    assert "nccl:all_gather" in reason and "nccl:all_reduce" in reason


def test_suspect_rank_all_agree():
    rank, reason = suspect_rank(load_world())
    assert rank is None
    assert reason == f"all 8 ranks agree (last completed collective {SEQ - 1})"


def test_suspect_rank_two_ranks_lowest_wins():
    dumps = {
        0: load_dump(as_json(make_dump())),
        1: load_dump(as_json(make_dump(enqueued=SEQ - 2, started=SEQ - 2, completed=SEQ - 2))),
    }
    assert suspect_rank(dumps)[0] == 1


def test_suspect_rank_ambiguous_and_too_few():
    behind = make_dump(enqueued=SEQ - 1, started=SEQ - 1, completed=SEQ - 1)
    rank, reason = suspect_rank(load_world({2: behind, 5: copy.deepcopy(behind)}))
    assert rank is None and "[2, 5]" in reason
    rank, reason = suspect_rank({0: load_dump(as_json(make_dump()))})
    assert rank is None and "at least two" in reason


def test_other_process_groups_do_not_leak():
    # rank 3's side group is far ahead; the default group is in step everywhere.
    d = make_dump()
    d["pg_status"]["1"]["last_completed_collective"] = 10**6
    dumps = load_world({3: d})
    assert suspect_rank(dumps)[0] is None
    assert summarize_dumps(dumps)["last_entry_name"].unique().to_list() == ["nccl:all_reduce"]
    assert isinstance(summarize_dumps(dumps), pl.DataFrame)


# --------------------------------------------------------------------------- properties

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_entry = st.fixed_dictionaries(
    {},
    optional={
        "collective_seq_id": st.integers(-5, 5) | _json,
        "profiling_name": st.sampled_from(["nccl:all_reduce", "nccl:broadcast"]) | _json,
        "state": st.sampled_from(["scheduled", "started", "completed"]) | _json,
        "pg_id": st.integers(0, 2) | _json,
        "process_group": _json,
    },
)
_dump = st.fixed_dictionaries(
    {"entries": st.lists(_entry, max_size=6)},
    optional={
        "pg_status": st.dictionaries(
            st.sampled_from(["0", "1", "x"]),
            st.dictionaries(
                st.sampled_from(["last_enqueued_collective", "last_started_collective", "last_completed_collective"]),
                st.integers(-1, 5) | _json,
            ),
        ),
        "pg_config": st.dictionaries(st.sampled_from(["0", "1"]), _json),
        "version": st.text(max_size=4),
    },
)


@given(st.dictionaries(st.integers(0, 7), _dump, max_size=5))
@settings(max_examples=200, deadline=None)
def test_summary_and_suspect_never_raise_on_valid_structure(dumps):
    loaded = {r: load_dump(json.dumps(d).encode()) for r, d in dumps.items()}
    s = summarize_dumps(loaded)
    assert s.schema == FLIGHT_SUMMARY and s.height == len(loaded)
    rank, reason = suspect_rank(loaded)
    assert rank is None or rank in loaded
    assert isinstance(reason, str) and reason


@given(st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_load_dump_arbitrary_bytes_only_raises_flight_recorder_error(data):
    try:
        d = load_dump(data)
    except FlightRecorderError:
        return
    assert isinstance(d, dict)


def test_summaries_leave_out_ranks_beyond_int64():
    """Found by bench/fuzz.py: a rank of 2**63 crashed the summary; it cannot be a real rank."""
    good = {
        "pg_status": {
            "0": {"last_enqueued_collective": 5, "last_started_collective": 5, "last_completed_collective": 4}
        },
        "entries": [],
    }
    df = summarize_dumps({2**63: good, 3: good})
    assert df["rank"].to_list() == [3]
