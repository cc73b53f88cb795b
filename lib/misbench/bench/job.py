"""The benchmark job: claims, conflicts and checked texts -> questions, bench_texts, bench_stats.

Deterministic and idempotent: ids and option orders are seeded, and each run replaces the
``wikidata`` partition of the three tables in one commit each (imported question sets live
in partitions of their own source and are never touched here).
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from misbench import versions
from misbench.bench import stage
from misbench.claims.job import require_one_false_object
from misbench.config import Config
from misbench.lake import Lake, drop_older_layout, write_partition
from misbench.plans import LocalCheckpoints
from misbench.versions import entering_with, versioned


@dataclass(frozen=True)
class BenchReport:
    questions: int
    by_kind: dict
    by_setting: dict
    left_out: dict  # (setting, kind or None for the whole question, reason) -> claims
    memory_positions: dict  # letter -> questions whose memory answer is there


def check_options(questions) -> None:
    """The stage's own guarantee, checked before anything is written: a benchmark that breaks
    the option rules is never stored."""
    problems = stage.options_problems(questions).count()
    if problems:
        raise RuntimeError(f"bench: {problems} questions break the option rules; nothing was written "
                           "(see misbench.bench.stage.options_problems)")


def replace_old_layout(lake: Lake) -> None:
    """Questions of the layout before one question per claim (one per claim and kind: a
    ``kind`` column, no ``kinds``), or before benchmark versions (no ``version_left``), are
    dropped, so this run writes the new layout."""
    drop_older_layout(lake, "questions", "kinds", stage.SOURCE, "one question per claim and kind",
                      companions=["bench_stats"])
    drop_older_layout(lake, "questions", "version_left", stage.SOURCE, "no benchmark versions",
                      companions=["bench_stats", "bench_texts"])
    drop_older_layout(lake, "bench_texts", "version_left", stage.SOURCE, "no benchmark versions")


def stored_rows(lake: Lake, name: str, source: str):
    return lake.read(name).where(F.col("source") == source) if lake.exists(name) else None


def run_bench(spark: SparkSession, lake: Lake, cfg: Config) -> BenchReport:
    for table in ("claims", "conflicts", "evidence", "evidence_qc", "evidence_slots"):
        if not lake.exists(table):
            raise FileNotFoundError(f"table '{table}' does not exist: run misbench generate and quality first")
    require_one_false_object(lake, "bench")
    replace_old_layout(lake)
    settings = cfg.get("bench")
    # The benchmark version is the dump the claims come from: texts and questions that are
    # no longer current are retired with it, not deleted (versions.versioned).
    version = versions.claims_version(lake)
    texts = stage.passing_texts(lake.read("evidence_slots"), lake.read("evidence_qc"), lake.read("evidence"))
    texts = texts.withColumn("source", F.lit(stage.SOURCE)).select(*stage.TEXT_COLUMNS)
    texts = versioned(stored_rows(lake, "bench_texts", stage.SOURCE), texts, "evidence_id", version)
    write_partition(lake, texts, "bench_texts", stage.SOURCE)
    stored = stored_rows(lake, "questions", stage.SOURCE)
    earlier = stored.where(F.col("version_left").isNull()).select(
        "claim_id", (F.array_position("roles", "memory") - 1).cast("int").alias("memory_position")) \
        if stored is not None else None
    current_texts = lake.read("bench_texts").where(
        (F.col("source") == stage.SOURCE) & F.col("version_left").isNull()).select(*stage.TEXT_COLUMNS)
    plan = LocalCheckpoints()  # the stage's shared frames computed once each (misbench.plans)
    questions, left_out = stage.questions(
        lake.read("claims"), lake.read("conflicts"), current_texts,
        int(settings["seed"]), settings["unsure_option"], settings["not_in_options_option"],
        earlier_positions=earlier, plan=plan)
    # computed once: the check below and the write read it (each would run the deal and
    # the options again)
    questions = questions.transform(plan.keep)
    check_options(questions)
    write_partition(lake, versioned(stored, questions, "claim_id", version, id_column="question_id"),
                    "questions", stage.SOURCE)
    questions = lake.read("questions").where((F.col("source") == stage.SOURCE) & F.col("version_left").isNull())
    write_partition(lake, stage.bench_stats(questions, left_out, stage.SOURCE), "bench_stats", stage.SOURCE)
    stats = lake.read("bench_stats").where(F.col("source") == stage.SOURCE).collect()
    # per kind: the questions with misinformation texts of that kind (the style setting shows them all)
    by_kind = {r["kind"]: r["count"] for r in stats
               if r["stat"] == "questions" and r["setting"] == "style" and r["kind"] is not None}
    by_setting = {r["setting"]: r["count"] for r in stats if r["stat"] == "questions" and r["kind"] is None}
    left = {(r["setting"], r["kind"], r["reason"]): r["count"] for r in stats if r["stat"] == "left_out"}
    positions = {r["letter"]: r["count"] for r in stats if r["stat"] == "answer_position" and r["role"] == "memory"}
    return BenchReport(questions=by_setting.get("probe", 0), by_kind=by_kind, by_setting=by_setting,
                       left_out=left, memory_positions=dict(sorted(positions.items())))


@dataclass(frozen=True)
class ImportReport:
    records: int
    questions: int
    rejects: int
    source: str


def run_import(spark: SparkSession, lake: Lake, cfg: Config, paths: list, source: str) -> ImportReport:
    """Read MisBench release files into questions and bench_texts under ``source``;
    records that cannot become questions go to import_rejects (that source's rows replaced)."""
    from pathlib import Path

    from misbench.bench import imports

    if source == stage.SOURCE or not source.replace("-", "_").isidentifier():
        raise ValueError(f"--name '{source}': letters, digits, '-' and '_', and not '{stage.SOURCE}'")
    replace_old_layout(lake)
    settings = cfg.get("bench")
    records = imports.read_release(spark, [Path(p) for p in paths]).cache()
    claims, conflicts, texts, rejects = imports.as_claims(records, source, int(settings["seed"]))
    # imported sets have no dump version: their rows belong to every benchmark version
    write_partition(lake, entering_with(texts, None), "bench_texts", source)
    stored_texts = lake.read("bench_texts").where(F.col("source") == source).select(*stage.TEXT_COLUMNS)
    # the lazy plan: release files are small, and it needs no checkpoint store on Spark Connect
    questions, left_out = stage.questions(claims, conflicts, stored_texts,
                                          int(settings["seed"]), settings["unsure_option"],
                                          settings["not_in_options_option"], source=source)
    check_options(questions)
    write_partition(lake, entering_with(questions, None), "questions", source)
    stored = lake.read("questions").where(F.col("source") == source)
    write_partition(lake, stage.bench_stats(stored, left_out, source), "bench_stats", source)
    write_partition(lake, rejects, "import_rejects", source)
    report = ImportReport(records=records.count(), questions=stored.count(),
                          rejects=lake.read("import_rejects").where(F.col("source") == source).count(), source=source)
    records.unpersist()
    return report
