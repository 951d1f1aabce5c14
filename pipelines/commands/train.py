"""``faultline train-classifier``: rebuild the training set, cross-validate, retrain, save. Without
``--out`` the model goes into the package, the only place faultline loads one from (docs/models.md).
Also runnable as ``python -m faultline.commands.train [--out DIR]``."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

import click


def default_out() -> Path:
    """The package's ``trained/`` folder (a real folder in source and editable installs)."""
    return Path(str(resources.files("faultline.models").joinpath("trained")))


def train_and_save(out: str | Path | None = None, *, cv: int = 5) -> dict:
    """Build the training set, train with ``cv``-fold cross-validation, save; the metadata."""
    from ..classify import model
    from ..classify.training_data import build_training_set, cv_groups

    df = build_training_set()
    groups = cv_groups(df["source"], df["text"])
    pipe, metrics = model.train(df["text"], df["label"], sources=df["source"], groups=groups, cv=cv)
    target = Path(out) if out is not None else default_out()
    meta = model.save(pipe, metrics, target)
    if out is None:
        model.clear_cache()
    return meta


def summary(meta: dict) -> str:
    cv = meta["metrics"].get("cv", {})
    lines = [
        f"unknown_classifier {meta['version']}: {meta['n_examples']} examples, "
        f"{len(meta['labels'])} classes, {meta['model_bytes'] / 1e6:.2f} MB"
    ]
    if cv:
        lines.append(f"{cv['folds']}-fold CV: accuracy {cv['accuracy']:.3f}, macro-F1 {cv['macro_f1']:.3f}")
        for src, v in cv.get("accuracy_by_source", {}).items():
            lines.append(f"  accuracy on {src} lines: {v['accuracy']:.3f} (n={v['n']})")
        lines.append(f"  {'class':20} {'prec':>6} {'recall':>6} {'f1':>6} {'n':>5}")
        for c, v in cv["per_class"].items():
            lines.append(f"  {c:20} {v['precision']:6.3f} {v['recall']:6.3f} {v['f1']:6.3f} {v['support']:5d}")
    return "\n".join(lines)


@click.command("train-classifier")
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write the model and its metadata here instead of into the package "
    "(faultline only loads the model shipped in the package).",
)
@click.option(
    "--cv",
    "cv",
    type=click.IntRange(0, 20),
    default=5,
    show_default=True,
    help="Cross-validation folds for the reported figures (0: skip).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the metadata as JSON.")
def train_classifier(out: Path | None, cv: int, as_json: bool) -> None:
    """Retrain the classifier for lines the rules call `unknown` (rule examples, curated
    lines, the real-line corpus's dev split, synthetic benign lines), report cross-validated
    accuracy and macro-F1 (folds grouped by source), and write the model and its metadata."""
    meta = train_and_save(out, cv=cv)
    where = out if out is not None else default_out()
    if as_json:
        click.echo(json.dumps(meta, indent=2))
    else:
        click.echo(summary(meta))
    click.echo(
        f"wrote {where / meta['model_file']} and its .meta.json (sha256 {meta['model_sha256'][:16]}...)", err=True
    )


def main(argv: list[str] | None = None) -> None:
    train_classifier.main(args=argv if argv is not None else sys.argv[1:], prog_name="faultline train-classifier")


if __name__ == "__main__":
    main()
