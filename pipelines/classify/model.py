"""Learned classifier for the lines the rules call ``unknown`` (scikit-learn, masked templates).
It changes only rule-``unknown`` rows it is sure of, and unpickles only the shipped model whose
sha256 matches its shipped metadata (docs/models.md, "Loading and trust")."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import platform
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
import polars as pl

from .training_data import mask

MODEL_NAME = "unknown_classifier"
MODEL_FILE = f"{MODEL_NAME}.joblib"
META_FILE = f"{MODEL_NAME}.meta.json"
DEFAULT_THRESHOLD = 0.5
# Calling an error-looking line benign hides it, so that answer needs more certainty than naming a cause.
BENIGN_THRESHOLD = 0.8
# The model answers only for a line holding this many distinct content words it was trained on:
# a line of unseen words plus one generic verb ("widget quux failed") is not evidence.
MIN_KNOWN_WORDS = 2
FUNCTION_WORDS = frozenset(
    "the an and or of on in at to for from by with is are was were be been not no this that it as".split()
)
CV_FOLDS = 5
RANDOM_STATE = 0

# Feature extraction, kept small: the shipped file must stay well under 2 MB.
WORD_FEATURES = dict(
    analyzer="word",
    ngram_range=(1, 2),
    lowercase=True,
    sublinear_tf=True,
    min_df=1,
    max_features=4000,
    token_pattern=r"(?u)\b\w\w+\b",
    dtype=np.float32,
)
CHAR_FEATURES = dict(
    analyzer="char_wb",
    ngram_range=(2, 5),
    lowercase=True,
    sublinear_tf=True,
    min_df=2,
    max_features=10000,
    dtype=np.float32,
)
SVM = dict(C=1.0, class_weight="balanced", max_iter=5000)
CALIBRATION = dict(method="sigmoid", cv=3, ensemble=False)


class ModelIntegrityError(RuntimeError):
    """A model file whose sha256 is not one the shipped metadata vouches for."""


@dataclass(frozen=True)
class LoadedModel:
    pipeline: object
    meta: dict = field(repr=False)

    @property
    def version(self) -> str:
        return self.meta.get("version") or self.meta["model_sha256"][:12]

    @property
    def rule_id(self) -> str:
        return f"model:{MODEL_NAME}@{self.version}"

    @property
    def classes(self) -> list[str]:
        return [str(c) for c in self.pipeline.classes_]


# --- training ----------------------------------------------------------------------------------


def make_pipeline():
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import FeatureUnion, Pipeline
    from sklearn.svm import LinearSVC

    features = FeatureUnion([("word", TfidfVectorizer(**WORD_FEATURES)), ("char", TfidfVectorizer(**CHAR_FEATURES))])
    clf = CalibratedClassifierCV(LinearSVC(random_state=RANDOM_STATE, **SVM), **CALIBRATION)
    return Pipeline([("features", features), ("clf", clf)])


def _sha256_pairs(texts: list[str], labels: list[str]) -> str:
    pairs = sorted(zip(texts, labels))
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()


def train(texts, labels, *, sources=None, groups=None, cv: int = CV_FOLDS) -> tuple[object, dict]:
    """Fit the pipeline on ``texts`` (masked again, to be safe) and ``labels``; ``(pipeline, metrics)``.
    Metrics: ``cv``-fold stratified cross-validated figures (folds never split a ``groups`` group:
    one thread's lines are never in train and test at once), per source, class counts, data sha256."""
    from sklearn.base import clone
    from sklearn.metrics import accuracy_score, f1_score, precision_recall_fscore_support
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold, cross_val_predict

    x = mask(list(texts)).to_list()
    y = [str(v) for v in labels]
    if len(x) != len(y):
        raise ValueError(f"{len(x)} texts but {len(y)} labels")
    classes, counts = np.unique(y, return_counts=True)
    metrics: dict = {
        "n_examples": len(x),
        "n_per_class": {str(c): int(n) for c, n in zip(classes, counts)},
        "labels": [str(c) for c in classes],
        "training_data_sha256": _sha256_pairs(x, y),
    }
    pipe = make_pipeline()
    if cv:
        if groups is not None:
            folds = StratifiedGroupKFold(n_splits=cv, shuffle=True, random_state=RANDOM_STATE)
            scheme = f"StratifiedGroupKFold(n_splits={cv}, shuffle=True, random_state={RANDOM_STATE})"
            pred = cross_val_predict(clone(pipe), x, y, cv=folds, groups=[str(g) for g in groups])
        else:
            folds = StratifiedKFold(n_splits=cv, shuffle=True, random_state=RANDOM_STATE)
            scheme = f"StratifiedKFold(n_splits={cv}, shuffle=True, random_state={RANDOM_STATE})"
            pred = cross_val_predict(clone(pipe), x, y, cv=folds)
        p, r, f, s = precision_recall_fscore_support(y, pred, labels=classes, zero_division=0)
        metrics["cv"] = {
            "folds": cv,
            "scheme": scheme,
            "accuracy": round(float(accuracy_score(y, pred)), 4),
            "macro_f1": round(float(f1_score(y, pred, average="macro")), 4),
            "per_class": {
                str(c): {
                    "precision": round(float(pi), 4),
                    "recall": round(float(ri), 4),
                    "f1": round(float(fi), 4),
                    "support": int(si),
                }
                for c, pi, ri, fi, si in zip(classes, p, r, f, s)
            },
        }
        if sources is not None:
            src = np.array([str(s_).split(":")[0] for s_ in sources])
            ok = np.array(pred) == np.array(y)
            metrics["cv"]["accuracy_by_source"] = {
                str(k): {"accuracy": round(float(ok[src == k].mean()), 4), "n": int((src == k).sum())}
                for k in sorted(set(src))
            }
    pipe.fit(x, y)
    return pipe, metrics


def describe_features(pipeline) -> dict:
    union = pipeline.named_steps["features"]
    out = {"input": "masked template (faultline.classify.engine.mask_template)"}
    for name, vec in union.transformer_list:
        params = {
            k: v
            for k, v in vec.get_params().items()
            if k in ("analyzer", "ngram_range", "lowercase", "sublinear_tf", "min_df", "max_features", "token_pattern")
        }
        params["ngram_range"] = list(params["ngram_range"])
        if params["analyzer"] != "word":
            params.pop("token_pattern", None)
        params["n_features"] = len(vec.vocabulary_)
        out[name] = {"vectorizer": "TfidfVectorizer", **params}
    clf = pipeline.named_steps["clf"]
    out["classifier"] = {
        "estimator": "LinearSVC",
        **{k: v for k, v in SVM.items()},
        "calibration": "CalibratedClassifierCV",
        **CALIBRATION,
    }
    out["classifier"]["class_weight"] = str(out["classifier"]["class_weight"])
    out["classes"] = [str(c) for c in clf.classes_]
    return out


def save(pipeline, metrics: dict, path: str | Path) -> dict:
    """Write ``<path>/unknown_classifier.joblib`` and its ``.meta.json``; returns the metadata."""
    import joblib
    import sklearn

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    joblib.dump(pipeline, buf, compress=("zlib", 6))
    blob = buf.getvalue()
    sha = hashlib.sha256(blob).hexdigest()
    meta = {
        "name": MODEL_NAME,
        "version": sha[:12],
        "created": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "sklearn_version": sklearn.__version__,
        "numpy_version": np.__version__,
        "joblib_version": joblib.__version__,
        "python_version": platform.python_version(),
        "features": describe_features(pipeline),
        "labels": metrics["labels"],
        "default_threshold": DEFAULT_THRESHOLD,
        "benign_threshold": BENIGN_THRESHOLD,
        "training_data_sha256": metrics["training_data_sha256"],
        "n_examples": metrics["n_examples"],
        "n_per_class": metrics["n_per_class"],
        "metrics": {k: v for k, v in metrics.items() if k == "cv"},
        "model_file": MODEL_FILE,
        "model_bytes": len(blob),
        "model_sha256": sha,
    }
    tmp = out / (MODEL_FILE + ".tmp")
    tmp.write_bytes(blob)
    tmp.replace(out / MODEL_FILE)
    (out / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=False) + "\n")
    return meta


# --- loading -----------------------------------------------------------------------------------


def _shipped():
    return resources.files("faultline.models").joinpath("trained")


def shipped_meta() -> dict:
    return json.loads(_shipped().joinpath(META_FILE).read_bytes())


def _trusted_hashes(meta: dict) -> set[str]:
    return {meta["model_sha256"], *meta.get("trusted_sha256", [])}


def _unpickle(blob: bytes, meta: dict):
    import joblib
    import sklearn

    if meta.get("sklearn_version") and meta["sklearn_version"] != sklearn.__version__:
        warnings.warn(
            f"{MODEL_FILE} was trained with scikit-learn {meta['sklearn_version']}, running "
            f"{sklearn.__version__}; retrain with `faultline train-classifier`",
            stacklevel=3,
        )
    return joblib.load(io.BytesIO(blob))


def load_model(path: str | Path | None = None) -> LoadedModel:
    """The shipped model, verified against its metadata before it is unpickled. ``path`` (a model
    file, or a folder holding one) is accepted only when the *shipped* metadata names its sha256;
    anything else raises :class:`ModelIntegrityError` without being unpickled."""
    if path is None:
        return _load_shipped()
    p = Path(path)
    file = p / MODEL_FILE if p.is_dir() else p
    blob = file.read_bytes()
    sha = hashlib.sha256(blob).hexdigest()
    meta = shipped_meta()
    if sha not in _trusted_hashes(meta):
        raise ModelIntegrityError(
            f"refusing to load {file}: sha256 {sha[:16]}... is not a model the shipped metadata names "
            f"(faultline only unpickles its own shipped model; retrain into the package with "
            f"`faultline train-classifier`)"
        )
    return LoadedModel(_unpickle(blob, meta), meta)


@lru_cache(maxsize=1)
def _load_shipped() -> LoadedModel:
    root = _shipped()
    meta = json.loads(root.joinpath(META_FILE).read_bytes())
    blob = root.joinpath(meta.get("model_file", MODEL_FILE)).read_bytes()
    sha = hashlib.sha256(blob).hexdigest()
    if sha != meta["model_sha256"]:
        raise ModelIntegrityError(
            f"shipped {MODEL_FILE} does not match its metadata (sha256 {sha[:16]}... "
            f"!= {meta['model_sha256'][:16]}...); refusing to unpickle it"
        )
    return LoadedModel(_unpickle(blob, meta), meta)


def clear_cache() -> None:
    """Forget the loaded shipped model (after retraining into the package)."""
    _load_shipped.cache_clear()


# --- prediction --------------------------------------------------------------------------------


def predict_proba_top(texts: pl.Series, model: LoadedModel) -> pl.DataFrame:
    """Top class and its probability for each *masked* text, computed once per distinct text."""
    uniq = texts.unique(maintain_order=True)
    if uniq.len() == 0:
        return pl.DataFrame(
            {"text": [], "top": [], "p": [], "known": []},
            schema={"text": pl.String, "top": pl.String, "p": pl.Float64, "known": pl.Int64},
        )
    docs = uniq.to_list()
    proba = model.pipeline.predict_proba(docs)
    idx = proba.argmax(axis=1)
    classes = np.asarray(model.classes, dtype=object)
    return pl.DataFrame(
        {
            "text": uniq,
            "top": classes[idx].tolist(),
            "p": proba[np.arange(len(idx)), idx],
            "known": known_words(docs, model),
        },
        schema={"text": pl.String, "top": pl.String, "p": pl.Float64, "known": pl.Int64},
    )


def _content_columns(model: LoadedModel):
    """The word vectorizer and the columns of its single-word, non-function-word features."""
    words = dict(model.pipeline.named_steps["features"].transformer_list)["word"]
    cols = [i for w, i in words.vocabulary_.items() if " " not in w and w not in FUNCTION_WORDS]
    return words, np.array(cols, dtype=np.int64)


def known_words(docs: list[str], model: LoadedModel) -> np.ndarray:
    """How many distinct trained content words each (masked) text holds: one sparse product, no loop."""
    words, cols = _content_columns(model)
    return np.asarray((words.transform(docs)[:, cols] != 0).sum(axis=1)).ravel().astype(np.int64)


def predict(
    messages: pl.Series,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    benign_threshold: float = BENIGN_THRESHOLD,
    model: LoadedModel | None = None,
) -> pl.DataFrame:
    """One row per message: ``category`` (``unknown`` below ``threshold``, or below
    ``benign_threshold`` where the top class is ``benign``, or with fewer than ``MIN_KNOWN_WORDS``
    trained content words) and ``confidence`` (the top class's probability). Messages are masked
    here; empty and null messages are ``unknown``, confidence 0."""
    model = model or load_model()
    texts = mask(messages)
    top = predict_proba_top(texts.filter(texts.str.strip_chars() != ""), model)
    df = pl.DataFrame({"text": texts}).join(top, on="text", how="left", maintain_order="left")
    bar = pl.when(pl.col("top") == "benign").then(pl.lit(benign_threshold)).otherwise(pl.lit(threshold))
    return df.select(
        category=pl.when((pl.col("p") >= bar) & (pl.col("known") >= MIN_KNOWN_WORDS))
        .then(pl.col("top"))
        .otherwise(pl.lit("unknown")),
        confidence=pl.col("p").fill_null(0.0),
    )


def _event_text(events: pl.DataFrame) -> pl.Expr:
    """The text the model reads for an event: the whole message (joined lines on one line),
    or the template when there is no message column."""
    if "message" in events.columns:
        return pl.col("message").str.replace_all("\n", " ", literal=True)
    return pl.col("template")


def placed_by_subject() -> pl.Expr:
    """Rows an error word and a subsystem's name placed (models/fallback.yaml ``subjects``): a
    guess the model may overrule."""
    return pl.col("rule_id").fill_null("").str.starts_with("fallback:") & (pl.col("category") != "benign")


def open_to_model(columns: list[str]) -> pl.Expr:
    """Rows no rule names, for a frame with these columns: ``unknown``, or placed by subject."""
    unnamed = pl.col("category") == "unknown"
    return unnamed | placed_by_subject() if "rule_id" in columns else unnamed


def apply_model(
    events: pl.DataFrame,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    benign_threshold: float = BENIGN_THRESHOLD,
    model: LoadedModel | None = None,
    domains: dict[str, str] | None = None,
) -> pl.DataFrame:
    """Upgrade rule-``unknown`` rows, and error lines placed only by the subsystem they name
    (``fallback:<subject>``), where the model's top class reaches ``threshold`` (``benign``:
    ``benign_threshold``): ``category``, ``rule_id`` (``model:unknown_classifier@<version>``) and
    ``domain`` follow it. Adds ``model_confidence`` (null where the rules decided); other rows and
    the row order are kept."""
    if "model_confidence" in events.columns:
        events = events.drop("model_confidence")
    unk = open_to_model(events.columns)
    n_unk = events.select(unk.sum()).item() if events.height else 0
    if not n_unk:
        return events.with_columns(model_confidence=pl.lit(None, pl.Float64))
    model = model or load_model()
    if domains is None and "domain" in events.columns:
        from .ruleset import load_ruleset

        domains = load_ruleset().taxonomy.domains
    ev = events.with_row_index("_mrow")
    sub = ev.filter(unk).select("_mrow", _event_text(ev).alias("_mtext"))
    pred = predict(sub["_mtext"], threshold=threshold, benign_threshold=benign_threshold, model=model)
    upd = sub.select("_mrow").with_columns(_mcat=pred["category"], model_confidence=pred["confidence"])
    ev = ev.join(upd, on="_mrow", how="left", maintain_order="left")
    hit = pl.col("_mcat").is_not_null() & (pl.col("_mcat") != "unknown")
    cols = [pl.when(hit).then(pl.col("_mcat")).otherwise(pl.col("category")).alias("category")]
    if "rule_id" in ev.columns:
        cols.append(pl.when(hit).then(pl.lit(model.rule_id)).otherwise(pl.col("rule_id")).alias("rule_id"))
    else:
        cols.append(pl.when(hit).then(pl.lit(model.rule_id)).otherwise(pl.lit(None, pl.String)).alias("rule_id"))
    if "domain" in ev.columns:
        cols.append(
            pl.when(hit)
            .then(pl.col("_mcat").replace_strict(domains, default="unknown"))
            .otherwise(pl.col("domain"))
            .alias("domain")
        )
    return ev.with_columns(cols).drop("_mrow", "_mcat")
