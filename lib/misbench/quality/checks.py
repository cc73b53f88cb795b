"""Plain-Python checks of one generated text: completeness, sentence windows, scores to verdicts.

No Spark work and no models here: the stage calls these per row inside its pandas UDF, and
tests call them directly. Refusal phrases are found as generation finds them (``find_refusal``).
"""
from __future__ import annotations

import math
import re
import unicodedata
from typing import Callable, Sequence

from misbench.refusals import find_refusal

# Filters in the order the pipeline applies them; a row's ``failed_filter`` is the first one
# it fails, and quality_stats counts rows in and out of each in this order.
FILTERS = ("completeness", "entailment", "similarity")

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")
_ENDS_A_SENTENCE = re.compile(r"[.!?][\"')\]]*\s*$")


def completeness_failures(
    text: str | None, finish_reason: str | None, error: str | None, settings: dict, target_words: int
) -> list[str]:
    """Why a text is not complete usable evidence; empty when it is. ``settings``: the
    ``quality.completeness`` section."""
    if error:
        return [f"completeness: generation failed ({error[:200]})"]
    if text is None or not text.strip():
        return ["completeness: empty text"]
    reasons = []
    marker = find_refusal(text, settings["refusal_patterns"])
    if marker:
        reasons.append(f"completeness: refusal or disclaimer ({marker!r})")
    if finish_reason in settings["truncated_finish_reasons"] and not _ENDS_A_SENTENCE.search(text):
        reasons.append(f"completeness: truncated (finish reason {finish_reason!r}, ends mid-sentence)")
    words = len(text.split())
    low = math.floor(target_words * float(settings["min_words_ratio"]))
    high = math.ceil(target_words * float(settings["max_words_ratio"]))
    if words < low:
        reasons.append(f"completeness: too short ({words} words < {low})")
    elif words > high:
        reasons.append(f"completeness: too long ({words} words > {high})")
    return reasons


def sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text) if part and part.strip()]


def text_windows(text: str, budget: int, measure: Callable[[str], int], overlap: int = 1) -> list[str]:
    """Consecutive sentences packed into windows of at most ``budget`` (as ``measure`` counts;
    a single longer sentence is a window of its own), each sharing ``overlap`` sentences with
    the one before, so a statement split across a boundary still lands whole in one window."""
    parts = sentences(text)
    sizes = [measure(part) for part in parts]
    windows, start = [], 0
    while start < len(parts):
        end, size = start, 0
        while end < len(parts) and (end == start or size + sizes[end] <= budget):
            size += sizes[end]
            end += 1
        windows.append(" ".join(parts[start:end]))
        if end >= len(parts):
            break
        start = max(start + 1, end - overlap)
    return windows


def yes_probability(yes_logprob: float, no_logprob: float) -> float:
    """P(yes) among {yes, no} from two log-probabilities (the judge's margin through a
    sigmoid); NaN when the model gave neither answer a probability."""
    if yes_logprob == -math.inf and no_logprob == -math.inf:
        return math.nan
    if no_logprob == -math.inf:
        return 1.0
    if yes_logprob == -math.inf:
        return 0.0
    return 1.0 / (1.0 + math.exp(no_logprob - yes_logprob))


def _words(text: str) -> str:
    folded = unicodedata.normalize("NFKD", text.lower())
    folded = "".join(char for char in folded if not unicodedata.combining(char))
    return " " + " ".join(re.findall(r"[^\W_]+", folded)) + " "


def names(text: str, name: str) -> bool:
    """Whether ``text`` names ``name`` as whole words, ignoring case, accents and punctuation."""
    return bool(name.strip()) and _words(name) in _words(text)


def model_failures(entailment: float | None, similarity: float | None, threshold: float, alpha: float,
                   contrary: float | None = None, named_true_answer: str | None = None,
                   kind: str = "correct") -> list[str]:
    """Reasons from the model scores, in filter order. ``contrary``: how strongly the text
    entails what it must not (see ``quality.stage.hypotheses``); ``named_true_answer``: the
    true answer that factual misinformation named."""
    reasons = []
    if entailment is None or math.isnan(entailment):
        reasons.append("entailment: no score (the judge answered neither yes nor no)")
    elif entailment < threshold:
        reasons.append(f"entailment: statement not entailed ({entailment:.3f} < {threshold})")
    if contrary is not None and not math.isnan(contrary) and contrary >= threshold:
        what = "the factual conflict" if kind == "correct" else "the true claim"
        reasons.append(f"entailment: also states {what} ({contrary:.3f} >= {threshold})")
    if named_true_answer:
        reasons.append(f"entailment: names the true answer {named_true_answer!r}")
    if similarity is not None and similarity < alpha:
        reasons.append(f"similarity: off topic (cosine to the question {similarity:.3f} < {alpha})")
    return reasons


def first_failed_filter(reasons: Sequence[str]) -> str | None:
    failed = {reason.split(":", 1)[0] for reason in reasons}
    return next((name for name in FILTERS if name in failed), None)
