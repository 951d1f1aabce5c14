"""New failure signatures of the ``unknown`` events, and node failure profiles (scikit-learn,
deterministic): templates clustered by TF-IDF cosine distance, nodes by their mix of incident
categories (docs/models.md, "Signatures and node profiles")."""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import polars as pl

from ..classify.model import (
    DEFAULT_THRESHOLD,
    MIN_KNOWN_WORDS,
    LoadedModel,
    load_model,
    open_to_model,
    predict_proba_top,
)
from ..classify.training_data import mask

DISTANCE_THRESHOLD = 0.4  # cosine distance under which two template keys are one signature
MAX_CLUSTERED_KEYS = 2000  # the most frequent keys are clustered; rarer ones stay on their own
MAX_LISTED_TEMPLATES = 20  # templates listed per signature (most frequent first)
DOMINANT_SHARE = 0.2  # a category with this mean share of a profile cluster is dominant

SIGNATURE_SCHEMA = pl.Schema(
    {
        "signature_id": pl.String,
        "template": pl.String,
        "example": pl.String,
        "count": pl.Int64,
        "n_templates": pl.Int64,
        "templates": pl.List(pl.String),
        "n_nodes": pl.Int64,
        "nodes": pl.List(pl.String),
        "families": pl.List(pl.String),
        "first_seen": pl.Datetime("us", "UTC"),
        "last_seen": pl.Datetime("us", "UTC"),
        "first_day": pl.Date,
        "last_day": pl.Date,
        "n_jobs": pl.Int64,
        "clusters": pl.List(pl.String),
        "sample_source": pl.String,
        "predicted_category": pl.String,
        "confidence": pl.Float64,
        "resolved_by_model": pl.Boolean,
    }
)

PROFILE_SCHEMA = pl.Schema(
    {
        "provider": pl.String,
        "cluster": pl.String,
        "rack": pl.String,
        "node": pl.String,
        "n_incidents": pl.Int64,
        "top_category": pl.String,
        "top_share": pl.Float64,
        "profile_cluster": pl.Int32,
        "cluster_size": pl.Int64,
        "dominant_categories": pl.List(pl.String),
        "rate_per_1k": pl.Float64,
    }
)


def template_key(template: pl.Expr) -> pl.Expr:
    """Digit-insensitive, case- and space-folded key of a masked template."""
    return template.str.replace_all(r"\d+", "#").str.replace_all(r"\s+", " ").str.strip_chars().str.to_lowercase()


def signature_id(key: str) -> str:
    return hashlib.sha1(key.encode()).hexdigest()[:12]


def _cluster_keys(keys: list[str], distance_threshold: float) -> np.ndarray:
    """Cluster label per key (keys are distinct); deterministic for the same input."""
    n = len(keys)
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    from scipy.sparse import hstack
    from sklearn.cluster import AgglomerativeClustering
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    word = TfidfVectorizer(analyzer="word", ngram_range=(1, 2), token_pattern=r"[^\s:,;()\[\]{}=]+", sublinear_tf=True)
    char = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True)
    x = normalize(hstack([word.fit_transform(keys), char.fit_transform(keys)]).tocsr())
    # cosine distances from the sparse vectors: n x n dense, never n x features
    dist = np.clip(1.0 - (x @ x.T).toarray(), 0.0, 2.0)
    np.fill_diagonal(dist, 0.0)
    agg = AgglomerativeClustering(
        n_clusters=None, distance_threshold=distance_threshold, metric="precomputed", linkage="average"
    )
    return agg.fit_predict(dist)


def _model_or_none(model: LoadedModel | None) -> LoadedModel | None:
    if model is not None:
        return model
    try:
        return load_model()
    except FileNotFoundError:
        warnings.warn("no shipped unknown_classifier: signatures carry no predicted category", stacklevel=3)
        return None


def unknown_signatures(
    events: pl.DataFrame,
    *,
    model: LoadedModel | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    distance_threshold: float = DISTANCE_THRESHOLD,
    max_clustered_keys: int = MAX_CLUSTERED_KEYS,
) -> pl.DataFrame:
    """One row per signature of the events no rule names (``unknown``, or placed only by the
    subsystem they name; pass the lake's ``events``; each message is masked here, so days ingested
    before a mask change group alike), most frequent first: templates, nodes, days, jobs, example
    and its source, the model's guess (docs/tables.md)."""
    if "category" not in events.columns:
        raise ValueError("events need a `category` column")
    ev = events.filter(open_to_model(events.columns))
    if ev.is_empty():
        return pl.DataFrame(schema=SIGNATURE_SCHEMA)
    # masked here from the message (the lake's template was masked by whichever faultline
    # wrote that day), so old and new days group alike; the template when there is no message
    if "message" in ev.columns:
        ev = ev.with_columns(_t=mask(ev["message"].str.split("\n").list.first()))
        if "template" in ev.columns:
            ev = ev.with_columns(_t=pl.when(pl.col("_t") == "").then(pl.col("template")).otherwise(pl.col("_t")))
    else:
        ev = ev.with_columns(_t=pl.col("template").fill_null(""))

    def col(name: str, dtype) -> pl.Expr:
        return pl.col(name) if name in ev.columns else pl.lit(None, dtype)

    where = (
        pl.concat_str([pl.col("provider"), pl.col("cluster")], separator="/")
        if {"provider", "cluster"} <= set(ev.columns)
        else pl.lit(None, pl.String)
    )
    ref = (
        pl.concat_str([pl.col("source"), pl.col("line_no").cast(pl.String)], separator=":")
        if {"source", "line_no"} <= set(ev.columns)
        else pl.lit(None, pl.String)
    )
    ev = ev.with_columns(
        _key=template_key(pl.col("_t")),
        _ts=col("ts", pl.Datetime("us", "UTC")),
        _day=col("date", pl.Date),
        _node=col("node", pl.String),
        _job=col("job_id", pl.String),
        _where=where,
        _ref=ref,
        _family=col("family", pl.String),
        _raw=(pl.col("raw") if "raw" in ev.columns else pl.col("message") if "message" in ev.columns else pl.col("_t"))
        .str.split("\n")
        .list.first(),
        _rep=pl.col("repeats").fill_null(1) if "repeats" in ev.columns else pl.lit(1, pl.Int32),
    ).with_row_index("_i")

    per_tpl = ev.group_by("_key", "_t").agg(pl.col("_rep").sum().alias("_n"))
    per_key = per_tpl.group_by("_key").agg(pl.col("_n").sum()).sort(["_n", "_key"], descending=[True, False])
    keys = per_key["_key"].to_list()
    head = keys[:max_clustered_keys]
    labels = _cluster_keys(head, distance_threshold)
    offset = int(labels.max()) + 1 if len(labels) else 0
    label_of = dict(zip(head, labels.tolist()))
    label_of.update({k: offset + i for i, k in enumerate(keys[max_clustered_keys:])})
    key_map = pl.DataFrame(
        {"_key": keys, "_sig": [label_of[k] for k in keys]}, schema={"_key": pl.String, "_sig": pl.Int64}
    )

    per_tpl = per_tpl.join(key_map, on="_key")
    # representative: the most frequent template of the signature (ties: the shortest, then
    # the first in sort order), so the same data always gives the same signature id
    rep = (
        per_tpl.sort(["_sig", "_n", pl.col("_t").str.len_chars(), "_t"], descending=[False, True, False, False])
        .group_by("_sig", maintain_order=True)
        .first()
        .select("_sig", pl.col("_t").alias("template"), pl.col("_key").alias("_rkey"))
    )
    ev = ev.join(key_map, on="_key")
    variants = (
        per_tpl.sort(["_sig", "_n", "_t"], descending=[False, True, False])
        .group_by("_sig", maintain_order=True)
        .agg(pl.col("_t").head(MAX_LISTED_TEMPLATES).alias("templates"))
    )
    example = (
        ev.join(rep, on="_sig")
        .filter(pl.col("_t") == pl.col("template"))
        .sort(["_day", "_ts", "_ref", "_i"], nulls_last=True)
        .group_by("_sig", maintain_order=True)
        .agg(pl.col("_raw").first().alias("example"), pl.col("_ref").first().alias("sample_source"))
    )
    agg = ev.group_by("_sig").agg(
        pl.col("_rep").sum().cast(pl.Int64).alias("count"),
        pl.col("_t").n_unique().cast(pl.Int64).alias("n_templates"),
        pl.col("_node").drop_nulls().unique().sort().alias("nodes"),
        pl.col("_family").drop_nulls().unique().sort().alias("families"),
        pl.col("_ts").min().alias("first_seen"),
        pl.col("_ts").max().alias("last_seen"),
        pl.col("_day").min().alias("first_day"),
        pl.col("_day").max().alias("last_day"),
        pl.col("_job").drop_nulls().n_unique().cast(pl.Int64).alias("n_jobs"),
        pl.col("_where").drop_nulls().unique().sort().alias("clusters"),
    )
    out = (
        agg.join(rep, on="_sig")
        .join(variants, on="_sig")
        .join(example, on="_sig", how="left")
        .with_columns(
            signature_id=pl.col("_rkey").map_elements(signature_id, return_dtype=pl.String),
            n_nodes=pl.col("nodes").list.len().cast(pl.Int64),
        )
    )

    mdl = _model_or_none(model)
    if mdl is not None:
        top = predict_proba_top(out["template"].unique(), mdl)
        out = out.join(
            top.rename({"text": "template", "top": "predicted_category", "p": "confidence"}), on="template", how="left"
        )
    else:
        out = out.with_columns(
            predicted_category=pl.lit(None, pl.String), confidence=pl.lit(None, pl.Float64), known=pl.lit(0)
        )
    resolved = (pl.col("confidence") >= threshold) & (pl.col("known") >= MIN_KNOWN_WORDS)
    out = out.with_columns(resolved_by_model=resolved.fill_null(False))
    out = out.sort(["count", "signature_id"], descending=[True, False])
    return out.select([pl.col(c).cast(t) for c, t in SIGNATURE_SCHEMA.items()])


# --- node failure profiles ---------------------------------------------------------------------


def _choose_k(x: np.ndarray, k_max: int, random_state: int) -> np.ndarray:
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    n = x.shape[0]
    distinct = np.unique(np.round(x, 6), axis=0).shape[0]
    ks = range(2, min(k_max, distinct, n - 1) + 1)
    best, best_labels = -np.inf, np.zeros(n, dtype=np.int64)
    for k in ks:
        labels = KMeans(n_clusters=k, n_init=10, random_state=random_state).fit_predict(x)
        if len(set(labels.tolist())) < 2:
            continue
        score = silhouette_score(x, labels, sample_size=min(n, 2000), random_state=random_state)
        if score > best + 1e-9:  # ties keep the smaller k
            best, best_labels = score, labels
    return best_labels


def node_failure_profiles(
    incidents: pl.DataFrame,
    node_health: pl.DataFrame | None = None,
    *,
    k_max: int = 8,
    random_state: int = 0,
    dominant_share: float = DOMINANT_SHARE,
) -> pl.DataFrame:
    """Nodes with at least one incident, clustered by their per-category incident mix: KMeans on the
    square roots of the shares (Hellinger distance), k = 2..``k_max`` by silhouette, clusters
    numbered largest first. Columns: docs/tables.md, ``node_profiles``."""
    keys = ["provider", "cluster", "node"]
    inc = incidents.filter(pl.col("node").is_not_null() & pl.col("category").is_not_null())
    if inc.is_empty():
        return pl.DataFrame(schema=PROFILE_SCHEMA)
    counts = inc.group_by(*keys, "category").agg(pl.len().alias("n")).sort(*keys, "category")
    wide = counts.pivot(on="category", index=keys, values="n", sort_columns=True).fill_null(0).sort(keys)
    cats = [c for c in wide.columns if c not in keys]
    mat = wide.select(cats).to_numpy().astype(float)
    total = mat.sum(axis=1)
    share = mat / total[:, None]
    x = np.sqrt(share)
    n = x.shape[0]
    labels = _choose_k(x, k_max, random_state) if n >= 3 else np.zeros(n, dtype=np.int64)

    # renumber: largest cluster first, ties by its dominant category name
    groups = sorted(set(labels.tolist()))
    mean_share = {g: share[labels == g].mean(axis=0) for g in groups}
    order = sorted(groups, key=lambda g: (-(labels == g).sum(), cats[int(np.argmax(mean_share[g]))]))
    renum = {g: i for i, g in enumerate(order)}
    dom = {}
    for g in groups:
        ms = mean_share[g]
        idx = [i for i in np.argsort(-ms, kind="stable") if ms[i] >= dominant_share] or [int(np.argmax(ms))]
        dom[renum[g]] = [cats[i] for i in idx]
    lab = np.array([renum[g] for g in labels.tolist()], dtype=np.int32)
    top_idx = share.argmax(axis=1)
    out = (
        wide.select(keys)
        .with_columns(
            n_incidents=pl.Series(total.astype(np.int64)),
            top_category=pl.Series([cats[i] for i in top_idx], dtype=pl.String),
            top_share=pl.Series(share[np.arange(n), top_idx]),
            profile_cluster=pl.Series(lab, dtype=pl.Int32),
            dominant_categories=pl.Series([dom[int(v)] for v in lab], dtype=pl.List(pl.String)),
        )
        .with_columns(cluster_size=pl.len().over("profile_cluster").cast(pl.Int64))
    )

    rack = inc.group_by(keys).agg(pl.col("rack").drop_nulls().first()) if "rack" in inc.columns else None
    out = out.join(rack, on=keys, how="left") if rack is not None else out.with_columns(rack=pl.lit(None, pl.String))
    if node_health is not None and "rate_per_1k" in node_health.columns:
        nh = node_health.select(
            *keys,
            pl.col("rate_per_1k").cast(pl.Float64),
            *([pl.col("rack").alias("_nh_rack")] if "rack" in node_health.columns else []),
        )
        out = out.join(nh, on=keys, how="left")
        if "_nh_rack" in out.columns:
            out = out.with_columns(rack=pl.coalesce("rack", "_nh_rack")).drop("_nh_rack")
    else:
        out = out.with_columns(rate_per_1k=pl.lit(None, pl.Float64))
    out = out.sort(
        ["profile_cluster", "n_incidents", "provider", "cluster", "node"], descending=[False, True, False, False, False]
    )
    return out.select([pl.col(c).cast(t) for c, t in PROFILE_SCHEMA.items()])
