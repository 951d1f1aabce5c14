"""The ``faultline`` command line: a thin group; each command lives in ``commands/``."""

from __future__ import annotations

import gc

import click

from . import __version__
from .commands.classify import classify
from .commands.demo import demo
from .commands.diagnose import diagnose
from .commands.drain import drain_list
from .commands.evaluate import evaluate
from .commands.explain import explain
from .commands.export import export
from .commands.known import known
from .commands.report import report
from .commands.run import run
from .commands.serve import serve
from .commands.simulate import simulate
from .commands.sql import sql
from .commands.ticket import ticket
from .commands.train import train_classifier


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="faultline")
def main() -> None:
    """faultline: log and incident analytics for GPU training clusters. Classifies every line of
    kernel, NVIDIA, NCCL/PyTorch and Slurm logs, attributes failed jobs to root causes and culprit
    nodes, and reports per node, rack and provider (details: docs/*.md)."""


@main.result_callback()
def _done(*_result, **_params) -> None:
    """After a command has finished: freeze every object out of the cyclic GC, so that the
    interpreter's exit skips a last collection over Dagster's heap."""
    gc.freeze()


main.add_command(classify)
main.add_command(diagnose)
main.add_command(run)
main.add_command(simulate)
main.add_command(demo)
main.add_command(evaluate)
main.add_command(train_classifier)
main.add_command(sql)
main.add_command(report)
main.add_command(explain)
main.add_command(export)
main.add_command(known)
main.add_command(ticket)
main.add_command(drain_list)
main.add_command(serve)

if __name__ == "__main__":
    main()
