"""Quality-control stage: evidence + claims + conflicts -> evidence_qc rows -> quality_stats.

Per text, in the paper's order with one filter of ours: completeness (no refusal or
disclaimer, not cut off, length near the target), content (rules, no model: no talk about the
text or the task, no prompt wording, correct evidence names its answer, misinformation names its
subject and not the true answer, a temporal text keeps its claim inside its period, a semantic
text describes the other entity; see ``checks.content_failures``), entailment (the text entails its statement: the claim's for
correct evidence, the conflicting claim's for misinformation; and only that: misinformation
that also entails the true claim, or a semantic text that describes the better-known entity
of the name, fails, and so does correct evidence that entails the factual conflict),
similarity (the text stays on the claim's question). Model scores are computed for every complete text, so a threshold can be
revisited from the table; ``failed_filter`` is the first filter a row fails.
"""
from __future__ import annotations

from typing import Iterator

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from misbench.claims.stage import claim_sentence
from misbench.ids import stable_id
from misbench.quality import checks
from misbench.styles import ENTRY_STYLE

INPUT_COLUMNS = [
    "evidence_id", "claim_id", "hop", "kind", "style", "text", "finish_reason", "error",
    "hypothesis", "contrary_hypothesis", "description_contrary", "subject", "true_answer", "true_aliases",
    "false_answer", "from_year", "until_year", "description", "question", "relation", "qc_key",
]
QC_SCHEMA = (
    "evidence_id string, claim_id string, hop int, kind string, style string, passed boolean, "
    "reasons array<string>, failed_filter string, complete boolean, entailment_score double, "
    "entailed boolean, entailment_windows int, contrary_score double, description_contrary_score double, "
    "names_true_answer boolean, similarity_score double, on_topic boolean, hypothesis string, "
    "contrary_hypothesis string, description_contrary string, false_answer string, description string, "
    "question string, text_words int, entailment_backend string, entailment_model string, "
    "similarity_model string, qc_key string, load_id string, checked_at timestamp"
)
QC_COLUMNS = [field.strip().split(" ")[0] for field in QC_SCHEMA.split(",")]


def _is_sentence(subject: str, description: str) -> F.Column:
    """'<subject> is <description>.' as a column (null without a description)."""
    @F.udf("string")
    def sentence(subject, description):
        return checks.description_sentence(subject, description) if subject and description else None

    return sentence(subject, description)


def hypotheses(claims: DataFrame, conflicts: DataFrame, aliases: DataFrame | None = None) -> DataFrame:
    """claim_id, kind -> the statement a text of that kind must entail (``hypothesis``), the
    one it must not (``contrary_hypothesis``: the factual conflict for correct evidence, the
    true claim for misinformation; ``description_contrary``: for semantic misinformation, the
    subject as the better-known entity of its name), the answers (correct evidence must name
    its own, ``true_answer`` there; misinformation must not name the true one; either by its
    label or an alias: ``aliases``, id and aliases, the entities'), a temporal conflict's
    years and the question. A temporal conflict's statement carries its validity period: the
    period is the conflict."""
    factual = conflicts.where(F.col("kind") == "factual").select("claim_id", F.col("statement").alias("factual"))
    names = claims.select("claim_id", F.col("subject_label").alias("subject"), "question", "relation")
    truths = claims.select("claim_id", "object_id", F.col("statement").alias("true_statement"),
                           F.col("subject_label").alias("named"), F.col("object_label").alias("true_label"))
    if aliases is None:
        truths = truths.withColumn("true_aliases", F.lit(None).cast("array<string>"))
    else:
        truths = truths.join(aliases.select(F.col("id").alias("object_id"), F.col("aliases").alias("true_aliases")),
                             "object_id", "left")
    # correct evidence names its answer (label, alias or a date's year): true_answer is the
    # claim's own answer there
    correct = truths.join(factual, "claim_id", "left").select(
        "claim_id", F.lit("correct").alias("kind"), F.col("true_statement").alias("hypothesis"),
        F.col("factual").alias("contrary_hypothesis"), F.lit(None).cast("string").alias("description_contrary"),
        F.col("true_label").alias("true_answer"), "true_aliases",
        F.lit(None).cast("string").alias("false_answer"),
        F.lit(None).cast("string").alias("from_year"), F.lit(None).cast("string").alias("until_year"))
    conflicting = conflicts.join(truths.drop("object_id"), "claim_id", "left").select(
        "claim_id", "kind",
        claim_sentence("statement").alias("hypothesis"),
        F.col("true_statement").alias("contrary_hypothesis"),
        F.when(F.col("kind") == "semantic", _is_sentence("named", "subject_description")).alias("description_contrary"),
        F.col("true_label").alias("true_answer"), "true_aliases", F.col("object_label").alias("false_answer"),
        F.year("valid_from").cast("string").alias("from_year"), F.year("valid_until").cast("string").alias("until_year"),
    )
    return correct.unionByName(conflicting).join(names, "claim_id", "left")


def qc_inputs(evidence: DataFrame, claims: DataFrame, conflicts: DataFrame, settings_key: str,
              descriptions: DataFrame | None = None, aliases: DataFrame | None = None) -> DataFrame:
    """Evidence rows with their hypotheses, names and question, keyed by ``qc_key``: a hash of
    the settings and of everything the checks read, so a changed text or setting is re-checked
    and an unchanged one never is. ``descriptions``: evidence_id, description (the checked
    descriptions of other entities, ``semantic_description_checks``: a semantic text is
    checked against the one it was written from). Rows whose
    claim or conflict is gone keep a null hypothesis (they fail with that reason, they are not
    dropped)."""
    rows = evidence.select("evidence_id", "claim_id", "hop", "kind", "style", "text", "finish_reason", "error",
                           "source_evidence_id")
    joined = rows.join(hypotheses(claims, conflicts, aliases), ["claim_id", "kind"], "left")
    if descriptions is None:
        joined = joined.withColumn("description", F.lit(None).cast("string"))
    else:
        # a semantic entry names its description as its source; a style rewrite, its entry
        entries = evidence.where((F.col("kind") == "semantic") & (F.col("style") == ENTRY_STYLE)) \
            .select(F.col("evidence_id").alias("entry_id"), F.col("source_evidence_id").alias("entry_source"))
        joined = joined.join(entries, joined["source_evidence_id"] == entries["entry_id"], "left") \
            .withColumn("description_id", F.when(F.col("kind") != "semantic", None)
                        .when(F.col("style") == ENTRY_STYLE, F.col("source_evidence_id"))
                        .otherwise(F.col("entry_source"))) \
            .join(descriptions.select(F.col("evidence_id").alias("description_id"), "description"),
                  "description_id", "left")
    read = [c for c in INPUT_COLUMNS if c not in ("evidence_id", "claim_id", "hop", "kind", "style", "qc_key")]
    key = stable_id(F.lit(settings_key), *[F.coalesce(F.col(c).cast("string"), F.lit("\u0000")) for c in read],
                    length=64, separator="\u0001")
    return joined.withColumn("qc_key", F.substring(key, 1, 32)).select(*INPUT_COLUMNS)


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def _texts(value) -> tuple[str, ...]:
    """An array cell (a list, a numpy array or null) as a tuple of its strings."""
    return tuple(v for v in value if isinstance(v, str)) if value is not None and not isinstance(value, float) else ()


def verdict_frame(batch: pd.DataFrame, settings: dict, entailer, similar) -> pd.DataFrame:
    """qc_inputs rows -> evidence_qc rows: the rules first (completeness, content), then the
    models on every complete text (so a threshold can be revisited from the table)."""
    completeness = settings["completeness"]
    content = settings["content"]
    containment = frozenset(content.get("containment_relations") or ())
    echo_grams = frozenset(settings["echo_grams"])
    target_words = int(settings["target_words"])
    threshold = float(settings["entailment"]["threshold"])
    alpha = float(settings["similarity"]["alpha"])
    overlap = int(settings["entailment"]["overlap_sentences"])
    batch = batch.reset_index(drop=True)
    reasons = [checks.completeness_failures(_text(row.text), _text(row.finish_reason), _text(row.error),
                                            completeness, target_words) for row in batch.itertuples()]
    for index, row in batch.iterrows():
        if not reasons[index] and (pd.isna(row["hypothesis"]) or pd.isna(row["question"])):
            reasons[index] = ["completeness: its claim or conflicting claim is no longer in the claims tables"]
    scored = [i for i, r in enumerate(reasons) if not r]
    for i in scored:
        row = batch.iloc[i]
        facts = checks.ContentFacts(
            kind=row["kind"], subject=_text(row["subject"]) or "", question=_text(row["question"]) or "",
            true_answer=_text(row["true_answer"]), false_answer=_text(row["false_answer"]),
            true_aliases=_texts(row["true_aliases"]),
            from_year=_text(row["from_year"]), until_year=_text(row["until_year"]),
            description=_text(row["description"]), within=row["relation"] in containment)
        reasons[i] = checks.content_failures(row["text"], facts, content, echo_grams)
    entailment: dict[int, tuple[float, int]] = {}
    contrary: dict[int, float] = {}
    described: dict[int, float] = {}
    similarity: dict[int, float] = {}
    if scored:
        texts = [batch.at[i, "text"] for i in scored]
        entailment = dict(zip(scored, entailer.score(texts, [batch.at[i, "hypothesis"] for i in scored], overlap)))
        for column, into in (("contrary_hypothesis", contrary), ("description_contrary", described)):
            against = [i for i in scored if isinstance(batch.at[i, column], str)]
            if against:
                results = entailer.score([batch.at[i, "text"] for i in against],
                                         [batch.at[i, column] for i in against], overlap)
                into.update({i: score for i, (score, _) in zip(against, results)})
        similarity = dict(zip(scored, similar.scores([batch.at[i, "question"] for i in scored], texts)))
    now = pd.Timestamp.now(tz="UTC")
    out = []
    for index, row in batch.iterrows():
        score, windows = entailment.get(index, (None, None))
        cosine = similarity.get(index)
        text = _text(row["text"]) or ""
        true_answer = _text(row["true_answer"])
        # the content rule's own test, so the column agrees with the verdict
        names_true = None if index not in entailment or true_answer is None or row["kind"] == "correct" else \
            checks.true_answer_named_against_claim(text, true_answer, _texts(row["true_aliases"]),
                                                   _text(row["false_answer"]), _text(row["subject"]) or "") is not None
        row_reasons = list(reasons[index])
        if index in entailment:
            row_reasons += checks.model_failures(score, cosine, threshold, alpha, contrary.get(index), row["kind"],
                                                 described.get(index))
        out.append({
            "evidence_id": row["evidence_id"], "claim_id": row["claim_id"], "hop": int(row["hop"]),
            "kind": row["kind"], "style": row["style"], "passed": not row_reasons,
            "reasons": row_reasons, "failed_filter": checks.first_failed_filter(row_reasons),
            "complete": index in entailment,
            "entailment_score": score, "entailed": None if score is None else bool(score >= threshold),
            "entailment_windows": windows, "contrary_score": contrary.get(index),
            "description_contrary_score": described.get(index),
            "names_true_answer": names_true, "similarity_score": cosine,
            "on_topic": None if cosine is None else bool(cosine >= alpha),
            "hypothesis": row["hypothesis"], "contrary_hypothesis": row["contrary_hypothesis"],
            "description_contrary": row["description_contrary"], "false_answer": row["false_answer"],
            "description": row["description"], "question": row["question"],
            "text_words": len(text.split()), "entailment_backend": entailer.backend,
            "entailment_model": entailer.model, "similarity_model": similar.model,
            "qc_key": row["qc_key"], "load_id": entailer.load_id, "checked_at": now,
        })
    frame = pd.DataFrame(out)
    for column in ("entailment_score", "similarity_score", "contrary_score", "description_contrary_score"):
        frame[column] = frame[column].astype("float64")
    frame["names_true_answer"] = frame["names_true_answer"].astype("boolean")
    frame["entailment_windows"] = frame["entailment_windows"].astype("Int32")
    return frame


def check_batches(settings: dict):
    """mapInPandas function: qc_inputs rows in, evidence_qc rows out, with this worker's models.
    ``settings``: the resolved quality section (see quality.job.resolved_settings)."""
    from misbench.quality.scorers import worker_entailment, worker_similarity

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            if not batch.empty:
                yield verdict_frame(batch, settings, worker_entailment(settings), worker_similarity(settings))

    return run


def reason_rule(reason: F.Column) -> F.Column:
    """A reason without its particulars (scores, names, quoted words): the rule that gave it."""
    return F.trim(F.regexp_replace(reason, r"\s*(\(.*|'.*'|\".*\")$", ""))


def quality_stats(qc: DataFrame) -> DataFrame:
    """Per filter (in order), kind, style and hop: rows that reached the filter (rows_in) and
    rows that passed it (rows_out). A row reaches every filter up to the first it fails, so
    for each group: first filter's rows_in = last filter's rows_out + every rows_dropped.
    ``dropped_by_rule``: among the rows this filter dropped, how many each of its rules
    rejected (a row can break several rules of one filter)."""
    steps = F.array(*[F.struct(F.lit(i + 1).alias("step"), F.lit(name).alias("filter"))
                      for i, name in enumerate(checks.FILTERS)])
    order = F.create_map(*[x for i, name in enumerate(checks.FILTERS) for x in (F.lit(name), F.lit(i + 1))])
    failed_step = F.coalesce(order[F.col("failed_filter")], F.lit(len(checks.FILTERS) + 1))
    keys = ["step", "filter", "kind", "style", "hop"]
    rows = qc.select("kind", "style", "hop", "reasons", failed_step.alias("failed_step"), F.explode(steps).alias("s"))
    reached = rows.where(F.col("s.step") <= F.col("failed_step")) \
        .select(F.col("s.step").alias("step"), F.col("s.filter").alias("filter"), "kind", "style", "hop",
                "reasons", "failed_step")
    counts = reached.groupBy(*keys).agg(
        F.count("*").alias("rows_in"),
        F.sum((F.col("step") < F.col("failed_step")).cast("long")).alias("rows_out"),
    ).withColumn("rows_dropped", F.col("rows_in") - F.col("rows_out"))
    dropped = reached.where(F.col("step") == F.col("failed_step")) \
        .select(*keys, F.explode("reasons").alias("reason")) \
        .where(F.col("reason").startswith(F.concat(F.col("filter"), F.lit(":")))) \
        .groupBy(*keys, reason_rule(F.col("reason")).alias("rule")).count() \
        .groupBy(*keys).agg(F.map_from_entries(F.collect_list(F.struct("rule", "count"))).alias("dropped_by_rule"))
    return counts.join(dropped, keys, "left").select(
        *keys, "rows_in", "rows_out", "rows_dropped",
        F.coalesce("dropped_by_rule", F.create_map().cast("map<string,bigint>")).alias("dropped_by_rule"),
    ).orderBy("step", "kind", "style", "hop")
