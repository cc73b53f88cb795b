"""Benchmark stage: claims + conflicts + texts that passed quality control -> questions.

One question per claim and conflict kind that has passing texts. Five options, one per role:
the memory answer (the true object), the misinformation answer (the object of that kind's
conflict: the false claim its texts state), an irrelevant answer of the same type (chosen by
the claims stage, false by meaning), "Unsure" and "Not in the options". The order is seeded
per question and stored (``options`` and ``roles`` aligned, ``letters`` per role). The memory
answer's letter is dealt round-robin within each kind and relation, in a seeded order and
from a seeded start letter per group, so right answers spread evenly over A-E (within one
of each other in every group); the other roles are shuffled around it. The same questions
get the same letters on every run; adding questions to a group moves letters within it (a
moved letter is a new prompt, which evaluation asks again).

Pure DataFrame functions; ``misbench.bench.job`` reads and writes the tables.
"""
from __future__ import annotations

import itertools

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from misbench.claims.stage import normalized, stable_id

ROLES = ("memory", "misinformation", "irrelevant", "unsure", "not_in_options")
LETTERS = ("A", "B", "C", "D", "E")
STYLES = ("wikipedia", "news", "science", "blog", "technical", "confident")
ENTRY_STYLE = "wikipedia"  # the encyclopedia entry: the text of the single and pair settings
SOURCE = "wikidata"  # questions built here; imported sets carry their own source name

QUESTION_COLUMNS = [
    "question_id", "source", "claim_id", "kind", "hop", "relation", "topic", "answer_type", "subject_id",
    "subject_label", "question", "options", "roles", "letters", "memory_answer", "misinformation_answer",
    "irrelevant_answer", "misinformation_texts", "correct_texts", "pair_misinformation_first", "settings",
]
TEXT_COLUMNS = ["evidence_id", "source", "claim_id", "kind", "style", "text"]


def _hash(*parts) -> Column:
    return F.xxhash64(*[p if isinstance(p, Column) else F.lit(p) for p in parts])


def passing_texts(slots: DataFrame, verdicts: DataFrame, evidence: DataFrame) -> DataFrame:
    """The text of each slot (claim, kind, style) that holds one whose current verdict is a
    pass: evidence_id, claim_id, kind, style, text."""
    chosen = slots.where(F.col("passed") & F.col("evidence_id").isNotNull()).select("evidence_id")
    return evidence.join(chosen, "evidence_id", "left_semi") \
        .join(verdicts.where(F.col("passed")).select("evidence_id"), "evidence_id", "left_semi") \
        .select("evidence_id", "claim_id", "kind", "style", "text")


def _texts_by_style(texts: DataFrame, kind_column: str) -> DataFrame:
    return texts.groupBy("claim_id", F.col("kind").alias(kind_column)).agg(
        F.map_from_entries(F.collect_list(F.struct("style", "evidence_id"))).alias("by_style"))


def _role_order(question_id: Column, memory_position: Column, seed: int) -> Column:
    """The five roles in display order: memory at ``memory_position`` (0-4), the other four
    in one of their 24 orders picked by a hash of the question."""
    others = [list(p) for p in itertools.permutations(ROLES[1:])]
    table = F.array(*[F.array(*[F.lit(r) for r in p]) for p in others])
    rest = F.element_at(table, (F.pmod(_hash(question_id, "roles", seed), F.lit(len(others))) + 1).cast("int"))
    head = F.slice(rest, 1, memory_position)  # slice with length 0 is empty
    tail = F.slice(rest, memory_position + 1, 4 - memory_position)
    return F.concat(head, F.array(F.lit("memory")), tail)


def questions(claims: DataFrame, conflicts: DataFrame, texts: DataFrame, seed: int,
              unsure: str = "Unsure", not_in_options: str = "Not in the options",
              source: str = SOURCE) -> tuple[DataFrame, DataFrame]:
    """(questions, left_out): one question per claim and conflict kind with at least one
    passing misinformation text of that kind; ``left_out`` counts, per setting and kind, the
    claims that lack what the setting needs (with the reason)."""
    misinformation = _texts_by_style(texts.where(F.col("kind") != "correct"), "kind") \
        .withColumnRenamed("by_style", "misinformation_texts")
    correct = _texts_by_style(texts.where(F.col("kind") == "correct"), "text_kind") \
        .select("claim_id", F.col("by_style").alias("correct_texts"))
    base = claims.select(
        "claim_id", "hop", "relation", "topic", "answer_type", "subject_id", "subject_label", "question",
        F.col("object_label").alias("memory_answer"),
    ).join(conflicts.select("claim_id", "kind", F.col("object_label").alias("misinformation_answer"),
                            F.col("irrelevant_label").alias("irrelevant_answer")), "claim_id")
    rows = base.join(misinformation, ["claim_id", "kind"], "left").join(correct, "claim_id", "left") \
        .withColumn("question_id", stable_id(F.lit("question"), F.col("claim_id"), F.col("kind")))
    names = [F.col("memory_answer"), F.col("misinformation_answer"), F.col("irrelevant_answer"),
             F.lit(unsure), F.lit(not_in_options)]
    distinct = (F.size(F.array_distinct(F.array(*[normalized(n) for n in names]))) == len(names)) \
        & F.forall(F.array(*names), lambda name: name.isNotNull() & (F.trim(name) != ""))
    has_entry = F.coalesce(F.col("misinformation_texts").getItem(ENTRY_STYLE).isNotNull(), F.lit(False))
    has_correct_entry = F.coalesce(F.col("correct_texts").getItem(ENTRY_STYLE).isNotNull(), F.lit(False))
    has_any = F.coalesce(F.size("misinformation_texts") > 0, F.lit(False))
    reason = (F.when(~has_any, F.lit("no passing misinformation text"))
              .when(F.col("irrelevant_answer").isNull(), F.lit("no irrelevant answer"))
              .when(~F.coalesce(distinct, F.lit(False)), F.lit("options not distinct after normalisation")))
    rows = rows.withColumn("reason", reason)
    settings = F.filter(F.array(
        F.lit("probe"), F.lit("detection"),
        F.when(has_entry, F.lit("single")),
        F.when(has_entry & has_correct_entry, F.lit("pair")),
        F.lit("style"),
    ), lambda s: s.isNotNull())

    # Left out: the whole question (reason), or a setting the question lacks texts for.
    missing_setting = rows.where(F.col("reason").isNull()).select(
        "kind", F.explode(F.array(
            F.when(~has_entry, F.struct(F.lit("single").alias("setting"),
                                        F.lit("no passing misinformation entry").alias("reason"))),
            F.when(~has_entry, F.struct(F.lit("pair").alias("setting"),
                                        F.lit("no passing misinformation entry").alias("reason")))
            .when(~has_correct_entry, F.struct(F.lit("pair").alias("setting"),
                                               F.lit("no passing correct entry").alias("reason"))),
        )).alias("gap")).where(F.col("gap").isNotNull()).select("kind", "gap.setting", "gap.reason")
    whole = rows.where(F.col("reason").isNotNull()).select("kind", F.lit("all").alias("setting"), "reason")
    left_out = whole.unionByName(missing_setting).groupBy("setting", "kind", "reason").agg(F.count("*").alias("count"))

    kept = rows.where(F.col("reason").isNull())
    # Dealt round-robin in a seeded order within each kind and relation, each group from its
    # own seeded start letter: every group, small ones too, spreads evenly over A-E.
    deal = Window.partitionBy("kind", "relation").orderBy(_hash(F.col("question_id"), "deal", seed), "question_id")
    start = F.pmod(_hash(F.col("kind"), F.col("relation"), "start", seed), F.lit(5))
    kept = kept.withColumn("memory_position", F.pmod(F.row_number().over(deal) - 1 + start, F.lit(5)).cast("int")) \
        .withColumn("roles", _role_order(F.col("question_id"), F.col("memory_position"), seed))
    text_of = F.create_map(
        F.lit("memory"), F.col("memory_answer"), F.lit("misinformation"), F.col("misinformation_answer"),
        F.lit("irrelevant"), F.col("irrelevant_answer"), F.lit("unsure"), F.lit(unsure),
        F.lit("not_in_options"), F.lit(not_in_options))
    letters = F.array(*[F.lit(letter) for letter in LETTERS])
    kept = kept.withColumn("options", F.transform("roles", lambda role: F.element_at(text_of, role))) \
        .withColumn("letters", F.map_from_arrays(F.col("roles"), letters)) \
        .withColumn("pair_misinformation_first", F.pmod(_hash(F.col("question_id"), "pair", seed), F.lit(2)) == 0) \
        .withColumn("settings", settings) \
        .withColumn("correct_texts", F.coalesce("correct_texts", F.create_map().cast("map<string,string>"))) \
        .withColumn("source", F.lit(source))
    return kept.select(*QUESTION_COLUMNS), left_out


def position_spread(questions: DataFrame) -> DataFrame:
    """Per role and letter, how many questions put that role there."""
    return questions.select("source", F.explode("letters").alias("role", "letter")) \
        .groupBy("source", "role", "letter").agg(F.count("*").alias("count"))


def bench_stats(questions: DataFrame, left_out: DataFrame, source: str) -> DataFrame:
    """One table for what a user asks of the benchmark's make-up: questions per kind and
    setting, claims left out of a setting with the reason, and the spread of answer letters."""
    per_setting = questions.select("source", "kind", F.explode("settings").alias("setting")) \
        .groupBy("source", "setting", "kind").agg(F.count("*").alias("count"))
    rows = [
        per_setting.select("source", F.lit("questions").alias("stat"), "setting", "kind",
                           F.lit(None).cast("string").alias("role"), F.lit(None).cast("string").alias("letter"),
                           F.lit(None).cast("string").alias("reason"), "count"),
        left_out.select(F.lit(source).alias("source"), F.lit("left_out").alias("stat"), "setting", "kind",
                        F.lit(None).cast("string").alias("role"), F.lit(None).cast("string").alias("letter"),
                        "reason", "count"),
        position_spread(questions).select("source", F.lit("answer_position").alias("stat"),
                                          F.lit(None).cast("string").alias("setting"),
                                          F.lit(None).cast("string").alias("kind"), "role", "letter",
                                          F.lit(None).cast("string").alias("reason"), "count"),
    ]
    out = rows[0]
    for frame in rows[1:]:
        out = out.unionByName(frame)
    return out.withColumn("count", F.col("count").cast("long"))


def options_problems(questions: DataFrame) -> DataFrame:
    """Questions breaking the option rules (empty when all is well): five options, each role
    once with one letter, options distinct after normalisation. For tests and SQL checks."""
    normal = F.transform("options", lambda o: normalized(o))
    return questions.where(
        ~F.forall("options", lambda o: o.isNotNull() & (F.trim(o) != "")) | (F.size("options") != 5) | (F.size(F.array_distinct("roles")) != 5)
        | (F.size(F.array_distinct(normal)) != 5) | (F.size(F.map_values("letters")) != 5)
        | (F.size(F.array_distinct(F.map_values("letters"))) != 5)
    )

