"""Question sets from outside: the published MisBench release, read into our tables.

The release (and the official code's inputs) are JSON lines, one claim per record, with
``question``, ``object`` (the true answer), ``replaced_object`` (the misinformation answer),
``relation`` and the texts ``correct_evidence``, ``fact_conflict_evidence``,
``temporal_conflict_evidence`` and ``semantic_conflict_evidence`` (any may be missing);
``subject`` and ``hop`` where present. A record becomes one question, its texts by conflict
kind, assembled exactly as our own (``bench.stage.questions``); the irrelevant answer is the
true answer of another record of the same relation, different by name from both others and
never an answer another record gives for the same subject and relation. A record without
``hop`` is a one-hop claim.
Records that cannot become a question go to ``import_rejects`` with the reason.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from misbench.claims.stage import normalized
from misbench.styles import ENTRY_STYLE
from misbench.ids import seeded_hash, stable_id

TEXT_FIELDS = {
    "correct": "correct_evidence",
    "factual": "fact_conflict_evidence",
    "temporal": "temporal_conflict_evidence",
    "semantic": "semantic_conflict_evidence",
}
REQUIRED = ("question", "object", "replaced_object", "relation")
RECORD_SCHEMA = (
    "file string, line long, question string, object string, replaced_object string, relation string, "
    "subject string, hop int, correct_evidence string, fact_conflict_evidence string, "
    "temporal_conflict_evidence string, semantic_conflict_evidence string, reason string"
)


def _records(path: Path) -> Iterable[tuple[int, object]]:
    """(line number, parsed record or the parse error) from a JSON-lines or a JSON-array file."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (JSON lines or a JSON array expected): {exc}") from exc
    if text.lstrip().startswith("["):
        try:
            for index, record in enumerate(json.loads(text), start=1):
                yield index, record
        except json.JSONDecodeError as exc:
            yield 0, exc
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                yield number, exc


def read_release(spark: SparkSession, paths: list[Path]) -> DataFrame:
    """Every record of the files, with ``reason`` set where it cannot be used."""
    rows = []
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        for number, record in _records(path):
            base = {"file": path.name, "line": number}
            if isinstance(record, Exception) or not isinstance(record, dict):
                rows.append({**base, "reason": f"not a JSON object: {str(record)[:200]}"})
                continue
            missing = [f for f in REQUIRED if not str(record.get(f) or "").strip()]
            texts = {f: (str(record[f]) if record.get(f) else None) for f in TEXT_FIELDS.values()}
            reason = None
            if missing:
                reason = f"missing {', '.join(missing)}"
            elif not any(texts[f] for f in list(TEXT_FIELDS.values())[1:]):
                reason = "no misinformation text"
            hop = record.get("hop")
            rows.append({**base, **texts, "question": record.get("question"), "object": record.get("object"),
                         "replaced_object": record.get("replaced_object"), "relation": record.get("relation"),
                         "subject": record.get("subject"), "hop": int(hop) if str(hop or "").isdigit() else 1,
                         "reason": reason})
    return spark.createDataFrame([tuple(r.get(c) for c in _columns()) for r in rows], RECORD_SCHEMA)


def _columns() -> list[str]:
    return [part.strip().split(" ")[0] for part in RECORD_SCHEMA.split(",")]


def as_claims(records: DataFrame, source: str, seed: int) -> tuple[DataFrame, DataFrame, DataFrame, DataFrame]:
    """(claims, conflicts, texts, rejects) in the shapes ``bench.stage.questions`` reads."""
    keyed = records.where(F.col("reason").isNull()) \
        .withColumn("claim_id", stable_id(F.lit(source), F.col("question"), F.col("object"), F.col("replaced_object")))
    first = Window.partitionBy("claim_id").orderBy("file", "line")
    keyed = keyed.withColumn("copy", F.row_number().over(first))
    duplicates = keyed.where(F.col("copy") > 1).select("file", "line", F.lit(
        "duplicate of an earlier record (same question and answers)").alias("reason"))
    usable = keyed.where(F.col("copy") == 1).drop("copy")
    subject = F.coalesce(normalized(F.col("subject")), normalized(F.col("question")))
    pool = usable.select("relation", F.col("object").alias("irrelevant_label"),
                         subject.alias("pool_subject")).distinct()
    # Another record's answer is false for this one unless it answers the same subject and
    # relation (a second school, a second employer): those never become the irrelevant option.
    true_for_subject = usable.select("relation", subject.alias("pool_subject"),
                                     normalized(F.col("object")).alias("true_name")).distinct()
    candidates = usable.select("claim_id", "relation", "object", "replaced_object", subject.alias("pool_subject")) \
        .join(pool.withColumnRenamed("pool_subject", "other_subject"), "relation").where(
        (normalized(F.col("irrelevant_label")) != normalized(F.col("object")))
        & (normalized(F.col("irrelevant_label")) != normalized(F.col("replaced_object"))))
    candidates = candidates.withColumn("true_name", normalized(F.col("irrelevant_label"))) \
        .join(true_for_subject, ["relation", "pool_subject", "true_name"], "left_anti")
    pick = Window.partitionBy("claim_id").orderBy(seeded_hash(F.col("claim_id"), F.col("irrelevant_label"), seed))
    irrelevant = candidates.withColumn("n", F.row_number().over(pick)).where("n = 1") \
        .select("claim_id", "irrelevant_label")
    claims = usable.select(
        "claim_id", "hop", "relation", F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("string").alias("answer_type"), F.lit(None).cast("string").alias("subject_id"),
        F.col("subject").alias("subject_label"), "question", F.col("object").alias("object_label"))
    kinds = [k for k in TEXT_FIELDS if k != "correct"]
    conflicts = usable.select("claim_id", F.explode(F.array(*[
        F.when(F.col(TEXT_FIELDS[k]).isNotNull(), F.lit(k)) for k in kinds])).alias("kind"),
        F.col("replaced_object").alias("object_label")).where(F.col("kind").isNotNull()) \
        .join(irrelevant, "claim_id", "left")
    texts = usable.select("claim_id", F.explode(F.array(*[
        F.struct(F.lit(k).alias("kind"), F.col(field).alias("text")) for k, field in TEXT_FIELDS.items()
    ])).alias("t")).select("claim_id", "t.kind", "t.text").where(F.col("text").isNotNull()) \
        .withColumn("style", F.lit(ENTRY_STYLE)).withColumn("source", F.lit(source)) \
        .withColumn("evidence_id", stable_id(F.lit(source), F.col("claim_id"), F.col("kind"))) \
        .select("evidence_id", "source", "claim_id", "kind", "style", "text")
    no_irrelevant = usable.join(irrelevant, "claim_id", "left_anti").select(
        "file", "line", F.lit("no irrelevant answer: no other record of the relation has a different answer")
        .alias("reason"))
    rejects = records.where(F.col("reason").isNotNull()).select("file", "line", "reason") \
        .unionByName(duplicates).unionByName(no_irrelevant) \
        .withColumn("source", F.lit(source))
    return claims, conflicts, texts, rejects
