"""Benchmark stage: claims + conflicts + texts that passed quality control -> questions.

One question per claim, as in MisBench (section 2.5, Table 2): its conflicts of every kind
name one false object, so one set of options serves the misinformation texts of all kinds
(with the default six styles 18: three kinds x six styles; 12 where the relation cannot change
over time) and the correct text of each style. ``misinformation_texts`` maps kind -> style ->
evidence id; evaluation draws the text a setting shows by kind, so every result keeps its kind.

Five options, one per role: the memory answer (the true object), the misinformation answer
(the claims' shared false object), an irrelevant answer of the same type (chosen by the
claims stage, false by meaning), "Unsure" and "Not in the options". The order is seeded per
question and stored (``options`` and ``roles`` aligned, ``letters`` per role). The memory
answer's letter is dealt round-robin within each relation, in a seeded order and from a
seeded start letter per relation, so right answers spread evenly over A-E (within one of
each other in every relation); the other roles are shuffled around it. The same questions
get the same letters on every run. On a refresh (``earlier_positions``) the questions of an
earlier benchmark version keep their letters (their prompts stay the same, so evaluation does
not ask them again) and new ones go to the letters their relation holds least: retired
questions can leave a relation's spread wider than one until new ones fill it.

Pure DataFrame functions; ``misbench.bench.job`` reads and writes the tables.
"""
from __future__ import annotations

import itertools

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from misbench.claims.stage import normalized
from misbench.styles import ENTRY_STYLE
from misbench.ids import seeded_hash, stable_id
from misbench.plans import LAZY, Lazy
from misbench.prompts import OPTION_LETTERS

ROLES = ("memory", "misinformation", "irrelevant", "unsure", "not_in_options")
LETTERS = OPTION_LETTERS[:len(ROLES)]
SOURCE = "wikidata"  # questions built here; imported sets carry their own source name

QUESTION_COLUMNS = [
    "question_id", "source", "claim_id", "kinds", "hop", "relation", "topic", "answer_type", "subject_id",
    "subject_label", "question", "options", "roles", "letters", "memory_answer", "misinformation_answer",
    "irrelevant_answer", "misinformation_texts", "correct_texts", "pair_misinformation_first", "settings",
]
TEXT_COLUMNS = ["evidence_id", "source", "claim_id", "kind", "style", "text"]
# Memory answers' places (a claim id and a letter, some 50 bytes a row), earlier and newly
# dealt, join the questions as a broadcast up to this many (439k at 10^5 entities): joined by
# a shuffle, the questions' wide rows (their maps of texts) crossed it, 468 MiB at 10^5.
LETTERS_BROADCAST_ROWS = 1_000_000


def passing_texts(slots: DataFrame, verdicts: DataFrame, evidence: DataFrame) -> DataFrame:
    """The text of each slot (claim, kind, style) that holds one whose current verdict is a
    pass: evidence_id, claim_id, kind, style, text."""
    chosen = slots.where(F.col("passed") & F.col("evidence_id").isNotNull()).select("evidence_id")
    return evidence.join(chosen, "evidence_id", "left_semi") \
        .join(verdicts.where(F.col("passed")).select("evidence_id"), "evidence_id", "left_semi") \
        .select("evidence_id", "claim_id", "kind", "style", "text")


def _texts_by_style(texts: DataFrame) -> DataFrame:
    """claim_id, kind, by_style (style -> evidence id)."""
    return texts.groupBy("claim_id", "kind").agg(
        F.map_from_entries(F.collect_list(F.struct("style", "evidence_id"))).alias("by_style"))


def entry_kinds(question: Column, need_correct_entry: bool = False) -> Column:
    """The kinds of a question's misinformation whose encyclopedia entry passed (the text of
    the single and pair settings); with ``need_correct_entry``, none unless the correct
    entry passed too."""
    kinds = F.filter(F.map_keys(question["misinformation_texts"]),
                     lambda k: question["misinformation_texts"][k].getItem(ENTRY_STYLE).isNotNull())
    if need_correct_entry:
        kinds = F.when(question["correct_texts"].getItem(ENTRY_STYLE).isNotNull(), kinds) \
            .otherwise(F.array().cast("array<string>"))
    return F.array_sort(kinds)


def setting_kinds(setting: Column, kinds: Column, single_kinds: Column, pair_kinds: Column) -> Column:
    """The kinds of misinformation a setting shows a question with (the probe shows none),
    from its ``kinds`` and its ``entry_kinds`` without and with ``need_correct_entry``."""
    return (F.when(setting == "probe", F.array().cast("array<string>"))
            .when(setting == "single", single_kinds)
            .when(setting == "pair", pair_kinds)
            .otherwise(kinds))


def role_order(question_id: Column, memory_position: Column, seed: Column | int) -> Column:
    """The five roles in display order: memory at ``memory_position`` (0-4), the other four
    in one of their 24 orders picked by a hash of the question."""
    others = [list(p) for p in itertools.permutations(ROLES[1:])]
    table = F.array(*[F.array(*[F.lit(r) for r in p]) for p in others])
    rest = F.element_at(table, (F.pmod(seeded_hash(question_id, "roles", seed), F.lit(len(others))) + 1).cast("int"))
    head = F.slice(rest, 1, memory_position)  # slice with length 0 is empty
    tail = F.slice(rest, memory_position + 1, 4 - memory_position)
    return F.concat(head, F.array(F.lit("memory")), tail)


def questions(claims: DataFrame, conflicts: DataFrame, texts: DataFrame, seed: int,
              unsure: str = "Unsure", not_in_options: str = "Not in the options",
              source: str = SOURCE, earlier_positions: DataFrame | None = None,
              plan: Lazy = LAZY) -> tuple[DataFrame, DataFrame]:
    """(questions, left_out): one question per claim with at least one passing
    misinformation text of any kind. ``conflicts`` name one false object per claim (the
    claims stage's rule; ``claims.stage.mixed_false_objects`` finds the claims that break it).
    ``left_out`` counts claims per setting and kind that lack what the setting needs, with
    the reason: setting ``all`` is the whole question (kind null) or, with a kind, every
    setting of that kind. ``earlier_positions`` (claim_id, memory_position): the memory answer's
    place in the questions of an earlier benchmark version, kept on a refresh so that a new
    question does not move the letters of the others (their prompts stay the same). ``plan``:
    where the job computes shared frames once (``misbench.plans``)."""
    by_kind = _texts_by_style(texts.where(F.col("kind") != "correct"))
    misinformation = by_kind.groupBy("claim_id").agg(
        F.map_from_entries(F.collect_list(F.struct("kind", "by_style"))).alias("misinformation_texts"))
    correct = _texts_by_style(texts.where(F.col("kind") == "correct")) \
        .select("claim_id", F.col("by_style").alias("correct_texts"))
    answers = conflicts.groupBy("claim_id").agg(
        F.min("object_label").alias("misinformation_answer"), F.min("irrelevant_label").alias("irrelevant_answer"),
        F.array_sort(F.collect_set("kind")).alias("conflict_kinds"))
    base = claims.select(
        "claim_id", "hop", "relation", "topic", "answer_type", "subject_id", "subject_label", "question",
        F.col("object_label").alias("memory_answer"),
    ).join(answers, "claim_id")
    rows = base.join(misinformation, "claim_id", "left").join(correct, "claim_id", "left") \
        .withColumn("misinformation_texts", F.coalesce(
            "misinformation_texts", F.create_map().cast("map<string,map<string,string>>"))) \
        .withColumn("correct_texts", F.coalesce("correct_texts", F.create_map().cast("map<string,string>"))) \
        .withColumn("kinds", F.array_sort(F.map_keys("misinformation_texts"))) \
        .withColumn("question_id", stable_id(F.lit("question"), F.col("claim_id")))
    names = [F.col("memory_answer"), F.col("misinformation_answer"), F.col("irrelevant_answer"),
             F.lit(unsure), F.lit(not_in_options)]
    distinct = (F.size(F.array_distinct(F.array(*[normalized(n) for n in names]))) == len(names)) \
        & F.forall(F.array(*names), lambda name: name.isNotNull() & (F.trim(name) != ""))
    question = F.struct("misinformation_texts", "correct_texts")
    singles, pairs = entry_kinds(question), entry_kinds(question, need_correct_entry=True)
    reason = (F.when(F.size("kinds") == 0, F.lit("no passing misinformation text"))
              .when(F.col("irrelevant_answer").isNull(), F.lit("no irrelevant answer"))
              .when(~F.coalesce(distinct, F.lit(False)), F.lit("options not distinct after normalisation")))
    # kept: the questions and the left-out counts both read it, and each would otherwise
    # group every text by claim again (a fifth of the job at 10^5 entities)
    rows = rows.withColumn("reason", reason).transform(plan.keep)
    settings = F.filter(F.array(
        F.lit("probe"), F.lit("detection"),
        F.when(F.size(singles) > 0, F.lit("single")),
        F.when(F.size(pairs) > 0, F.lit("pair")),
        F.lit("style"),
    ), lambda s: s.isNotNull())

    # Left out: the whole question; a kind with no passing text (no setting shows it); or a
    # setting that lacks its entry for a kind that has other texts.
    kept = rows.where(F.col("reason").isNull())
    no_entry = F.lit("no passing misinformation entry")
    gaps = kept.select(F.explode("conflict_kinds").alias("kind"), "misinformation_texts", "correct_texts").select(
        "kind", F.explode(F.array(
            F.when(F.col("misinformation_texts")[F.col("kind")].isNull(),
                   F.struct(F.lit("all").alias("setting"), F.lit("no passing misinformation text").alias("reason"))),
            F.when(F.col("misinformation_texts")[F.col("kind")].isNotNull()
                   & F.col("misinformation_texts")[F.col("kind")].getItem(ENTRY_STYLE).isNull(),
                   F.struct(F.lit("single").alias("setting"), no_entry.alias("reason"))),
            F.when(F.col("misinformation_texts")[F.col("kind")].isNotNull()
                   & F.col("misinformation_texts")[F.col("kind")].getItem(ENTRY_STYLE).isNull(),
                   F.struct(F.lit("pair").alias("setting"), no_entry.alias("reason")))
            .when(F.col("misinformation_texts")[F.col("kind")].isNotNull()
                  & F.col("correct_texts").getItem(ENTRY_STYLE).isNull(),
                  F.struct(F.lit("pair").alias("setting"), F.lit("no passing correct entry").alias("reason"))),
        )).alias("gap")).where(F.col("gap").isNotNull()).select("kind", "gap.setting", "gap.reason")
    whole = rows.where(F.col("reason").isNotNull()).select(
        F.lit(None).cast("string").alias("kind"), F.lit("all").alias("setting"), "reason")
    left_out = whole.unionByName(gaps).groupBy("setting", "kind", "reason").agg(F.count("*").alias("count"))

    # Dealt round-robin in a seeded order within each relation, each relation from its own
    # seeded start letter: every relation, small ones too, spreads evenly over A-E.
    # On a refresh the earlier questions keep their place; the new ones fill the letters their
    # relation's kept questions hold least (water-filling: each new question takes the next
    # free slot by level, ties from the seeded start letter on), so retired questions' gaps
    # close. With nothing earlier every level starts at 0: the plain round-robin.
    if earlier_positions is None:
        kept = kept.withColumn("earlier_position", F.lit(None).cast("int"))
    else:
        earlier = earlier_positions.select("claim_id", F.col("memory_position").alias("earlier_position"))
        kept = kept.join(plan.broadcast_if_small(earlier, LETTERS_BROADCAST_ROWS), "claim_id", "left")
    is_new = F.col("earlier_position").isNull()
    held = kept.groupBy("relation").agg(
        *[F.count(F.when(F.col("earlier_position") == letter, 1)).alias(f"held_{letter}") for letter in range(5)],
        F.count(F.when(is_new, 1)).alias("new_questions"))
    start = F.pmod(seeded_hash(F.col("relation"), "start", seed), F.lit(5))
    slots = held.where(F.col("new_questions") > 0).select("relation", "new_questions", F.explode(F.array(*[
        F.struct(F.lit(letter).alias("letter"), F.col(f"held_{letter}").alias("held"),
                 F.pmod(F.lit(letter) - start, F.lit(5)).alias("after_start")) for letter in range(5)])).alias("slot")) \
        .select("relation", "new_questions", "slot.*") \
        .withColumn("level", F.explode(F.sequence(F.col("held"), F.col("held") + F.col("new_questions") - 1))) \
        .withColumn("rank", F.row_number().over(Window.partitionBy("relation").orderBy("level", "after_start"))) \
        .where(F.col("rank") <= F.col("new_questions")).select("relation", "rank", F.col("letter").alias("dealt"))
    deal = Window.partitionBy("relation").orderBy(seeded_hash(F.col("question_id"), "deal", seed), "question_id")
    dealt = kept.where(is_new).withColumn("rank", F.row_number().over(deal)).join(slots, ["relation", "rank"]) \
        .select("claim_id", "dealt")
    kept = kept.join(plan.broadcast_if_small(dealt, LETTERS_BROADCAST_ROWS), "claim_id", "left") \
        .withColumn("memory_position", F.coalesce("earlier_position", "dealt").cast("int")) \
        .withColumn("roles", role_order(F.col("question_id"), F.col("memory_position"), seed))
    text_of = F.create_map(
        F.lit("memory"), F.col("memory_answer"), F.lit("misinformation"), F.col("misinformation_answer"),
        F.lit("irrelevant"), F.col("irrelevant_answer"), F.lit("unsure"), F.lit(unsure),
        F.lit("not_in_options"), F.lit(not_in_options))
    letters = F.array(*[F.lit(letter) for letter in LETTERS])
    kept = kept.withColumn("options", F.transform("roles", lambda role: F.element_at(text_of, role))) \
        .withColumn("letters", F.map_from_arrays(F.col("roles"), letters)) \
        .withColumn("pair_misinformation_first", F.pmod(seeded_hash(F.col("question_id"), "pair", seed), F.lit(2)) == 0) \
        .withColumn("settings", settings) \
        .withColumn("source", F.lit(source))
    return kept.select(*QUESTION_COLUMNS), left_out


def require_one_question_per_claim(questions: DataFrame, stage_name: str) -> None:
    """Stop a stage that reads a questions table of the layout before one question per claim
    (one per claim and kind: a ``kind`` column, no ``kinds``)."""
    if "kinds" not in questions.columns:
        raise RuntimeError(f"{stage_name}: the questions table has the layout of an earlier misbench (one "
                           "question per claim and kind); rebuild it: misbench run-all --from claims")


def position_spread(questions: DataFrame) -> DataFrame:
    """Per role and letter, how many questions put that role there."""
    return questions.select("source", F.explode("letters").alias("role", "letter")) \
        .groupBy("source", "role", "letter").agg(F.count("*").alias("count"))


def bench_stats(questions: DataFrame, left_out: DataFrame, source: str) -> DataFrame:
    """One table for what a user asks of the benchmark's make-up: questions per setting (kind
    null) and per setting and kind (the questions the setting shows misinformation of that
    kind), claims left out of a setting with the reason, and the spread of answer letters."""
    # per setting: all questions (kind null) and, per kind, those it shows misinformation of that kind.
    # Questions are counted per make-up first (their settings, kinds, and the kinds the single
    # and pair settings show: a handful of distinct ones), so the explodes run on those
    # counts, not on every question's texts.
    question = F.struct("misinformation_texts", "correct_texts")
    per_makeup = questions.groupBy(
        "source", "settings", "kinds", entry_kinds(question).alias("single_kinds"),
        entry_kinds(question, need_correct_entry=True).alias("pair_kinds")).agg(F.count("*").alias("questions"))
    per_setting = per_makeup.select("source", "kinds", "single_kinds", "pair_kinds", "questions",
                                    F.explode("settings").alias("setting")) \
        .select("source", "setting", "questions", F.explode(F.concat(
            F.array(F.lit(None).cast("string")),
            setting_kinds(F.col("setting"), F.col("kinds"), F.col("single_kinds"), F.col("pair_kinds"))))
        .alias("kind")) \
        .groupBy("source", "setting", "kind").agg(F.sum("questions").alias("count"))
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

