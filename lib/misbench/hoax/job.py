"""The hoax job: triples + entities -> hoax_questions, hoax_stats; imports of MultiHoax files.

Deterministic and idempotent: every choice is seeded and each run replaces its source's
partition of ``hoax_questions`` and ``hoax_stats`` in one commit each. Rewording (optional)
goes through the generation job's committed chunks into ``hoax_rewordings``: a rerun after a
kill asks only what is missing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from misbench.claims.job import entity_labels
from misbench.claims.stage import contains_words, resolved_facts, word_count
from misbench.config import Config, ConfigError
from misbench.generate.job import Generator
from misbench.hoax import imports, intersection, stage
from misbench.hoax.spec import load_spec
from misbench.ids import request_id
from misbench.lake import Lake, drop_older_layout, write_partition
from misbench.llm import SamplingParams, model_identity
from misbench.plans import LocalCheckpoints
from misbench.prompts import load_prompt, messages_column

SOURCE = "wikidata"
STATS_SCHEMA = "source string, pattern string, reason string, candidates long, share double"


@dataclass(frozen=True)
class HoaxReport:
    questions: int
    by_reasoning: dict
    rejected: dict  # reason -> candidates
    idk_positions: dict  # letter -> questions
    reworded: int | None  # None: rewording off


def check_options(questions: DataFrame) -> None:
    """Every question's options obey the rules before anything is written (checked in the
    executors: only the offenders come back)."""
    @F.udf("array<string>")
    def problems(options, idk_index):
        return stage.options_problems(list(options or []), -1 if idk_index is None else int(idk_index))

    bad = questions.select("question_id", problems("options", "idk_index").alias("problems")) \
        .where(F.size("problems") > 0)
    count = bad.count()
    if count:
        first = bad.first()
        raise RuntimeError(f"hoax: {count} questions break the option rules, e.g. {first['question_id']}: "
                           f"{', '.join(first['problems'])}; nothing was written")


def reword(spark: SparkSession, lake: Lake, cfg: Config, questions: DataFrame,
           premise_words: dict[str, list[str]]) -> tuple[DataFrame, DataFrame]:
    """(questions with accepted rewordings, stats rows of the rewording). A rewording is kept
    when it is one question that still names the subject and the premise's object and keeps
    the premise's relation (one of ``premise_words``: "shares a border with" turned into "is
    near" is another premise), and does not name the near miss."""
    settings = cfg.get("hoax.reword")
    prompt = load_prompt(settings["prompt"])
    llm = cfg.get("llm")
    params = SamplingParams(temperature=0.0, top_p=1.0, max_tokens=int(settings["max_tokens"]),
                            seed=int(cfg.get("hoax.seed")), min_tokens=0)
    requests = questions.select(
        F.col("question_id").alias("claim_id"), F.lit(2).alias("hop"), F.lit("hoax").alias("kind"),
        F.lit("reword").alias("style"), F.lit(prompt.name).alias("prompt_name"), F.lit(prompt.sha).alias("prompt_hash"),
        messages_column(prompt, {"question": "template_question"}).alias("messages"),
        F.col("question_id").alias("source_evidence_id"),
    ).withColumn("evidence_id", request_id(model_identity(llm), params.key()))
    lake.write(requests, "hoax_requests_reword")
    requests = lake.read("hoax_requests_reword")
    Generator(spark, lake, cfg.with_overrides(["generate.min_words=1"]), command="hoax").run(
        "hoax rewording", requests, "hoax_rewordings", params)
    replies = lake.read("hoax_rewordings").join(requests.select("evidence_id"), "evidence_id", "left_semi") \
        .select(F.col("source_evidence_id").alias("question_id"), "text", "error")
    first_line = F.trim(F.regexp_replace(F.split(F.coalesce(F.col("text"), F.lit("")), "\n").getItem(0),
                                         r"^[\"'*\s]+|[\"'*\s]+$", ""))
    checked = questions.join(replies, "question_id", "left").withColumn("reworded_text", first_line)
    # One of the relation's words as often as in the template, at least once: a question that
    # also asks the relation ("When was the man who was born in Lyon born?") keeps "born" in
    # its clause only if the rewording says it twice.
    relation_words = F.create_map(*[part for relation, words in sorted(premise_words.items())
                                    for part in (F.lit(relation), F.array(*[F.lit(w) for w in words]))])
    keeps_relation = F.exists(
        F.coalesce(relation_words[F.col("premise_property")], F.array().cast("array<string>")),
        lambda word: word_count(F.col("reworded_text"), word)
        >= F.greatest(F.lit(1), word_count(F.col("template_question"), word))) if premise_words else F.lit(True)
    reason = (F.when(F.col("text").isNull() | F.col("error").isNotNull(), F.lit("rewording failed"))
              .when(~F.col("reworded_text").endswith("?") | (F.length("reworded_text") < 10),
                    F.lit("rewording is not one question"))
              .when(~contains_words(F.col("reworded_text"), F.col("subject_label")),
                    F.lit("rewording dropped the subject"))
              .when(~contains_words(F.col("reworded_text"), F.col("premise_object_label")),
                    F.lit("rewording dropped the false premise"))
              .when(~keeps_relation, F.lit("rewording dropped the premise's relation"))
              # "the head of state of Stugro in 1994": without its year, another person
              .when(F.exists(F.coalesce(F.col("hops"), F.array()), lambda hop: hop["at"].isNotNull()
                             & ~contains_words(F.col("reworded_text"), hop["at"])),
                    F.lit("rewording dropped the year"))
              .when(contains_words(F.col("reworded_text"), F.col("near_miss")),
                    F.lit("rewording names the near miss"))
              .otherwise(F.lit("kept")))
    checked = checked.withColumn("reword_reason", reason).cache()
    accepted = F.col("reword_reason") == "kept"
    out = checked.withColumn("question", F.when(accepted, F.col("reworded_text")).otherwise(F.col("question"))) \
        .withColumn("reworded", accepted)
    stats = checked.groupBy(F.lit(SOURCE).alias("source"), F.lit("reword").alias("pattern"),
                            F.col("reword_reason").alias("reason")).agg(F.count("*").alias("candidates"))
    total = checked.count()
    stats = stats.withColumn("share", F.round(F.col("candidates") / F.lit(max(total, 1)), 4))
    return out, stats


def replace_old_layout(lake: Lake) -> None:
    """Hoax questions of an earlier misbench (no ``premise_proof``: premises kept because a
    statement was missing) are dropped, so this run writes questions with proofs."""
    drop_older_layout(lake, "hoax_questions", "premise_proof", SOURCE, "premises without a proof")
    drop_older_layout(lake, "hoax_questions", "hops.at", SOURCE, "hops without the year they hold at")


def _rejected(lake: Lake) -> dict[str, int]:
    """Candidates not asked, per reason: the bridge walk's (its premises on either hop) by
    reason, the other patterns' as "pattern: reason" (both count "country not among
    hoax.countries")."""
    rows = lake.read("hoax_stats").where((F.col("source") == SOURCE) & (F.col("pattern") != "reword")
                                         & ~F.col("reason").isin(*stage.KEPT_REASONS)).collect()
    rejected: dict[str, int] = {}
    for r in rows:
        walk = r["pattern"] in (stage.PATTERN, stage.SECOND_HOP)
        key = r["reason"] if walk else f"{r['pattern']}: {r['reason']}"
        rejected[key] = rejected.get(key, 0) + r["candidates"]
    return rejected


def _countries(value) -> list[str] | None:
    """hoax.countries: a list of Wikidata item ids, or null for any country."""
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and re.fullmatch(r"Q\d+", v)
                                                          for v in value):
        raise ConfigError(f"hoax.countries must be null or a list of country ids such as [Q142, Q145], not {value!r}")
    return value


def _position_spread(questions: DataFrame) -> dict[str, int]:
    """How often "I do not know" sits at each letter."""
    counts = {row["idk_letter"]: row["n"] for row in questions.groupBy("idk_letter").agg(F.count("*").alias("n")).collect()}
    return {letter: int(counts.get(letter, 0)) for letter in stage.LETTERS}


def run_hoax(spark: SparkSession, lake: Lake, cfg: Config) -> HoaxReport:
    for table in ("triples", "entities"):
        if not lake.exists(table):
            raise FileNotFoundError(f"table '{table}' does not exist: run misbench ingest first")
    spec = load_spec()
    settings = cfg.get("hoax")
    seed = int(settings["seed"])
    # checkpointed: both patterns join them many times
    facts = resolved_facts(lake.read("triples"), spec.properties, cfg.get("claims.reference_date")).localCheckpoint()
    labels = entity_labels(lake).localCheckpoint()
    dated_first = stage.dated_first_hops(lake.read("triples"), spec, cfg.get("claims.reference_date"))
    containment = stage.containment_links(facts).localCheckpoint()  # both patterns' part-of test
    plan = LocalCheckpoints()  # the stage's shared frames computed once each (misbench.plans)
    countries = _countries(settings.get("countries"))
    questions, candidates = stage.hoax_questions(facts, labels, stage.spec_frames(spark, spec), spec, seed,
                                                 int(settings["substitute_attempts"]), SOURCE,
                                                 tried_per_chain=int(settings["premises_tried_per_chain"]),
                                                 countries=countries, dated_first=dated_first,
                                                 containment=containment, plan=plan)
    intersections, intersection_candidates = intersection.intersection_questions(facts, labels, spec, seed, SOURCE,
                                                                                 countries, containment, plan)
    questions = cached = questions.unionByName(intersections).cache()
    stats = stage.hoax_stats(candidates.select("pattern", "reason").unionByName(
        intersection_candidates.select("pattern", "reason")), SOURCE)
    reworded = None
    # Bridge questions only: a comparison names both descriptions, its near miss among them;
    # a rewording of a second-hop question could move its clause onto the bridge ("the
    # spouse of Viktor Daso's father, who was born in Nake"), and no check here would see it.
    bridge = F.col("pattern") == stage.PATTERN
    if settings["reword"]["enabled"] and questions.where(bridge).count():
        with_names = questions.where(bridge).join(
            labels.select(F.col("id").alias("subject_id"), F.col("label").alias("subject_label")), "subject_id", "left")
        rewritten, reword_stats = reword(spark, lake, cfg, with_names, spec.premise_words)
        questions = stage.conform(rewritten).unionByName(questions.where(~bridge))
        stats = stats.unionByName(reword_stats)
    check_options(questions)
    replace_old_layout(lake)
    write_partition(lake, questions, "hoax_questions", SOURCE)
    write_partition(lake, stats.select(*[c.split()[0] for c in STATS_SCHEMA.split(", ")]), "hoax_stats", SOURCE)
    # not cached: each count below reads only the columns it needs
    stored = lake.read("hoax_questions").where(F.col("source") == SOURCE)
    if settings["reword"]["enabled"]:
        reworded = stored.where(F.col("reworded")).count()
    report = HoaxReport(
        questions=stored.count(),
        by_reasoning={r["reasoning_type"]: r["n"] for r in stored.groupBy("reasoning_type").agg(F.count("*").alias("n")).collect()},
        rejected=_rejected(lake),
        idk_positions=_position_spread(stored), reworded=reworded)
    cached.unpersist()  # the walk's questions, also where rewording replaced them
    return report


@dataclass(frozen=True)
class HoaxImportReport:
    records: int
    questions: int
    rejects: int
    source: str


def run_hoax_import(spark: SparkSession, lake: Lake, cfg: Config, paths: list, source: str) -> HoaxImportReport:
    """Read MultiHoax release files (JSON, JSON lines, CSV) into ``hoax_questions`` under
    ``source``; records that cannot become questions go to ``hoax_import_rejects``."""
    if source == SOURCE or not source.replace("-", "_").isidentifier():
        raise ValueError(f"--name '{source}': letters, digits, '-' and '_', and not '{SOURCE}'")
    files = []
    for path in map(Path, paths):
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        files.append((path.name, list(imports.records(path))))
    rows, rejects = imports.as_rows(files, source)
    names = [name for name, _ in stage.QUESTION_FIELDS]
    questions = spark.createDataFrame([tuple(row.get(n) for n in names) for row in rows], stage.QUESTION_SCHEMA)
    check_options(questions)
    replace_old_layout(lake)
    write_partition(lake, questions, "hoax_questions", source)
    write_partition(lake, spark.createDataFrame(rejects, "source string, file string, line int, reason string, record string"),
                    "hoax_import_rejects", source)
    return HoaxImportReport(records=sum(len(items) for _, items in files), questions=len(rows),
                            rejects=len(rejects), source=source)
