"""Named, reproducible random streams: one seed, independent generators per purpose."""

from __future__ import annotations

import zlib

import numpy as np


def stream(seed: int, *keys: object) -> np.random.Generator:
    """A generator that depends only on ``seed`` and ``keys`` (never on call order)."""
    words = [int(seed) & 0xFFFFFFFF] + [zlib.crc32(str(k).encode()) for k in keys]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words)))
