"""A vector search's hit, and the exact score that every vector search ranks by."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class VectorHit:
    memory_id: str
    cosine: float


def exact_scores(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``rows @ query`` summed in float64 row by row, rounded to float32: a row's score
    does not depend on the other rows (a BLAS product's last bit does)."""
    return (rows.astype(np.float64) * np.asarray(query, dtype=np.float64)).sum(axis=1) \
        .astype(np.float32)
