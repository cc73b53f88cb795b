"""Ids and hashes every stage shares: a row's stable id, the hash that orders seeded choices,
and the digests of texts, files and settings (prompt versions, run-all's inputs, engine keys).

Spark is imported only by the column functions: the engine process uses the digests alone.
"""
from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column


def digest(data: str | bytes, length: int = 64) -> str:
    """The SHA-256 of a text (UTF-8) or of bytes, in hex, cut to ``length`` characters."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()[:length]


def settings_digest(settings: Any, length: int = 64) -> str:
    """The digest of settings (any JSON-like value): the same for the same values, whatever
    the order of their keys."""
    return digest(json.dumps(settings, sort_keys=True, default=str), length)


def stable_id(*parts: Column, length: int = 16, separator: str = "|") -> Column:
    """A short id (SHA-256 in hex, cut to ``length``; 64: whole) that is the same on every run
    for the same parts, joined by ``separator`` (a null part is left out: coalesce it where
    its absence must count)."""
    from pyspark.sql import functions as F

    return F.substring(F.sha2(F.concat_ws(separator, *parts), 256), 1, length)


def request_id(model: str, sampling_key: str) -> Column:
    """A generation request's id: the model, the rendered prompt (``messages``) and the
    sampling, so the same request is never generated twice."""
    from pyspark.sql import functions as F

    return stable_id(F.lit(model), F.col("messages"), F.lit(sampling_key), length=24)


def seeded_hash(*parts) -> Column:
    """A 64-bit hash of columns and literals (a seed among them): the order of seeded choices.
    A text is a literal, not a column name: name a column with ``F.col``."""
    from pyspark.sql import Column
    from pyspark.sql import functions as F

    return F.xxhash64(*[p if isinstance(p, Column) else F.lit(p) for p in parts])
