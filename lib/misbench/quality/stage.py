"""Quality-control stage: evidence + claims + conflicts -> evidence_qc rows -> quality_stats.

Per text, in the paper's order: completeness (no refusal or disclaimer, not cut off, length
near the target), entailment (the text entails its statement: the claim's for correct
evidence, the conflicting claim's for misinformation; and only that: misinformation that also
entails the true claim, or factual misinformation that names the true answer, fails, and so
does correct evidence that entails the factual conflict), similarity (the text stays on the
claim's question). Model scores are computed for every complete text, so a threshold can be
revisited from the table; ``failed_filter`` is the first filter a row fails.
"""
from __future__ import annotations

from typing import Iterator

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from misbench.generate.stage import claim_sentence
from misbench.quality import checks

INPUT_COLUMNS = [
    "evidence_id", "claim_id", "hop", "kind", "style", "text", "finish_reason", "error",
    "hypothesis", "contrary_hypothesis", "true_answer", "question", "qc_key",
]
QC_SCHEMA = (
    "evidence_id string, claim_id string, hop int, kind string, style string, passed boolean, "
    "reasons array<string>, failed_filter string, complete boolean, entailment_score double, "
    "entailed boolean, entailment_windows int, contrary_score double, names_true_answer boolean, "
    "similarity_score double, on_topic boolean, hypothesis string, contrary_hypothesis string, "
    "question string, text_words int, entailment_backend string, entailment_model string, "
    "similarity_model string, qc_key string, load_id string, checked_at timestamp"
)
QC_COLUMNS = [field.strip().split(" ")[0] for field in QC_SCHEMA.split(",")]


def hypotheses(claims: DataFrame, conflicts: DataFrame) -> DataFrame:
    """claim_id, kind -> the statement a text of that kind must entail (``hypothesis``), the
    one it must not (``contrary_hypothesis``: the factual conflict for correct evidence, the
    true claim for misinformation), the true answer factual misinformation must not name, and
    the question. A temporal conflict's statement carries its validity period: the period is
    the conflict."""
    factual = conflicts.where(F.col("kind") == "factual").select("claim_id", F.col("statement").alias("factual"))
    correct = claims.join(factual, "claim_id", "left").select(
        "claim_id", F.lit("correct").alias("kind"), F.col("statement").alias("hypothesis"),
        F.col("factual").alias("contrary_hypothesis"), F.lit(None).cast("string").alias("true_answer"))
    conflicting = conflicts.join(
        claims.select("claim_id", F.col("statement").alias("true_statement"),
                      F.col("object_label").alias("true_label")), "claim_id", "left",
    ).select(
        "claim_id", "kind",
        claim_sentence("statement").alias("hypothesis"),
        F.col("true_statement").alias("contrary_hypothesis"),
        F.when(F.col("kind") == "factual", F.col("true_label")).alias("true_answer"),
    )
    questions = claims.select("claim_id", "question")
    return correct.unionByName(conflicting).join(questions, "claim_id", "left")


def qc_inputs(evidence: DataFrame, claims: DataFrame, conflicts: DataFrame, settings_key: str) -> DataFrame:
    """Evidence rows with their hypothesis and question, keyed by ``qc_key``: a hash of the
    settings and of everything the checks read, so a changed text or setting is re-checked and
    an unchanged one never is. Rows whose claim or conflict is gone keep a null hypothesis
    (they fail with that reason, they are not dropped)."""
    rows = evidence.select("evidence_id", "claim_id", "hop", "kind", "style", "text", "finish_reason", "error")
    joined = rows.join(hypotheses(claims, conflicts), ["claim_id", "kind"], "left")
    key = F.sha2(F.concat_ws(
        "\u0001", F.lit(settings_key), F.coalesce("text", F.lit("\u0000")), F.coalesce("finish_reason", F.lit("")),
        F.coalesce("error", F.lit("")), F.coalesce("hypothesis", F.lit("")), F.coalesce("question", F.lit("")),
        F.coalesce("contrary_hypothesis", F.lit("")), F.coalesce("true_answer", F.lit("")),
    ), 256)
    return joined.withColumn("qc_key", F.substring(key, 1, 32)).select(*INPUT_COLUMNS)


def check_batches(settings: dict):
    """mapInPandas function: qc_inputs rows in, evidence_qc rows out, with this worker's models.
    ``settings``: the resolved quality section (see quality.job.resolved_settings)."""
    from misbench.quality.scorers import worker_entailment, worker_similarity

    completeness = settings["completeness"]
    target_words = int(settings["target_words"])
    threshold = float(settings["entailment"]["threshold"])
    alpha = float(settings["similarity"]["alpha"])
    overlap = int(settings["entailment"]["overlap_sentences"])

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            if batch.empty:
                continue
            batch = batch.reset_index(drop=True)
            reasons = [
                checks.completeness_failures(
                    None if pd.isna(row.text) else row.text,
                    None if pd.isna(row.finish_reason) else row.finish_reason,
                    None if pd.isna(row.error) else row.error, completeness, target_words,
                )
                for row in batch.itertuples()
            ]
            for index, row in batch.iterrows():
                if not reasons[index] and (pd.isna(row["hypothesis"]) or pd.isna(row["question"])):
                    reasons[index] = ["completeness: its claim or conflicting claim is no longer in the claims tables"]
            scored = [i for i, r in enumerate(reasons) if not r]
            entailment: dict[int, tuple[float, int]] = {}
            contrary: dict[int, float] = {}
            similarity: dict[int, float] = {}
            entailer = worker_entailment(settings)
            similar = worker_similarity(settings)
            if scored:
                texts = [batch.at[i, "text"] for i in scored]
                results = entailer.score(texts, [batch.at[i, "hypothesis"] for i in scored], overlap)
                entailment = dict(zip(scored, results))
                against = [i for i in scored if isinstance(batch.at[i, "contrary_hypothesis"], str)]
                if against:
                    contrary_results = entailer.score([batch.at[i, "text"] for i in against],
                                                      [batch.at[i, "contrary_hypothesis"] for i in against], overlap)
                    contrary = {i: score for i, (score, _) in zip(against, contrary_results)}
                similarity = dict(zip(scored, similar.scores([batch.at[i, "question"] for i in scored], texts)))
            now = pd.Timestamp.now(tz="UTC")
            out = []
            for index, row in batch.iterrows():
                score, windows = entailment.get(index, (None, None))
                cosine = similarity.get(index)
                against_score = contrary.get(index)
                text = row["text"] if isinstance(row["text"], str) else ""
                true_answer = row["true_answer"] if isinstance(row["true_answer"], str) else None
                names_true = None if index not in entailment or true_answer is None else \
                    checks.names(text, true_answer)
                row_reasons = list(reasons[index])
                if index in entailment:
                    row_reasons += checks.model_failures(score, cosine, threshold, alpha, against_score,
                                                         names_true and true_answer, row["kind"])
                out.append({
                    "evidence_id": row["evidence_id"], "claim_id": row["claim_id"], "hop": int(row["hop"]),
                    "kind": row["kind"], "style": row["style"], "passed": not row_reasons,
                    "reasons": row_reasons, "failed_filter": checks.first_failed_filter(row_reasons),
                    "complete": not reasons[index],
                    "entailment_score": score, "entailed": None if score is None else bool(score >= threshold),
                    "entailment_windows": windows, "contrary_score": against_score,
                    "names_true_answer": names_true, "similarity_score": cosine,
                    "on_topic": None if cosine is None else bool(cosine >= alpha),
                    "hypothesis": row["hypothesis"], "contrary_hypothesis": row["contrary_hypothesis"],
                    "question": row["question"],
                    "text_words": len(text.split()), "entailment_backend": entailer.backend,
                    "entailment_model": entailer.model, "similarity_model": similar.model,
                    "qc_key": row["qc_key"], "load_id": entailer.load_id, "checked_at": now,
                })
            frame = pd.DataFrame(out)
            for column in ("entailment_score", "similarity_score", "contrary_score"):
                frame[column] = frame[column].astype("float64")
            frame["names_true_answer"] = frame["names_true_answer"].astype("boolean")
            frame["entailment_windows"] = frame["entailment_windows"].astype("Int32")
            yield frame

    return run


def quality_stats(qc: DataFrame) -> DataFrame:
    """Per filter (in order), kind, style and hop: rows that reached the filter (rows_in) and
    rows that passed it (rows_out). A row reaches every filter up to the first it fails, so
    for each group: first filter's rows_in = last filter's rows_out + every rows_dropped."""
    steps = F.array(*[F.struct(F.lit(i + 1).alias("step"), F.lit(name).alias("filter"))
                      for i, name in enumerate(checks.FILTERS)])
    order = F.create_map(*[x for i, name in enumerate(checks.FILTERS) for x in (F.lit(name), F.lit(i + 1))])
    failed_step = F.coalesce(order[F.col("failed_filter")], F.lit(len(checks.FILTERS) + 1))
    rows = qc.select("kind", "style", "hop", failed_step.alias("failed_step"), F.explode(steps).alias("s"))
    reached = rows.where(F.col("s.step") <= F.col("failed_step"))
    return reached.groupBy(F.col("s.step").alias("step"), F.col("s.filter").alias("filter"), "kind", "style", "hop").agg(
        F.count("*").alias("rows_in"),
        F.sum((F.col("s.step") < F.col("failed_step")).cast("long")).alias("rows_out"),
    ).withColumn("rows_dropped", F.col("rows_in") - F.col("rows_out")).orderBy("step", "kind", "style", "hop")
