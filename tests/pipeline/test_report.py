"""The nightly report (HTML and Markdown), ``explain`` and ``export prometheus`` over the demo
warehouse of test_sql.py, whose landing folder carries hostile strings (script tags, an
attribute breakout, ANSI escapes, a bidi override) in job names, users, log lines, node and
rack names."""

from __future__ import annotations

import datetime as dt
import re
import time
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.hostile import ANSI, BIDI, HOSTILE_NODE, HOSTILE_RACK, IMG, SCRIPT, build_demo_warehouse

from faultline.commands.explain import explain
from faultline.commands.export import export, label_value, prometheus_text
from faultline.commands.report import report
from faultline.lake import queries as Q
from faultline.report import build_report, md_escape, render, sanitize, slug
from faultline.report.data import load
from faultline.report.renderer import MAX_BYTES, render_html

SECTIONS = [
    "do-first",
    "headline",
    "known-issues",
    "failed-jobs",
    "scoreboard",
    "causes",
    "timeline",
    "racks",
    "lemons",
    "signatures",
    "data-quality",
    "evidence",
    "postmortems",
]
ALLOWED_TAGS = {
    "html",
    "head",
    "meta",
    "title",
    "style",
    "body",
    "header",
    "main",
    "footer",
    "nav",
    "a",
    "p",
    "h1",
    "h2",
    "h3",
    "h4",
    "section",
    "div",
    "span",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "svg",
    "line",
    "text",
    "circle",
    "rect",
    "g",
    "ul",
    "li",
    "code",
    "pre",
    "b",
    "small",
    "br",
    "dl",
    "dt",
    "dd",
    "article",
    "figure",
    "figcaption",
    "details",
    "summary",
}


@pytest.fixture(scope="session")
def demo(tmp_path_factory):
    return build_demo_warehouse(tmp_path_factory.getbasetemp() / "faultline-demo")


@pytest.fixture(scope="session")
def wh(demo) -> Path:
    return demo[0]


@pytest.fixture(scope="session")
def html_report(wh, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("report") / "report.html"
    started = time.perf_counter()
    build_report(wh, out)
    print(f"\nHTML report: {out.stat().st_size / 1e6:.2f} MB in {time.perf_counter() - started:.2f}s")
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def md_report(wh) -> str:
    return render(wh, fmt="md")


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, list]] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))
        self.ids.update(v for k, v in attrs if k == "id")

    handle_startendtag = handle_starttag


def _parse(page: str) -> _Tags:
    p = _Tags()
    p.feed(page)
    return p


# -- the HTML page -----------------------------------------------------------------------------


def test_html_report_has_every_section_and_fits(html_report, wh):
    assert len(html_report.encode()) < MAX_BYTES
    tags = _parse(html_report)
    for sid in SECTIONS:
        assert sid in tags.ids, sid
    last = Q.run_sql(Q.connect(wh), "SELECT max(date) AS d FROM ingest_audit")["d"][0]
    assert f"faultline nightly report: {last.isoformat()}" in html_report
    # every job link lands on a postmortem, and every postmortem is linked
    links = {v[1:] for t, a in tags.tags if t == "a" for k, v in a if k == "href" and v.startswith("#job-")}
    posts = {i for i in tags.ids if i.startswith("job-")}
    assert links and links == posts
    assert "<svg" in html_report and "<circle" in html_report  # interval chart
    assert html_report.count('class="whisker') >= 2


def test_html_report_is_self_contained(html_report):
    tags = _parse(html_report)
    assert {t for t, _ in tags.tags} <= ALLOWED_TAGS
    for tag, attrs in tags.tags:
        for k, v in attrs:
            assert not k.startswith("on"), (tag, k)
            assert k not in ("src", "srcset", "action", "formaction", "xlink:href"), (tag, k)
            if k == "href":
                assert v.startswith("#"), v
    low = html_report.lower()
    # log text may quote a URL (escaped, as text); the markup and the stylesheet name none
    styles = "".join(re.findall(r"<style[^>]*>(.*?)</style>", low, flags=re.S))
    markup = re.sub(r">[^<]*<", "><", low)
    for part in (styles, markup):
        assert "http://" not in part and "https://" not in part and "url(" not in part and "@import" not in part
    assert "content-security-policy" in low and "default-src 'none'" in low


def test_hostile_strings_render_as_escaped_text(html_report, demo):
    _, info = demo
    for raw in (SCRIPT, IMG, "<img", "<script", ANSI, "\x1b", BIDI):
        assert raw not in html_report, repr(raw)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html_report
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in html_report
    assert "[U+202E]" in html_report
    # job names and users (failed-jobs table and postmortems), log lines (evidence and timeline),
    # node and rack names (heatmap) all carried the payload
    assert html_report.count("job&lt;script&gt;") >= 2 * len(info["jobs"])
    assert "name=&lt;script&gt;alert(1)&lt;/script&gt;" in html_report
    assert "r&lt;script&gt;alert(1)&lt;/script&gt;" in html_report  # rack label in the heatmap
    assert 'id="racks-northwind-a1"' in html_report


def test_report_for_an_earlier_date_and_bad_dates(wh, tmp_path):
    days = [d for d in Q.run_sql(Q.connect(wh), "SELECT DISTINCT date FROM ingest_audit ORDER BY 1")["date"]]
    page = render(wh, day=days[0])
    assert f"faultline nightly report: {days[0].isoformat()}" in page
    with pytest.raises(Q.QueryError, match="not in the warehouse"):
        render(wh, day=days[-1] + dt.timedelta(days=30))
    res = CliRunner().invoke(
        report, ["--warehouse", str(wh), "--out", str(tmp_path / "r.html"), "--date", "2001-01-01"]
    )
    assert res.exit_code == 1 and "not in the warehouse" in res.output
    res = CliRunner().invoke(report, ["--warehouse", str(tmp_path / "none"), "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 1 and "run `faultline run`" in res.output


def test_report_command_writes_html_and_markdown(wh, tmp_path):
    res = CliRunner().invoke(report, ["--warehouse", str(wh), "--out", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    res = CliRunner().invoke(report, ["--warehouse", str(wh), "--out", str(tmp_path / "r.md")])
    assert res.exit_code == 0 and (tmp_path / "r.md").read_text().startswith("## faultline nightly report")
    res = CliRunner().invoke(report, ["--warehouse", str(wh), "--out", str(tmp_path / "x.txt"), "--format", "md"])
    assert res.exit_code == 0 and (tmp_path / "x.txt").read_text().startswith("## ")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_page_is_capped_and_says_so(wh):
    con = Q.connect(wh)
    try:
        data = load(con, str(wh))
    finally:
        con.close()
    full = render_html(data)
    small = render_html(data, max_bytes=len(full.encode()) // 2)
    assert len(small.encode()) <= len(full.encode()) // 2
    assert "cut to keep this page under 3 MB" in small
    assert small.count('<article class="pm"') < full.count('<article class="pm"')


# -- Markdown ----------------------------------------------------------------------------------


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_markdown_escapes_and_keeps_tables_intact(md_report):
    for raw in ("<script", "<img", "\x1b", BIDI):
        assert raw not in md_report, repr(raw)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md_report
    assert "\\[U+202E\\]" in md_report
    lines = md_report.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| ---") or line.startswith("| --- "):
            width = _unescaped_pipes(lines[i - 1])
            for row in lines[i + 1 :]:
                if not row.startswith("|"):
                    break
                assert _unescaped_pipes(row) == width, row
    for sid in (
        "The night in numbers",
        "Provider and cluster scoreboard",
        "Failures by category",
        "Lemon nodes",
        "Bad racks",
        "Failed jobs of the night",
        "New unknown signatures",
        "Postmortems",
    ):
        assert sid in md_report


# -- sanitize ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, clean",
    [
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b[1;38;5;196mbold\x1b[m", "bold"),
        ("\x1b]0;pwned title\x07after", "after"),
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("\x9b31mc1", "c1"),
        ("a\u202eb\u2066c\u2069d", "a[U+202E]b[U+2066]c[U+2069]d"),
        ("bell\x07nul\x00", "bell\\x07nul\\x00"),
        ("a lone escape at the end\x1b", "a lone escape at the end\\x1b"),
        ("tab\tand\nnewline", "tab\tand\nnewline"),
        (None, ""),
    ],
)
def test_sanitize(raw, clean):
    assert sanitize(raw) == clean


def test_md_escape_and_slug():
    assert md_escape("a|b`c[d]e<f>g\\h") == "a\\|b\\`c\\[d\\]e&lt;f&gt;g\\\\h"
    assert md_escape("line\nbreak") == "line \u21b5 break"
    assert slug("12345_6") == "12345_6" and slug('"><x y>') == "x_y" and slug("") == "_"
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", slug(HOSTILE_NODE))


# -- explain -----------------------------------------------------------------------------------


def test_explain_job(wh, demo):
    _, info = demo
    res = CliRunner().invoke(explain, ["job", info["jobs"][0], "--warehouse", str(wh)])
    assert res.exit_code == 0, res.output
    out = res.output
    assert "Verdict: gpu_bus_lost (hardware)" in out and f"culprit {info['nodes'][0]}" in out
    assert "decided by" in out and "Timeline (UTC):" in out and "Evidence:" in out
    assert re.search(r"^ \*\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ", out, re.M), "deciding line marked"
    assert "\x1b" not in out and BIDI not in out and "[U+202E]" in out


def test_explain_job_that_did_not_fail_or_does_not_exist(wh):
    con = Q.connect(wh)
    ok = Q.run_sql(con, "SELECT job_id FROM jobs WHERE state = 'COMPLETED' LIMIT 1")["job_id"][0]
    con.close()
    res = CliRunner().invoke(explain, ["job", ok, "--warehouse", str(wh)])
    assert res.exit_code == 0 and "not a failure" in res.output
    res = CliRunner().invoke(explain, ["job", "no-such-job", "--warehouse", str(wh)])
    assert res.exit_code == 1 and "no job 'no-such-job'" in res.output


def test_explain_node(wh, demo):
    _, info = demo
    node = info["nodes"][0]
    res = CliRunner().invoke(explain, ["node", node, "--warehouse", str(wh), "--days", "3"])
    assert res.exit_code == 0, res.output
    out = res.output
    assert f"Node {node}" in out and "95% CI" in out and "cluster" in out and "lemon" in out.lower()
    assert "Incidents in the last 3 day(s)" in out and "gpu_bus_lost" in out
    assert "Infrastructure failures blamed on it" in out and info["jobs"][0] in out
    assert "\x1b" not in out and BIDI not in out
    res = CliRunner().invoke(explain, ["node", HOSTILE_NODE, "--warehouse", str(wh)])
    assert res.exit_code == 0 and "\x1b" not in res.output and BIDI not in res.output
    res = CliRunner().invoke(explain, ["node", node[:-1], "--warehouse", str(wh)])
    assert res.exit_code == 1 and "did you mean" in res.output


# -- export prometheus -------------------------------------------------------------------------

_SAMPLE = re.compile(
    r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*\})? '
    r"(-?[0-9.e+-]+|NaN|[+-]Inf)$"
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def _unescape(v: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), v)


def test_export_prometheus(wh, tmp_path):
    out = tmp_path / "faultline.prom"
    res = CliRunner().invoke(export, ["prometheus", "--warehouse", str(wh), "--out", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    seen_type: set[str] = set()
    samples: dict[str, list[dict]] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            assert kind == "gauge" and name not in seen_type
            seen_type.add(name)
            continue
        m = _SAMPLE.match(line)
        assert m, line
        assert m.group(1) in seen_type, f"sample before its TYPE: {line}"
        labels = {k: _unescape(v) for k, v in _LABEL.findall(m.group(2) or "")}
        samples.setdefault(m.group(1), []).append({**labels, "_v": float(m.group(3))})
    fails = samples["faultline_failures_24h"]
    by_level = {
        lvl: sum(s["_v"] for s in fails if s["level"] == lvl) for lvl in ("node", "rack", "cluster", "provider")
    }
    assert by_level["node"] == by_level["cluster"] == by_level["provider"] >= by_level["rack"]
    assert any(s.get("node") == sanitize(HOSTILE_NODE) for s in fails), "hostile node label round-trips"
    assert any(s.get("rack") == HOSTILE_RACK for s in fails if s["level"] == "rack")
    assert "\x1b" not in text and BIDI not in text
    con = Q.connect(wh)
    n_lemons = Q.run_query(con, "lemon_nodes", {"max_rows": 100000}).height
    con.close()
    assert len(samples.get("faultline_lemon", [])) == n_lemons
    assert "faultline_failure_rate_ci_high_per_1k_node_days" in samples
    assert {"faultline_failed_jobs_24h", "faultline_gpu_hours_lost_24h"} <= set(samples)


def test_prometheus_label_escaping():
    assert label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert label_value(None) == ""
    assert label_value("n\x1b[31m\u202e") == "n[U+202E]"


def test_export_to_stdout_matches_the_function(wh):
    res = CliRunner().invoke(export, ["prometheus", "--warehouse", str(wh)])
    assert res.exit_code == 0
    con = Q.connect(wh)
    try:
        assert res.output == prometheus_text(con)
    finally:
        con.close()


def test_the_lottery_in_dollars_section(html_report, md_report, wh, tmp_path):
    """One section: price paid against the effective price per provider (chart and table), and
    the comparison's statements; without prices.csv, goodput alone and how to add prices."""
    import shutil

    from faultline.analytics.build import build_analytics
    from faultline.lake import views

    costs = Q.run_query(Q.connect(wh), "provider_costs", {"level": "provider"})
    clusters = Q.run_query(Q.connect(wh), "provider_costs", {"level": "cluster"})
    # the injected node's GPU model has no price row: its cluster (and provider) get no dollars
    unpriced = clusters.filter(pl.col("usd_paid").is_null())
    assert unpriced.height == 1 and costs["usd_paid"].null_count() == 1 and costs.height >= 3
    section = html_report[html_report.index('<section id="lottery">') :]
    section = section[: section.index("</section>")]
    assert "The lottery in dollars" in section and 'aria-label="price paid and effective price' in section
    assert section.count('fill="#0b5cad"') == costs.height - 1 == section.count('fill="#c6ccd2"')
    assert f"No price row covers {unpriced['provider'][0]}/{unpriced['cluster'][0]}" in section
    pairs = Q.run_query(Q.connect(wh), "cost_comparison", {"level": "provider"})
    assert pairs.height == costs.height * (costs.height - 1) // 2
    assert all(sanitize(s) in section for s in pairs["statement"].to_list())
    assert (
        "### The lottery in dollars" in md_report
        and "| provider | paid $/GPU-h | effective $/useful GPU-h" in md_report
    )
    # the same warehouse without prices
    bare = tmp_path / "warehouse"
    shutil.copytree(wh, bare, symlinks=True)
    build_analytics(bare)
    views.build(bare)
    assert Q.run_query(Q.connect(bare), "provider_costs", {})["usd_paid"].null_count() == costs.height
    md = render(bare, fmt="md")
    assert "No `prices.csv` was found" in md and "| provider | billed GPU-h | GPU-h lost, infra" in md
    page = render(bare)
    assert 'aria-label="goodput per provider"' in page and "faultline run --prices FILE" in page
    assert page.count('fill="#c6ccd2"') == 0
