"""Ids and hashes every stage shares: a row's stable id, and the hash that orders seeded choices."""
from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def stable_id(*parts: Column, length: int = 16) -> Column:
    """A short id that is the same on every run for the same parts."""
    return F.substring(F.sha2(F.concat_ws("|", *parts), 256), 1, length)


def request_id(model: str, sampling_key: str) -> Column:
    """A generation request's id: the model, the rendered prompt (``messages``) and the
    sampling, so the same request is never generated twice."""
    return stable_id(F.lit(model), F.col("messages"), F.lit(sampling_key), length=24)


def seeded_hash(*parts) -> Column:
    """A 64-bit hash of columns and literals (a seed among them): the order of seeded choices."""
    return F.xxhash64(*[p if isinstance(p, Column) else F.lit(p) for p in parts])
