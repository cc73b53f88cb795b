"""Generation stage: claims + conflicts -> generation requests -> generated texts.

Three passes, each a set of requests (pure DataFrame functions here; the job runs them):
1. ``description_requests``: per claim, the description of another entity of the subject's
   name for which its semantic conflict holds (``description_checks`` keeps only descriptions
   that are one).
2. ``entry_requests``: per claim, the correct evidence and the misinformation of each of its
   conflict kinds, as encyclopedia entries (the ``wikipedia`` style). The model continues a
   reply that opens with the sentence it must state (the claim, or the conflicting claim with
   its period), so even a small model states it.
3. ``style_requests``: each entry that passed quality control rewritten in the other styles
   (``generate.styles``: the paper's five by default).
A slot (claim, kind, style) whose text fails quality control is requested again with another
seed, up to ``generate.rounds`` times (``open_slots``, ``evidence_slots``).

A request's ``evidence_id`` is derived from the model, the rendered prompt and the sampling
parameters: the same request is the same row on every run, so a rerun generates only what
is missing or failed.
"""
from __future__ import annotations

import json
import re
import string
from typing import Iterator, Mapping, Sequence

import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from misbench.ids import request_id
from misbench.prompts import Prompt, messages_column
from misbench.refusals import find_refusal
from misbench.claims.stage import claim_sentence, period_words
from misbench.styles import ENTRY_PROMPTS, ENTRY_STYLE, style_prompt

EVIDENCE_KINDS = ("correct", "factual", "temporal", "semantic")
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
    return messages_column(prompt, field_columns), prompt



def _described(column: str) -> F.Column:
    return F.coalesce(F.col(column), F.lit("no description"))


def _filled(prompt: Prompt, columns: Mapping[str, str]) -> F.Column:
    """A one-line prompt fragment (``prompts/note_*.txt``) with its fields from columns, as a
    column: null when a field is null."""
    parts = []
    for literal, field, _, _ in string.Formatter().parse(prompt.user + " "):
        parts.append(F.lit(literal))
        if field:
            parts.append(F.col(columns[field]))
    return F.concat(*parts)


def _answer_note(prompts: Mapping[str, Prompt], label: str, description: str) -> F.Column:
    """Names the answer's meaning, so that a name shared by several things is not confused."""
    return F.coalesce(_filled(prompts["note_answer"], {"label": label, "description": description}), F.lit(""))


def _bridge_note(prompts: Mapping[str, Prompt]) -> F.Column:
    return F.coalesce(_filled(prompts["note_bridge"], {"subject": "subject_label", "bridge": "bridge_label"}),
                      F.lit(""))


def description_requests(
    claims: DataFrame, conflicts: DataFrame, prompts: Mapping[str, Prompt], model: str, sampling_key: str
) -> DataFrame:
    """Per claim: the description of another entity of the subject's name for which the
    semantic conflict holds; the prompt gives the usual entity's description (not to be
    described) and the false answer's, so the new description changes meaning."""
    semantic = conflicts.where(F.col("kind") == "semantic").select(
        "claim_id", F.col("statement").alias("conflict_statement"), "subject_description",
        F.col("object_label").alias("answer_label"), F.col("object_description").alias("answer_description"),
    )
    rows = claims.select("claim_id", "hop", "subject_label") \
        .join(semantic, "claim_id").withColumn("subject_description", _described("subject_description")) \
        .withColumn("answer_note", _answer_note(prompts, "answer_label", "answer_description"))
    messages, prompt = _prompt_udf(prompts["semantic_description"], {
        "subject": "subject_label", "subject_description": "subject_description",
        "statement": "conflict_statement", "answer": "answer_label", "answer_note": "answer_note"})
    return rows.select(
        "claim_id", "hop", F.lit("semantic").alias("kind"), F.lit("description").alias("style"),
        F.lit(prompt.name).alias("prompt_name"), F.lit(prompt.sha).alias("prompt_hash"),
        messages.alias("messages"), F.lit(None).cast("string").alias("source_evidence_id"),
    ).withColumn("evidence_id", request_id(model, sampling_key)).select(*REQUEST_COLUMNS)


def _word_set(column: str) -> F.Column:
    return F.array_distinct(F.filter(F.split(F.lower(F.col(column)), r"[^\p{L}\p{N}]+"), lambda w: w != ""))


DESCRIPTION_CHECK_COLUMNS = [
    "evidence_id", "claim_id", "subject", "original", "rewritten", "description", "description_sentence",
    "word_overlap", "changed", "passed", "reasons", "generated_at",
]


def description_checks(descriptions: DataFrame, claims: DataFrame, conflicts: DataFrame, settings: dict,
                       echo_grams: frozenset[str], aliases: DataFrame | None = None) -> DataFrame:
    """Per generated description: the original it rewrites, the rewrite as a noun phrase
    (``description``) and the sentence a semantic text opens with, the share of words the two
    descriptions share (``word_overlap``, Jaccard over distinct lower-case words; ``changed``:
    below ``max_overlap``), and the verdict (``passed``, ``reasons``: see
    ``quality.checks.description_failures``). Only passing descriptions feed semantic texts.
    ``settings``: generate.description_check with quality.content's meta_patterns;
    ``aliases``: id, aliases (the entities': the true answer's other names)."""
    from misbench.quality import checks

    semantic = conflicts.where(F.col("kind") == "semantic").select(
        "claim_id", F.coalesce(F.col("subject_description"), F.lit("")).alias("original"),
        F.col("object_label").alias("false_answer"))
    truth = claims.select("claim_id", F.col("subject_label").alias("subject"), F.col("object_label").alias("true_answer"))
    if aliases is None:
        truth = truth.withColumn("true_aliases", F.lit(None).cast("array<string>"))
    else:
        truth = truth.join(claims.select("claim_id", "object_id"), "claim_id").join(
            aliases.select(F.col("id").alias("object_id"), F.col("aliases").alias("true_aliases")),
            "object_id", "left").drop("object_id")
    rows = descriptions.select("evidence_id", "claim_id", F.coalesce("text", F.lit("")).alias("rewritten"), "error",
                               "generated_at").join(semantic, "claim_id").join(truth, "claim_id", "left")
    new, old = _word_set("rewritten"), _word_set("original")
    overlap = F.when(F.size(F.array_union(new, old)) == 0, F.lit(1.0)).otherwise(
        F.size(F.array_intersect(new, old)) / F.size(F.array_union(new, old))).cast("double")
    max_overlap = float(settings["max_overlap"])

    @F.udf("struct<description:string, sentence:string, reasons:array<string>>")
    def verdict(rewritten, subject, original, true_answer, true_aliases, false_answer, word_overlap, error):
        if error:  # too short, a refusal, an engine error: asked again
            return None, None, [f"generation failed ({error[:200]})"]
        subject = subject or ""
        description = checks.as_description(rewritten or "", subject)
        reasons = checks.description_failures(description, subject, original, true_answer, false_answer,
                                              settings, echo_grams, word_overlap, tuple(true_aliases or ()))
        sentence = checks.description_sentence(subject, description) if description else None
        return description, sentence, reasons

    checked = rows.withColumn("word_overlap", overlap).withColumn("v", verdict(
        "rewritten", "subject", "original", "true_answer", "true_aliases", "false_answer", "word_overlap", "error"))
    return checked.select(
        "evidence_id", "claim_id", "subject", "original", "rewritten", F.col("v.description").alias("description"),
        F.col("v.sentence").alias("description_sentence"), "word_overlap",
        (F.col("word_overlap") < F.lit(max_overlap)).alias("changed"),
        (F.size("v.reasons") == 0).alias("passed"), F.col("v.reasons").alias("reasons"), "generated_at")


def chosen_descriptions(checks: DataFrame) -> DataFrame:
    """claim_id -> the description its semantic texts are written for: the first that passed
    its check (by generation time; its evidence_id), with the sentence the texts open with."""
    first = Window.partitionBy("claim_id").orderBy("generated_at", "evidence_id")
    return checks.where(F.col("passed")).withColumn("n", F.row_number().over(first)).where("n = 1") \
        .select("claim_id", "evidence_id", "description", "description_sentence")


def entry_requests(
    claims: DataFrame, conflicts: DataFrame, descriptions: DataFrame, prompts: Mapping[str, Prompt],
    words: int, model: str, sampling_key: str,
) -> DataFrame:
    """Per claim: the correct entry, and one misinformation entry per conflict kind it has.
    ``descriptions``: claim_id, evidence_id, description, description_sentence
    (``chosen_descriptions``: semantic entries are about the other entity, open with its
    description and name it as their ``source_evidence_id``).
    Each prompt names the answer's meaning (its description) and, for two hops, the bridge;
    the reply opens with the sentence to state (``opening``)."""
    base = claims.select(
        "claim_id", "hop", "subject_label", "subject_description", "statement", "question", "bridge_label",
        F.col("object_label").alias("answer_label"), F.col("object_description").alias("answer_description"),
    ).withColumn("subject_description", _described("subject_description")).withColumn("words", F.lit(words)) \
        .withColumn("bridge_note", _bridge_note(prompts))
    requests = []
    correct = base.withColumn("answer_note", _answer_note(prompts, "answer_label", "answer_description")) \
        .withColumn("opening", F.col("statement"))
    messages, prompt = _prompt_udf(prompts[ENTRY_PROMPTS["correct"]], {
        "words": "words", "subject": "subject_label", "subject_description": "subject_description",
        "statement": "statement", "answer_note": "answer_note", "bridge_note": "bridge_note", "opening": "opening"})
    requests.append(correct.select("claim_id", "hop", F.lit("correct").alias("kind"),
                                   F.lit(prompt.name).alias("prompt_name"), F.lit(prompt.sha).alias("prompt_hash"),
                                   messages.alias("messages"), F.lit(None).cast("string").alias("source_evidence_id")))
    for kind in ("factual", "temporal", "semantic"):
        conflict = conflicts.where(F.col("kind") == kind).select(
            "claim_id", F.col("statement").alias("conflict_statement"), "valid_from", "valid_until",
            F.col("object_label").alias("conflict_label"), F.col("object_description").alias("conflict_description"),
        )
        rows = base.drop("statement").join(conflict, "claim_id") \
            .withColumn("answer_note", _answer_note(prompts, "conflict_label", "conflict_description")) \
            .withColumn("opening", claim_sentence("conflict_statement")) \
            .withColumn("period", F.when(F.col("valid_from").isNotNull(), period_words()))
        fields = {"words": "words", "subject": "subject_label", "statement": "opening", "question": "question",
                  "answer": "conflict_label", "answer_note": "answer_note", "bridge_note": "bridge_note",
                  "opening": "opening"}
        if kind == "semantic":  # the other entity's description, then the claim about it
            rows = rows.join(descriptions.select("claim_id", F.col("description").alias("rewritten_description"),
                                                 "description_sentence",
                                                 F.col("evidence_id").alias("source_evidence_id")), "claim_id") \
                .withColumn("opening", F.concat_ws(" ", "description_sentence", "opening"))
            fields["rewritten_description"] = "rewritten_description"
            fields["statement"] = "conflict_statement"
        # Factual and temporal prompts name the subject without its description: a description
        # carries true facts ("bridge in the east of Scotland") that the text would repeat
        # against its false claim. MisBench's prompts give the claim alone, too.
        if kind == "temporal":
            fields["period"] = "period"
        messages, prompt = _prompt_udf(prompts[ENTRY_PROMPTS[kind]], fields)
        source = F.col("source_evidence_id") if kind == "semantic" else F.lit(None).cast("string")
        requests.append(rows.select("claim_id", "hop", F.lit(kind).alias("kind"),
                                    F.lit(prompt.name).alias("prompt_name"),
                                    F.lit(prompt.sha).alias("prompt_hash"), messages.alias("messages"),
                                    source.alias("source_evidence_id")))
    union = requests[0]
    for frame in requests[1:]:
        union = union.unionByName(frame)
    return union.select(
        "*", F.lit(ENTRY_STYLE).alias("style")).withColumn("evidence_id", request_id(model, sampling_key)).select(*REQUEST_COLUMNS)


def style_requests(
    sources: DataFrame, prompts: Mapping[str, Prompt], styles: Sequence[str], model: str, sampling_key: str
) -> DataFrame:
    """Each source entry (an encyclopedia entry that passed quality control) rewritten in
    each of ``styles``; no request where ``styles`` is empty."""
    frames = []
    for style in styles:
        messages, prompt = _prompt_udf(prompts[style_prompt(style)], {"text": "text"})
        frames.append(sources.select(
            "claim_id", "hop", "kind", F.lit(style).alias("style"),
            F.lit(prompt.name).alias("prompt_name"), F.lit(prompt.sha).alias("prompt_hash"),
            messages.alias("messages"), F.col("evidence_id").alias("source_evidence_id"),
        ))
    if not frames:
        return sources.where(F.lit(False)).select(
            F.lit(None).cast("string").alias("evidence_id"), "claim_id", "hop", "kind",
            *[F.lit(None).cast("string").alias(name) for name in REQUEST_COLUMNS[4:]])
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union.withColumn("evidence_id", request_id(model, sampling_key)).select(*REQUEST_COLUMNS)


def passing_texts(evidence: DataFrame, verdicts: DataFrame, model: str, prompt_hashes: Sequence[str]) -> DataFrame:
    """Evidence rows of this model and these prompts whose current verdict is a pass, the
    first per slot (claim, kind, style) by generation time: the text that fills the slot."""
    passed = evidence.where((F.col("model") == model) & F.col("prompt_hash").isin(list(prompt_hashes))) \
        .join(verdicts.where(F.col("passed")).select("evidence_id"), "evidence_id", "left_semi")
    first = Window.partitionBy("claim_id", "kind", "style").orderBy("generated_at", "evidence_id")
    return passed.withColumn("n", F.row_number().over(first)).where("n = 1").drop("n")


def evidence_slots(claims: DataFrame, conflicts: DataFrame, evidence: DataFrame, verdicts: DataFrame,
                   model: str, prompt_hashes: Sequence[str], styles: Sequence[str]) -> DataFrame:
    """One row per slot a claim should fill (its kinds: correct and each conflict kind, times
    the entry's style and ``styles``): how many texts were generated for it (``attempts``), whether one passed
    quality control (``passed``, ``evidence_id`` of the first that did) and whether the first
    attempt did (``first_attempt_passed``: the pass rate before regeneration)."""
    kinds = claims.select("claim_id", "hop", F.lit("correct").alias("kind")).unionByName(
        conflicts.select("claim_id", "kind").join(claims.select("claim_id", "hop"), "claim_id"))
    every_style = claims.sparkSession.createDataFrame([(s,) for s in (ENTRY_STYLE, *styles)], "style string")
    slots = kinds.crossJoin(F.broadcast(every_style))
    mine = evidence.where((F.col("model") == model) & F.col("prompt_hash").isin(list(prompt_hashes))) \
        .select("evidence_id", "claim_id", "kind", "style", "generated_at") \
        .join(verdicts.select("evidence_id", "passed"), "evidence_id", "left")
    first = Window.partitionBy("claim_id", "kind", "style").orderBy("generated_at", "evidence_id")
    per_slot = mine.withColumn("n", F.row_number().over(first)).groupBy("claim_id", "kind", "style").agg(
        F.count("*").alias("attempts"),
        F.max(F.coalesce(F.col("passed"), F.lit(False)).cast("int")).cast("boolean").alias("passed"),
        F.max(F.when(F.col("n") == 1, F.coalesce(F.col("passed"), F.lit(False)).cast("int"))).cast("boolean")
        .alias("first_attempt_passed"),
    )
    chosen = passing_texts(evidence, verdicts, model, prompt_hashes).select("claim_id", "kind", "style", "evidence_id")
    return slots.join(per_slot, ["claim_id", "kind", "style"], "left").join(chosen, ["claim_id", "kind", "style"], "left") \
        .select("claim_id", "hop", "kind", "style", F.coalesce("attempts", F.lit(0)).alias("attempts"),
                F.coalesce("passed", F.lit(False)).alias("passed"),
                F.coalesce("first_attempt_passed", F.lit(False)).alias("first_attempt_passed"), "evidence_id")


def pending_requests(requests: DataFrame, done: DataFrame | None, max_attempts: int) -> DataFrame:
    """Requests not yet generated successfully and not out of attempts, with the attempt
    number they are at. ``done``: evidence_id, error, attempts of earlier rows."""
    from misbench.chunked import pending_rows

    return pending_rows(requests, done, "evidence_id", max_attempts).select(*REQUEST_COLUMNS, "attempts")


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


def without_preamble(text: str | None, pattern: str | None) -> str | None:
    """The text without a chat model's lead-in line ("Sure, here's the passage in the style of
    a blog post:"): it is the model talking to the user, not part of the evidence. A text that
    would be left empty is returned as it was (and fails as the model's answer)."""
    if not text or not pattern:
        return text
    lead_in = re.match(pattern, text, flags=re.IGNORECASE)  # at the start only
    stripped = text[lead_in.end():] if lead_in else text
    return stripped if stripped.strip() else text


def generate_batches(llm_settings: dict, params: dict, refusal_patterns, min_words: int,
                     preamble_pattern: str | None = None, stage: str = "generate"):
    """mapInPandas function: requests in, generated rows out, with the worker's engine.
    ``stage``: how a model error names the work (e.g. "evaluate rtd reconstruction")."""
    from misbench.llm import SamplingParams
    from misbench.llm.client import model_client

    sampling = SamplingParams(**params)

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            if batch.empty:
                continue
            backend = model_client(llm_settings, stage)  # the slot's server, started on first use
            prompts = [json.loads(m) for m in batch["messages"]]
            results = backend.generate(prompts, sampling)
            now = pd.Timestamp.now(tz="UTC")
            rows = []
            for (_, request), result in zip(batch.iterrows(), results):
                text = without_preamble(result.text, preamble_pattern)
                error = result.error or failure_of(text, result.finish_reason, refusal_patterns, min_words)
                rows.append({
                    "evidence_id": request["evidence_id"], "claim_id": request["claim_id"],
                    "hop": int(request["hop"]), "kind": request["kind"], "style": request["style"],
                    "text": text, "backend": backend.backend, "model": backend.model,
                    "prompt_name": request["prompt_name"], "prompt_hash": request["prompt_hash"],
                    "sampling": sampling.key(), "tokens_in": result.tokens_in,
                    "tokens_out": result.tokens_out, "finish_reason": result.finish_reason,
                    "latency_s": result.latency_s, "error": error,
                    "attempts": int(request["attempts"]) + 1, "load_id": backend.load_id,
                    "source_evidence_id": request["source_evidence_id"], "generated_at": now,
                })
            yield pd.DataFrame(rows)

    return run
