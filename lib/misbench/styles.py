"""The styles texts are written in and the prompts that write them: the encyclopedia entry
(``ENTRY_STYLE``), which generation writes first, and its rewrites (``generate.styles``, each
with its prompt ``prompts/style_<name>.txt``). Generation, quality control, the question set,
its exports and the figures all name styles so.
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

from misbench.config import ConfigError

# The style of the encyclopedia entries; generate.styles names their rewrites, each with its
# prompt prompts/style_<name>.txt.
ENTRY_STYLE = "wikipedia"
ENTRY_PROMPTS = {
    "correct": "evidence_correct",
    "factual": "misinformation_factual",
    "temporal": "misinformation_temporal",
    "semantic": "misinformation_semantic",
}
# Every prompt the stage renders but the style rewrites'; the job loads them (stage functions
# read no files).
PROMPT_NAMES = ("semantic_description", *ENTRY_PROMPTS.values(), "note_answer", "note_bridge")


def style_prompt(style: str) -> str:
    """The prompt that rewrites an entry in ``style``."""
    return f"style_{style}"


def rewrite_styles(styles: Sequence[str]) -> tuple[str, ...]:
    """``generate.styles`` as the stage uses them: names of prompt files, each once, never the
    entry's own style (an entry is not rewritten in its own style)."""
    names = tuple(styles)
    bad = [s for s in names if not re.fullmatch(r"[a-z][a-z0-9_]*", s)]
    if bad:
        raise ConfigError(f"generate.styles: {bad[0]!r} is no style name (lower-case letters, digits and _; "
                          f"the rewrite prompt is prompts/style_<name>.txt)")
    if ENTRY_STYLE in names or len(set(names)) < len(names):
        raise ConfigError(f"generate.styles: {list(names)} names a style twice or the entries' own "
                          f"{ENTRY_STYLE!r}; list each rewrite style once")
    return names


def style_order(styles: Iterable[str], configured: Sequence[str] = ()) -> list[str]:
    """The styles found in a table, in the order figures and exports show them: the entries'
    style first, then ``configured`` (``generate.styles``, where the caller has it) in its
    order, then any other found by name."""
    found = set(styles)
    first = [ENTRY_STYLE] if ENTRY_STYLE in found else []
    listed = [style for style in configured if style in found and style != ENTRY_STYLE]
    return first + listed + sorted(found - {ENTRY_STYLE} - set(listed))


def prompt_names(styles: Sequence[str]) -> tuple[str, ...]:
    """Every prompt the stage renders with these rewrite styles."""
    return (*PROMPT_NAMES, *(style_prompt(style) for style in styles))
