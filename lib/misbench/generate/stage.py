"""Generation stage: claims + conflicts -> generation requests -> generated texts.

Three passes, each a set of requests (pure DataFrame functions here; the job runs them):
1. ``description_requests``: per claim, the subject description rewritten for its semantic
   conflict.
2. ``entry_requests``: per claim, the correct evidence and the factual, temporal and semantic
   misinformation, as encyclopedia entries (the ``wikipedia`` style).
3. ``style_requests``: each entry rewritten in the five other styles.

A request's ``evidence_id`` is derived from the model, the rendered prompt and the sampling
parameters: the same request is the same row on every run, so a rerun generates only what
is missing or failed.
"""
from __future__ import annotations

import functools
import json
import re
from typing import Iterator, Mapping, Sequence

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from misbench.prompts import Prompt

EVIDENCE_KINDS = ("correct", "factual", "temporal", "semantic")
STYLES = ("wikipedia", "news", "science", "blog", "technical", "confident")
ENTRY_PROMPTS = {
    "correct": "evidence_correct",
    "factual": "misinformation_factual",
    "temporal": "misinformation_temporal",
    "semantic": "misinformation_semantic",
}
STYLE_PROMPTS = {style: f"style_{style}" for style in STYLES[1:]}
# Every prompt the stage renders; the job loads them (stage functions read no files).
PROMPT_NAMES = ("semantic_description", *ENTRY_PROMPTS.values(), *STYLE_PROMPTS.values())
REQUEST_COLUMNS = [
    "evidence_id", "claim_id", "hop", "kind", "style", "prompt_name", "prompt_hash",
    "messages", "source_evidence_id",
]
GENERATED_SCHEMA = (
    "evidence_id string, claim_id string, hop int, kind string, style string, text string, "
    "backend string, model string, prompt_name string, prompt_hash string, sampling string, "
    "tokens_in int, tokens_out int, finish_reason string, latency_s double, error string, "
    "attempts int, load_id string, source_evidence_id string, generated_at timestamp"
)


def _prompt_udf(prompt: Prompt, field_columns: dict[str, str]):
    """Rendered chat messages (JSON) of a prompt, from the named columns."""

    @F.udf("string")
    def render(*values):
        return json.dumps(prompt.messages(dict(zip(field_columns.keys(), values))), ensure_ascii=False)

    return render(*[F.col(c).cast("string") for c in field_columns.values()]), prompt


def _request_key(model: str, sampling_key: str) -> F.Column:
    return F.substring(F.sha2(F.concat_ws("|", F.lit(model), F.col("messages"), F.lit(sampling_key)), 256), 1, 24)


def _described(column: str) -> F.Column:
    return F.coalesce(F.col(column), F.lit("no description"))


def description_requests(
    claims: DataFrame, conflicts: DataFrame, prompts: Mapping[str, Prompt], model: str, sampling_key: str
) -> DataFrame:
    """Per claim: rewrite the subject's description to fit its semantic conflict."""
    semantic = conflicts.where(F.col("kind") == "semantic").select(
        "claim_id", F.col("statement").alias("conflict_statement"), "subject_description"
    )
    rows = claims.select("claim_id", "hop", "subject_label").join(semantic, "claim_id").withColumn(
        "subject_description", _described("subject_description")
    )
    messages, prompt = _prompt_udf(prompts["semantic_description"], {
        "subject": "subject_label", "subject_description": "subject_description",
        "statement": "conflict_statement"})
    return rows.select(
        "claim_id", "hop", F.lit("semantic").alias("kind"), F.lit("description").alias("style"),
        F.lit(prompt.name).alias("prompt_name"), F.lit(prompt.sha).alias("prompt_hash"),
        messages.alias("messages"), F.lit(None).cast("string").alias("source_evidence_id"),
    ).withColumn("evidence_id", _request_key(model, sampling_key)).select(*REQUEST_COLUMNS)


def entry_requests(
    claims: DataFrame, conflicts: DataFrame, descriptions: DataFrame, prompts: Mapping[str, Prompt],
    words: int, model: str, sampling_key: str,
) -> DataFrame:
    """Per claim: the correct entry, and one misinformation entry per conflict kind.
    ``descriptions``: claim_id, text of the rewritten description (semantic entries need it)."""
    base = claims.select("claim_id", "hop", "subject_label", "subject_description", "statement").withColumn(
        "subject_description", _described("subject_description")
    ).withColumn("words", F.lit(words))
    requests = []
    correct, prompt = _prompt_udf(prompts[ENTRY_PROMPTS["correct"]], {
        "words": "words", "subject": "subject_label", "subject_description": "subject_description",
        "statement": "statement"})
    requests.append(base.select("claim_id", "hop", F.lit("correct").alias("kind"),
                                F.lit(prompt.name).alias("prompt_name"), F.lit(prompt.sha).alias("prompt_hash"),
                                correct.alias("messages")))
    for kind in ("factual", "temporal", "semantic"):
        conflict = conflicts.where(F.col("kind") == kind).select(
            "claim_id", F.col("statement").alias("conflict_statement"),
            F.col("valid_from").cast("string").alias("valid_from"),
            F.col("valid_until").cast("string").alias("valid_until"),
        )
        rows = base.drop("statement").join(conflict, "claim_id")
        fields = {"words": "words", "subject": "subject_label", "statement": "conflict_statement"}
        if kind == "semantic":
            rows = rows.join(descriptions.select("claim_id", F.col("text").alias("rewritten_description")), "claim_id")
            fields["rewritten_description"] = "rewritten_description"
        else:
            fields["subject_description"] = "subject_description"
        if kind == "temporal":
            fields.update(valid_from="valid_from", valid_until="valid_until")
        messages, prompt = _prompt_udf(prompts[ENTRY_PROMPTS[kind]], fields)
        requests.append(rows.select("claim_id", "hop", F.lit(kind).alias("kind"),
                                    F.lit(prompt.name).alias("prompt_name"),
                                    F.lit(prompt.sha).alias("prompt_hash"), messages.alias("messages")))
    union = requests[0]
    for frame in requests[1:]:
        union = union.unionByName(frame)
    return union.select(
        "*", F.lit("wikipedia").alias("style"), F.lit(None).cast("string").alias("source_evidence_id")
    ).withColumn("evidence_id", _request_key(model, sampling_key)).select(*REQUEST_COLUMNS)


def style_requests(
    entries: DataFrame, prompts: Mapping[str, Prompt], model: str, sampling_key: str
) -> DataFrame:
    """Each successful encyclopedia entry rewritten in the five other styles."""
    ok = entries.where((F.col("style") == "wikipedia") & F.col("error").isNull())
    frames = []
    for style in STYLES[1:]:
        messages, prompt = _prompt_udf(prompts[STYLE_PROMPTS[style]], {"text": "text"})
        frames.append(ok.select(
            "claim_id", "hop", "kind", F.lit(style).alias("style"),
            F.lit(prompt.name).alias("prompt_name"), F.lit(prompt.sha).alias("prompt_hash"),
            messages.alias("messages"), F.col("evidence_id").alias("source_evidence_id"),
        ))
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union.withColumn("evidence_id", _request_key(model, sampling_key)).select(*REQUEST_COLUMNS)


def pending_requests(requests: DataFrame, done: DataFrame | None, max_attempts: int) -> DataFrame:
    """Requests not yet generated successfully and not out of attempts, with the attempt
    number they are at. ``done``: evidence_id, error, attempts of earlier rows."""
    if done is None:
        return requests.withColumn("attempts", F.lit(0))
    earlier = done.select("evidence_id", F.col("error").alias("earlier_error"),
                          F.col("attempts").alias("earlier_attempts"))
    joined = requests.join(earlier, "evidence_id", "left")
    return joined.where(
        F.col("earlier_attempts").isNull()
        | (F.col("earlier_error").isNotNull() & (F.col("earlier_attempts") < max_attempts))
    ).select(*REQUEST_COLUMNS, F.coalesce(F.col("earlier_attempts"), F.lit(0)).alias("attempts"))


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


def failure_of(text: str | None, finish_reason: str | None, refusal_patterns, min_words: int) -> str | None:
    """Why a generated text does not count as a success, or None."""
    if text is None or not text.strip():
        return "empty text"
    marker = find_refusal(text, refusal_patterns, scope_chars=300)
    if marker:
        return f"refusal ({marker!r})"
    if len(text.split()) < min_words:
        return f"too short ({len(text.split())} words)"
    return None


def generate_batches(llm_settings: dict, params: dict, refusal_patterns, min_words: int):
    """mapInPandas function: requests in, generated rows out, with the worker's engine."""
    from misbench.llm import SamplingParams, worker_backend

    sampling = SamplingParams(**params)

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            if batch.empty:
                continue
            backend = worker_backend(llm_settings)  # loaded on this worker's first use only
            prompts = [json.loads(m) for m in batch["messages"]]
            results = backend.generate(prompts, sampling)
            now = pd.Timestamp.now(tz="UTC")
            rows = []
            for (_, request), result in zip(batch.iterrows(), results):
                error = result.error or failure_of(result.text, result.finish_reason, refusal_patterns, min_words)
                rows.append({
                    "evidence_id": request["evidence_id"], "claim_id": request["claim_id"],
                    "hop": int(request["hop"]), "kind": request["kind"], "style": request["style"],
                    "text": result.text, "backend": backend.backend, "model": backend.model,
                    "prompt_name": request["prompt_name"], "prompt_hash": request["prompt_hash"],
                    "sampling": sampling.key(), "tokens_in": result.tokens_in,
                    "tokens_out": result.tokens_out, "finish_reason": result.finish_reason,
                    "latency_s": result.latency_s, "error": error,
                    "attempts": int(request["attempts"]) + 1, "load_id": backend.load_id,
                    "source_evidence_id": request["source_evidence_id"], "generated_at": now,
                })
            yield pd.DataFrame(rows)

    return run
