"""Progress and checkpoint markers of job output (models/rules/progress.yaml): every marker line
of the real-line corpus gets the marker, step, path and throughput the corpus states, through
both scanners of the ingest (small files together, large files block by block), with the time
it was printed; the lines stay benign."""

from __future__ import annotations

import datetime as dt
import io
import math
from pathlib import Path

import polars as pl
import pytest

from faultline.classify import corpus
from faultline.classify.engine import first_rule, first_rule_chain
from faultline.classify.markers import marker_fields
from faultline.classify.ruleset import load_ruleset
from faultline.ingest.parse import SourceContext, parse_files, parse_stream

FIELDS = ("marker", "step", "path", "tokens_per_s", "samples_per_s")
UTC = dt.timezone.utc
LOGHUB = Path(__file__).resolve().parents[1] / "fixtures" / "loghub"


@pytest.fixture(scope="module")
def rs():
    return load_ruleset()


@pytest.fixture(scope="module")
def excerpts():
    """The dev corpus's job-output excerpts that hold a marker line: (lines, their text)."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for rec in corpus.load("dev"):
        if rec["kind"] == "job":
            groups.setdefault((rec["source"], rec["excerpt"]), []).append(rec)
    return [recs for recs in groups.values() if any(r.get("marker") for r in recs)]


def _ctx(i: int, recs: list[dict]) -> SourceContext:
    date = next((r["date"] for r in recs if r.get("date")), None)
    ref = dt.date.fromisoformat(date) if date else dt.date(2025, 1, 1)
    return SourceContext(source=f"jobs/{i}/out.log", kind="job", ref_date=ref, job_id=str(i))


def _text(recs: list[dict]) -> bytes:
    return ("\n".join(r["text"] for r in recs) + "\n").encode("utf-8")


def _compare(recs: list[dict], markers: pl.DataFrame | None) -> list:
    got = {r["line_no"]: r for r in (markers.to_dicts() if markers is not None else [])}
    wrong = []
    for n, rec in enumerate(recs, start=1):
        want = {k: rec.get(k) for k in FIELDS}
        have = {k: got.get(n, {}).get(k) for k in FIELDS}
        if rec.get("marker") and want != have:
            wrong.append((rec["text"][:120], want, have))
    return wrong


def test_every_marker_line_of_the_corpus_small_file_scanner(excerpts, rs, tmp_path):
    items = []
    for i, recs in enumerate(excerpts):
        path = tmp_path / f"{i}.log"
        path.write_bytes(_text(recs))
        items.append((path, _ctx(i, recs)))
    results = parse_files(items, rs)
    wrong = [w for recs, res in zip(excerpts, results) for w in _compare(recs, res.markers)]
    assert not wrong, wrong[:5]
    n = sum(1 for recs in excerpts for r in recs if r.get("marker"))
    assert n >= 350
    assert sum(res.markers.height for res in results if res.markers is not None) >= n
    # the lines stay benign: no marker line became an event
    events = {(i, ln) for i, res in enumerate(results) for ln in res.events["line_no"].to_list()}
    assert not [
        r["text"]
        for i, recs in enumerate(excerpts)
        for n, r in enumerate(recs, 1)
        if r.get("marker") and (i, n) in events
    ]


def test_every_marker_line_of_the_corpus_block_scanner(excerpts, rs):
    wrong = []
    for i, recs in enumerate(excerpts):
        res = parse_stream(io.BytesIO(_text(recs)), _ctx(i, recs), rs)
        wrong += _compare(recs, res.markers)
    assert not wrong, wrong[:5]


def test_lines_without_a_corpus_marker_that_get_one_are_benign_or_a_bar_before_the_error(rs):
    """The corpus states markers on some sources only; the rules also mark such lines elsewhere
    (Megatron iterations, mmengine saves). A failure line marked is a tqdm bar the error was
    printed right after, on the same line, an iteration whose numbers went NaN, or names its rank."""
    lines = [r for r in corpus.load("dev") if r["kind"] == "job" and not r.get("marker")]
    got = marker_fields(pl.Series([r["text"] for r in lines]), rs)
    marked = [(r, g) for r, g in zip(lines, got.to_dicts()) if g["marker"]]
    assert marked
    odd = [
        (r["category"], g["marker_rule"], r["text"][:100])
        for r, g in marked
        if r["category"] != "benign"
        and g["marker"] != "rank"  # a process's rank, true on any line it prints
        and g["marker_rule"] != "progress_tqdm_steps"
        and not (r["category"] == "user_app" and ": nan |" in r["text"])
    ]
    assert not odd


def test_times_come_from_the_prefix_the_message_or_the_line_before(rs):
    text = (
        "[2021-08-08 01:00:44,221] [INFO] [logging.py:68:log_dist] [Rank 0] Saving model checkpoint: "
        "/gpfsscratch/rech/six/commun/checkpoints/tr1-13B/checkpoints/global_step33241/mp_rank_00_model_states.pt\n"
        "  successfully saved checkpoint at iteration   33241 to /gpfsscratch/rech/six/commun/checkpoints/tr1-13B/checkpoints\n"
        "i.finetune/0 [NeMo I 2025-08-26 13:45:33 nemo_logging:393] Global Checkpoint Save : Rank: 0 : Iteration: 10 : "
        "Start time: 1756196133.682s : Save duration: 0.232s\n"
        "[rank0]:[0] 2025-06-25 12:55:37,346 - root - INFO - Received async checkpoint request with id=./outputs/checkpoint/step-1\n"
    )
    ctx = SourceContext(source="jobs/1/out.log", kind="job", ref_date=dt.date(2025, 1, 1), job_id="1")
    m = parse_stream(io.BytesIO(text.encode()), ctx, rs).markers
    # NeMo's logger (behind a NeMo-Run replica label) is a prefix of job output; torchtitan's
    # stamp behind "[0] " is inside the message
    assert m["ts_source"].to_list() == ["naive_utc", "inherited", "naive_utc", "in_message"]
    assert m["ts"].to_list() == [
        dt.datetime(2021, 8, 8, 1, 0, 44, 221000, tzinfo=UTC),
        dt.datetime(2021, 8, 8, 1, 0, 44, 221000, tzinfo=UTC),
        dt.datetime(2025, 8, 26, 13, 45, 33, tzinfo=UTC),
        dt.datetime(2025, 6, 25, 12, 55, 37, 346000, tzinfo=UTC),
    ]
    assert m["step"].to_list() == [33241, 33241, 10, 1]


# launcher labels of real job-output lines (tests/unit/test_job_prefix.py), outermost first
LABELS = (
    "worker-5: ",
    "rdma-test-gpu-worker-1: ",
    "[1,23]<stdout>:",
    "(RayTrainWorker pid=2273, ip=172.24.21.66) ",
    "2026-02-18T10:48:25.681Z ",
    "0: ",
    "[default0]:[rank12]:",
)


def test_marker_lines_behind_any_launcher_label(rs, tmp_path):
    """Real marker messages whose rules anchor at the message's start (examples of
    progress.yaml), behind each launcher label: the same marker, step and path through both
    scanners, and a collector's stamp is the line's time."""
    msgs = [
        "Saving model to /home/mreso/llama-recipes/../llama_output_fsdp/fine-tuned-meta-llama/Meta-Llama-3.1-8B",
        "saving checkpoint to out",
        "Updating weights from resume model",
        "steps: 10 loss: 2.2985 iter time (s): 0.400 samples/sec: 639.687",
        "Iteration 0 complete",
    ]
    bare = marker_fields(pl.Series(msgs), rs).select(FIELDS)
    assert bare["marker"].null_count() == 0
    text = "".join(f"{label}{m}\n" for label in LABELS for m in msgs).encode()
    ctx = SourceContext(source="jobs/1/out.log", kind="job", ref_date=dt.date(2026, 2, 18), job_id="1")
    path = tmp_path / "out.log"
    path.write_bytes(text)
    for got in (parse_stream(io.BytesIO(text), ctx, rs).markers, parse_files([(path, ctx)], rs)[0].markers):
        assert got["line_no"].to_list() == list(range(1, len(LABELS) * len(msgs) + 1))
        assert got.select(FIELDS).to_dicts() == bare.to_dicts() * len(LABELS)
        stamped = got.filter(pl.col("line_no").is_between(4 * len(msgs) + 1, 5 * len(msgs)))
        assert set(stamped["ts_source"]) == {"absolute"}
        assert set(stamped["ts"]) == {dt.datetime(2026, 2, 18, 10, 48, 25, 681000, tzinfo=UTC)}


def test_kernel_logs_and_full_mode_keep_no_markers(rs):
    line = b"[2023-07-24 13:21:33,263] [INFO] [torch_checkpoint_engine.py:21:save] [Torch] Saving x/global_step10/m.pt...\n"
    kernel = SourceContext(source="kernel/n1.log", kind="kernel", ref_date=dt.date(2023, 7, 24))
    assert parse_stream(io.BytesIO(line), kernel, rs).markers is None
    full = SourceContext(source="-", kind="job", ref_date=dt.date(2023, 7, 24), full=True)
    assert parse_stream(io.BytesIO(line), full, rs).markers is None


def test_marker_rules_keep_the_keyword_prefilter_contract(rs):
    """The marker pass tries a marker rule only on lines holding one of its keywords: the same
    rule, line for line, as trying every marker pattern on every line."""
    lines = [r["text"] for r in corpus.load("dev")]
    lines += [x for p in sorted(LOGHUB.glob("*.log")) for x in p.read_text(errors="replace").splitlines()]
    msgs = pl.Series(lines)
    got, want = first_rule(msgs, rs.markers), first_rule_chain(msgs, rs.markers)
    assert got.to_list() == want.to_list()
    assert want.is_not_null().sum() >= 350


def test_throughput_numbers_keep_their_digits(rs):
    got = marker_fields(
        pl.Series(
            [
                "[titan] 2026-05-18 16:07:39,051 - root - INFO - step: 22  loss:  2.91027  grad_norm:  0.5926  "
                "memory:  9.46GiB(64.99%)  tps: 7,094  tflops: 0.51  mfu: 0.16%",
                "[INFO] [timer.py:199:stop] epoch=0/micro_step=10/global_step=10, RunningAvgSamplesPerSec=173.4455644119137, "
                "CurrSamplesPerSec=171.97903593624417, MemAllocated=3.96GB, MaxMemAllocated=22.95GB",
                "Started Session 12 of User alice.",
            ]
        ),
        rs,
    ).to_dicts()
    assert (got[0]["step"], got[0]["tokens_per_s"]) == (22, 7094.0)
    assert got[1]["samples_per_s"] == 171.97903593624417 and not math.isnan(got[1]["samples_per_s"])
    assert got[2]["marker"] is None


def test_rank_lines_tie_each_process_to_its_rank_once(rs, tmp_path):
    """NCCL's ring and init lines (tests/fixtures/jobs/dev/nccl-290-..., ds-2931-...) give
    host, pid and rank, one row per process and claim (nccl-290's last ring line repeats rank
    3's), through both scanners; the lines stay benign."""
    jobs = Path(__file__).resolve().parents[1] / "fixtures" / "jobs" / "dev"
    ctx = SourceContext(source="jobs/1/out.log", kind="job", ref_date=dt.date(2020, 1, 1), job_id="1")
    cols = ("line_no", "marker_rule", "host", "pid", "rank", "nranks", "cuda_dev")
    want = {
        "nccl-290-horovod-mpirun-shm-fallocate": [
            (1, "rank_nccl_channel_send", "gpu2-ru7", 2144, 2, None, None),
            (2, "rank_nccl_channel_send", "gpu2-ru7", 2143, 1, None, None),
            (3, "rank_nccl_channel_send", "gpu2-ru7", 2145, 3, None, None),
            (4, "rank_nccl_channel_send", "gpu2-ru7", 2142, 0, None, None),
        ],
        "ds-2931-inference-2node-ib-error12": [
            (1, "rank_nccl_comm_init", "PHLRR4036", 24142, 3, 16, 3),
            (2, "rank_nccl_comm_init", "PHLRR4036", 24148, 6, 16, 6),
            (3, "rank_nccl_comm_init", "PHLRR4036", 24139, 0, 16, 0),
        ],
    }
    for name, rows in want.items():
        data = (jobs / name / "output.log").read_bytes()
        (tmp_path / "out.log").write_bytes(data)
        for res in (parse_stream(io.BytesIO(data), ctx, rs), parse_files([(tmp_path / "out.log", ctx)], rs)[0]):
            assert res.markers.select(cols).rows() == rows
            assert not set(res.events["line_no"]) & {r[0] for r in rows}
