"""Exact Poisson intervals and tests, Benjamini-Hochberg (vectorized over numpy arrays)."""

from __future__ import annotations

import numpy as np
from scipy import stats


def poisson_ci(k, exposure, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Exact (Garwood) interval for a rate k / exposure."""
    k = np.asarray(k, dtype=float)
    e = np.asarray(exposure, dtype=float)
    a = 1.0 - level
    lo = np.where(k > 0, stats.chi2.ppf(a / 2, 2 * k) / 2, 0.0)
    hi = stats.chi2.ppf(1 - a / 2, 2 * k + 2) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(e > 0, lo / e, np.nan), np.where(e > 0, hi / e, np.nan)


def poisson_excess_p(k, expected) -> np.ndarray:
    """P(X >= k) for X ~ Poisson(expected): how surprising a count this high is."""
    k = np.asarray(k, dtype=float)
    return np.where(k > 0, stats.poisson.sf(k - 1, np.maximum(np.asarray(expected, float), 1e-12)), 1.0)


def bh_reject(p, q: float, n_tests: int | None = None) -> np.ndarray:
    """Benjamini-Hochberg: which hypotheses are rejected at false discovery rate q.
    ``n_tests``: the size of the whole family when ``p`` lists only some of it (the others,
    p = 1, were not worth listing: GPUs with no incident at all)."""
    p = np.asarray(p, dtype=float)
    n = len(p)
    if n == 0:
        return np.zeros(0, dtype=bool)
    m = max(n, n_tests or 0)
    order = np.argsort(p)
    thresh = q * np.arange(1, n + 1) / m
    passed = p[order] <= thresh
    k = np.max(np.nonzero(passed)[0]) + 1 if passed.any() else 0
    out = np.zeros(n, dtype=bool)
    out[order[:k]] = True
    return out


def rate_ratio_ci(k1, e1, k2, e2, level: float = 0.95) -> tuple[float, float, float]:
    """Ratio of two Poisson rates with the exact conditional (Clopper-Pearson) interval."""
    n = k1 + k2
    if e1 <= 0 or e2 <= 0:
        return float("nan"), float("nan"), float("nan")
    ratio = (k1 / e1) / (k2 / e2) if k2 > 0 else float("inf")
    if n == 0:
        return float("nan"), 0.0, float("inf")
    a = 1 - level
    plo = stats.beta.ppf(a / 2, k1, n - k1 + 1) if k1 > 0 else 0.0
    phi = stats.beta.ppf(1 - a / 2, k1 + 1, n - k1) if k1 < n else 1.0
    scale = e2 / e1
    lo = plo / (1 - plo) * scale
    hi = phi / (1 - phi) * scale if phi < 1 else float("inf")
    return ratio, lo, hi


def node_days_to_separate(r1: float, r2: float, level: float = 0.95, power: float = 0.8) -> float:
    """Node-days per group to tell two Poisson rates apart (normal approximation)."""
    if r1 <= 0 or r2 <= 0 or r1 == r2:
        return float("inf")
    z = stats.norm.ppf(1 - (1 - level) / 2) + stats.norm.ppf(power)
    return float(z * z * (r1 + r2) / (r1 - r2) ** 2)
