"""Refusal phrases in generated text, shared by generation and quality control.

Kept free of Spark so that a model worker (or a GPU benchmark) can import the quality checks
without pyspark.
"""
from __future__ import annotations

import functools
import re
from typing import Sequence


@functools.lru_cache(maxsize=64)
def _compiled(patterns: tuple[str, ...]) -> list[re.Pattern]:
    return [re.compile(pattern, re.IGNORECASE) for pattern in patterns]


def find_refusal(text: str, patterns: Sequence[str], scope_chars: int | None = None) -> str | None:
    """The words of ``text`` that the first matching refusal pattern (a regular expression,
    case-insensitive) found, or None; only in the first ``scope_chars`` characters when given."""
    scope = text if scope_chars is None else text[:scope_chars]
    for pattern in _compiled(tuple(patterns)):
        found = pattern.search(scope)
        if found:
            return found.group(0)
    return None
