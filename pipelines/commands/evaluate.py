"""``faultline evaluate``: score a warehouse against a simulator's ``_truth/``."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command()
@click.option(
    "--truth",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    required=True,
    help="The _truth/ folder the simulator wrote beside the landing folder.",
)
@click.option(
    "--warehouse", type=click.Path(path_type=Path), envvar="FAULTLINE_WAREHOUSE", default="warehouse", show_default=True
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option("--strict", is_flag=True, help="Exit 1 when a figure misses its floor.")
def evaluate(truth, warehouse, as_json, strict):
    """Score the warehouse against a simulator's truth, each figure against its floor: root-cause
    macro-F1, unknown share, culprit accuracy, lemon precision and recall (over the lemons that
    manifested), bad racks found, provider rates covered; a share of nothing is n/a (docs/evaluation.md)."""
    from ..simulate.evaluate import FLOORS
    from ..simulate.evaluate import evaluate as score
    from ..simulate.truth import MANIFESTED_MIN_FAULTS

    try:
        res = score(truth, warehouse)
    except FileNotFoundError as exc:
        raise click.ClickException(f"{exc}; run `faultline run` on the simulated landing folder first") from exc
    fig, ok = res["figures"], res["passed"]
    if as_json:
        click.echo(json.dumps({"figures": fig, "passed": ok, "per_class_f1": res["per_class_f1"]}, indent=1))
    else:
        for k, v in fig.items():
            floor = FLOORS.get(k)
            verdict = "n/a " if ok.get(k) is None else "ok  " if ok[k] else "MISS"
            mark = "" if floor is None else f"  {verdict} ({'<=' if k == 'unknown_share' else '>='} {floor})"
            click.echo(f"{k:28} {'n/a' if v is None else v}{mark}")
        click.echo(
            f"\nlemon_recall is over the {fig['lemons_manifested']} lemons that manifested (their failing part "
            f"logged >= {MANIFESTED_MIN_FAULTS} faults in the window); lemon_recall_all_injected is over all "
            f"{fig['lemons_injected']} injected lemons; lemon_precision counts a flag on any injected lemon as right."
        )
        click.echo("\nper-category F1: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(res["per_class_f1"].items())))
        rates = res["provider_rates"]
        click.echo(
            '\nprovider rates: true = interruptions expected per 1,000 calendar node-days (TRUTH.md, "Which '
            'faults are interruptions"); up-time = the generation rate per up node-day, scored before'
        )
        for r in rates.iter_rows(named=True):
            click.echo(
                f"  {r['provider']:12} true {r['true_rate']:8.2f}  measured {r['rate_per_1k'] or 0:8.2f} "
                f"[{r['ci_low'] or 0:.2f}, {r['ci_high'] or 0:.2f}] per 1,000 node-days  "
                f"{'covered' if r['covered'] else 'NOT covered'}  (up-time {r['up_time_rate']:.2f}: "
                f"{'covered' if r['covered_up_time_rate'] else 'not covered'})"
            )
        costs = res.get("provider_costs")
        if costs is not None:
            click.echo(
                '\nlost GPU-hours and goodput (TRUTH.md, "Goodput and cost"): true against measured; goodput '
                "with its 95% interval"
            )
            for r in costs.iter_rows(named=True):
                click.echo(
                    f"  {r['provider']:12} lost {r['true_lost']:10,.1f} measured {r['lost'] or 0:10,.1f} "
                    f"({100 * (r['lost_error'] or 0):+.1f}%)  goodput {r['true_goodput']:.4f} measured "
                    f"{r['goodput'] or 0:.4f} [{r['goodput_low'] or 0:.4f}, {r['goodput_high'] or 0:.4f}]  "
                    f"{'covered' if r['goodput_covered'] else 'NOT covered'}"
                )
    if strict and any(v is False for v in ok.values()):
        raise SystemExit(1)
