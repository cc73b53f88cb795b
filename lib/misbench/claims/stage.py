"""Claims stage: triples + labels -> one-hop and two-hop claims, and their conflicting claims.

Pure DataFrame functions (``misbench.claims.job`` reads and writes the tables). Every fact
that does not become a claim leaves a count with its reason (``claims_stats``).

Inputs:
- ``triples``: the ingest table (subject_id, property, rank, value_type, object_id, value,
  time_precision, statement_id).
- ``labels``: id, label, description, instance_of (entities, plus enriched ones).
- ``templates``: relation, statement, question, answer_type, topic, and for two-hop pairs
  first, second, kind (``relations_frame`` / ``pairs_frame`` make them from config).
"""
from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from misbench.claims.relations import DATE_PROPERTIES, Relation, RelationPair

KEPT = "kept"
CONFLICT_KINDS = ("factual", "temporal", "semantic")
CLAIM_COLUMNS = [
    "claim_id", "hop", "relation", "relation_kind", "subject_id", "subject_label",
    "subject_description", "bridge_id", "bridge_label", "object_id", "object_label",
    "object_description", "statement", "question", "answer_type", "topic", "source",
]
STATS_COLUMNS = ["hop", "relation", "reason", "facts"]


def relations_frame(spark: SparkSession, relations: Sequence[Relation]) -> DataFrame:
    rows = [(r.relation, r.statement, r.question, r.answer_type, r.topic) for r in relations]
    return spark.createDataFrame(
        rows, "relation string, statement string, question string, answer_type string, topic string"
    )


def pairs_frame(spark: SparkSession, pairs: Sequence[RelationPair]) -> DataFrame:
    rows = [(p.relation, p.first, p.second, p.kind, p.statement, p.question, p.answer_type, p.topic)
            for p in pairs]
    return spark.createDataFrame(
        rows,
        "relation string, first string, second string, kind string, statement string, "
        "question string, answer_type string, topic string",
    )


def fill(template: Column, subject: Column, obj: Column | None = None) -> Column:
    """Put labels into a template's <S>/<O> slots (literal replacement, no regex)."""
    text = F.replace(template, F.lit("<S>"), subject)
    return text if obj is None else F.replace(text, F.lit("<O>"), obj)


def stable_id(*parts: Column) -> Column:
    """A short id that is the same on every run for the same parts."""
    return F.substring(F.sha2(F.concat_ws("|", *parts), 256), 1, 16)


def _as_date(value: Column, precision: Column) -> tuple[Column, Column, Column]:
    """(is_day, is_month, the value as a DATE) for a canonical time value at its precision."""
    is_day = (precision >= 11) & value.rlike(r"^\d{4}-\d{2}-\d{2}$")
    is_month = (precision == 10) & value.rlike(r"^\d{4}-\d{2}$")
    # Only read inside the is_day / is_month branches, so other values never reach to_date.
    as_date = F.to_date(F.when(is_month, F.concat(value, F.lit("-01"))).otherwise(value), "yyyy-MM-dd")
    return is_day, is_month, as_date


def date_text(value: Column, precision: Column) -> Column:
    """A canonical time value (1952-03-11 / 1952-03 / 1952 / -0050) in words, at its precision."""
    is_day, is_month, as_date = _as_date(value, precision)
    year = F.regexp_replace(F.regexp_replace(value, r"^-", ""), r"-.*$", "")
    year_words = F.when(value.startswith("-"), F.concat(F.ltrim(F.regexp_replace(year, "^0+", "")), F.lit(" BCE"))) \
        .otherwise(F.regexp_replace(year, "^0+(?=\\d)", ""))
    return (
        F.when(is_day, F.date_format(as_date, "d MMMM yyyy"))
        .when(is_month, F.date_format(as_date, "MMMM yyyy"))
        .otherwise(year_words)
    )


def shifted_date(value: Column, precision: Column, years: Column) -> Column:
    """The canonical time value moved by a number of years, keeping its precision."""
    is_day, is_month, as_date = _as_date(value, precision)
    moved = F.add_months(as_date, years * 12)
    year = F.regexp_extract(value, r"^(-?\d+)", 1).cast("long") + years
    return (
        F.when(is_day, F.date_format(moved, "yyyy-MM-dd"))
        .when(is_month, F.date_format(moved, "yyyy-MM"))
        .otherwise(F.when(year < 0, F.concat(F.lit("-"), F.lpad((-year).cast("string"), 4, "0")))
                   .otherwise(F.lpad(year.cast("string"), 4, "0")))
    )


# --------------------------------------------------------------------------------------------
# facts
# --------------------------------------------------------------------------------------------


def resolved_facts(triples: DataFrame, properties: Sequence[str]) -> DataFrame:
    """Statements of the given properties with a ``resolution``: ``kept`` for the one fact
    per (subject, property) that can be asked about, else why not.

    A (subject, property) with several different objects is ambiguous for a single-answer
    question, unless exactly one of them is stated with preferred rank. Deprecated
    statements are never facts. Dates (P569, P570) count as values; other literals do not.
    """
    facts = triples.where(
        F.col("property").isin(list(properties))
        & (F.col("object_id").isNotNull()
           | (F.col("property").isin(list(DATE_PROPERTIES)) & (F.col("value_type") == "time")))
    ).select("subject_id", "property", "rank", "object_id", "value", "time_precision", "statement_id")
    answer = F.coalesce(F.col("object_id"), F.col("value"))
    live = F.col("rank") != "deprecated"
    group = Window.partitionBy("subject_id", "property")
    preferred = F.when(live & (F.col("rank") == "preferred"), answer)
    first_per_answer = Window.partitionBy("subject_id", "property", answer).orderBy(
        F.when(F.col("rank") == "preferred", 0).otherwise(1), "statement_id"
    )
    facts = (
        facts.withColumn("answers", F.size(F.collect_set(F.when(live, answer)).over(group)))
        .withColumn("preferred_answers", F.size(F.collect_set(preferred).over(group)))
        .withColumn("preferred_answer", F.first(preferred, ignorenulls=True).over(
            group.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)))
        .withColumn("copy", F.row_number().over(first_per_answer))
    )
    resolution = (
        F.when(~live, F.lit("deprecated statement"))
        .when(F.col("answers") == 1, F.when(F.col("copy") == 1, F.lit(KEPT))
              .otherwise(F.lit("same fact stated twice")))
        .when(F.col("preferred_answers") == 1,
              F.when(answer != F.col("preferred_answer"), F.lit("not the preferred statement"))
              .when(F.col("copy") == 1, F.lit(KEPT))
              .otherwise(F.lit("same fact stated twice")))
        .otherwise(F.lit("ambiguous: several objects"))
    )
    return facts.withColumn("resolution", resolution).select(
        "subject_id", "property", "rank", "object_id", "value", "time_precision",
        "statement_id", "resolution",
    )


def _label_columns(labels: DataFrame, prefix: str) -> DataFrame:
    return labels.select(
        F.col("id").alias(f"{prefix}_id"),
        F.col("label").alias(f"{prefix}_label"),
        F.col("description").alias(f"{prefix}_description"),
    )


# --------------------------------------------------------------------------------------------
# claims
# --------------------------------------------------------------------------------------------


def one_hop_candidates(facts: DataFrame, labels: DataFrame, relations: DataFrame) -> DataFrame:
    """Every statement of a one-hop relation with the reason it can or cannot be a claim
    (``candidate_reason``); rows with ``kept`` carry the rendered claim."""
    rows = (
        facts.where(F.col("object_id").isNotNull())
        .join(F.broadcast(relations.withColumnRenamed("relation", "property")), "property")
        .join(_label_columns(labels, "subject"), "subject_id", "left")
        .join(_label_columns(labels, "object"), "object_id", "left")
    )
    reason = (
        F.when(F.col("resolution") != KEPT, F.col("resolution"))
        .when(F.col("subject_id") == F.col("object_id"), F.lit("object is the subject"))
        .when(F.col("subject_label").isNull(), F.lit("subject has no label"))
        .when(F.col("object_label").isNull(), F.lit("object has no label"))
        .otherwise(F.lit(KEPT))
    )
    return rows.select(
        stable_id(F.lit("1"), "subject_id", "property", "object_id").alias("claim_id"),
        F.lit(1).alias("hop"),
        F.col("property").alias("relation"),
        F.lit("one_hop").alias("relation_kind"),
        "subject_id", "subject_label", "subject_description",
        F.lit(None).cast("string").alias("bridge_id"),
        F.lit(None).cast("string").alias("bridge_label"),
        "object_id", "object_label", "object_description",
        fill(F.col("statement"), F.col("subject_label"), F.col("object_label")).alias("statement"),
        fill(F.col("question"), F.col("subject_label")).alias("question"),
        "answer_type", "topic", F.lit("wikidata").alias("source"),
        # what the conflict stage needs: whose true objects to avoid, in which relation
        F.col("property").alias("pool_relation"),
        F.col("subject_id").alias("truth_subject"),
        F.lit(None).cast("string").alias("object_value"),
        F.lit(None).cast("int").alias("object_precision"),
        reason.alias("candidate_reason"),
        F.lit(None).cast("string").alias("statement_template"),
    )


def two_hop_candidates(facts: DataFrame, labels: DataFrame, pairs: DataFrame) -> DataFrame:
    """Every chain subject -first-> bridge -second-> answer of a configured pair, with the
    reason it can or cannot be a claim."""
    first = facts.where(F.col("object_id").isNotNull()).select(
        F.col("subject_id"), F.col("property").alias("first"),
        F.col("object_id").alias("bridge_id"), F.col("resolution").alias("first_resolution"),
    )
    second = facts.select(
        F.col("subject_id").alias("bridge_id"), F.col("property").alias("second"),
        "object_id", F.col("value").alias("object_value"),
        F.col("time_precision").alias("object_precision"),
        F.col("resolution").alias("second_resolution"),
    )
    chains = (
        first.join(F.broadcast(pairs), "first")
        .join(second, ["bridge_id", "second"])
        .join(_label_columns(labels, "subject"), "subject_id", "left")
        .join(_label_columns(labels, "bridge").select("bridge_id", "bridge_label"), "bridge_id", "left")
        .join(_label_columns(labels, "object"), "object_id", "left")
    )
    is_date = F.col("object_id").isNull()
    answer_label = F.when(is_date, date_text(F.col("object_value"), F.col("object_precision"))) \
        .otherwise(F.col("object_label"))
    reason = (
        F.when(F.col("first_resolution") != KEPT, F.concat(F.lit("first hop: "), F.col("first_resolution")))
        .when(F.col("second_resolution") != KEPT, F.concat(F.lit("second hop: "), F.col("second_resolution")))
        .when(F.col("subject_id") == F.col("object_id"), F.lit("object is the subject"))
        .when(F.col("subject_label").isNull(), F.lit("subject has no label"))
        .when(F.col("bridge_label").isNull(), F.lit("bridge has no label"))
        .when(answer_label.isNull(), F.lit("object has no label"))
        .otherwise(F.lit(KEPT))
    )
    return chains.select(
        stable_id(F.lit("2"), "subject_id", "relation", "bridge_id",
                  F.coalesce("object_id", "object_value")).alias("claim_id"),
        F.lit(2).alias("hop"), "relation", F.col("kind").alias("relation_kind"),
        "subject_id", "subject_label", "subject_description", "bridge_id", "bridge_label",
        "object_id", answer_label.alias("object_label"),
        F.when(is_date, F.lit(None)).otherwise(F.col("object_description")).alias("object_description"),
        fill(F.col("statement"), F.col("subject_label"), answer_label).alias("statement"),
        fill(F.col("question"), F.col("subject_label")).alias("question"),
        "answer_type", "topic", F.lit("wikidata").alias("source"),
        F.col("second").alias("pool_relation"),
        F.col("bridge_id").alias("truth_subject"),
        "object_value", F.col("object_precision").cast("int").alias("object_precision"),
        reason.alias("candidate_reason"),
        F.lit(None).cast("string").alias("statement_template"),
    )


TWO_WIKI_SOURCE = "2wikimultihopqa"


def two_wiki_candidates(records: DataFrame) -> DataFrame:
    """2WikiMultihopQA questions as two-hop claim candidates (compositional and inference
    only; comparison questions are not chains). Reads _id, type, question, answer and
    evidences ([subject, relation, object] triples, by label)."""
    usable = records.where(F.col("type").isin("compositional", "inference"))
    first, second = F.col("evidences")[0], F.col("evidences")[1]
    well_formed = (F.size("evidences") >= 2) & (first[2] == second[0])
    subject, bridge, answer = first[0], first[2], F.col("answer")
    relation = F.concat_ws("/", first[1], second[1])
    statement = F.concat(F.lit("The "), second[1], F.lit(" of the "), first[1], F.lit(" of "),
                         subject, F.lit(" is "), answer, F.lit("."))
    return usable.select(
        stable_id(F.lit(TWO_WIKI_SOURCE), F.col("_id")).alias("claim_id"),
        F.lit(2).alias("hop"), relation.alias("relation"), F.col("type").alias("relation_kind"),
        F.lit(None).cast("string").alias("subject_id"), subject.alias("subject_label"),
        F.lit(None).cast("string").alias("subject_description"),
        F.lit(None).cast("string").alias("bridge_id"), bridge.alias("bridge_label"),
        F.lit(None).cast("string").alias("object_id"), answer.alias("object_label"),
        F.lit(None).cast("string").alias("object_description"),
        statement.alias("statement"), F.col("question"),
        F.lit("entity").alias("answer_type"), F.lit("Identity").alias("topic"),
        F.lit(TWO_WIKI_SOURCE).alias("source"),
        relation.alias("pool_relation"), subject.alias("truth_subject"),
        F.lit(None).cast("string").alias("object_value"),
        F.lit(None).cast("int").alias("object_precision"),
        F.when(~well_formed, F.lit("evidence is not a two-hop chain"))
        .when(answer.isNull() | (answer == ""), F.lit("no answer"))
        .otherwise(F.lit(KEPT)).alias("candidate_reason"),
        F.concat(F.lit("The "), second[1], F.lit(" of the "), first[1], F.lit(" of <S> is <O>."))
        .alias("statement_template"),
    )


# --------------------------------------------------------------------------------------------
# conflicts
# --------------------------------------------------------------------------------------------


def _hash(*parts) -> Column:
    return F.xxhash64(*[p if isinstance(p, Column) else F.lit(p) for p in parts])


def substitutes(
    candidates: DataFrame, facts: DataFrame, labels: DataFrame, seed: int, attempts: int = 16,
    wanted: int = 4,
) -> DataFrame:
    """Up to ``wanted`` same-type substitutes per entity-valued claim, ranked: entities that
    share an instance-of type with the true object, occur as object of the same relation
    elsewhere, and are never a true object of that subject and relation.

    Seeded and deterministic. Each claim probes ``attempts`` pseudo-random positions of each
    of its type pools instead of pairing with whole pools (which can hold millions)."""
    types = labels.select("id", F.explode("instance_of").alias("type"))
    pool = (
        facts.where(F.col("object_id").isNotNull() & (F.col("rank") != "deprecated"))
        .select(F.col("property").alias("pool_relation"), F.col("object_id").alias("candidate_id"))
        .distinct()
        .join(types.withColumnRenamed("id", "candidate_id"), "candidate_id")
    )
    by_pool = Window.partitionBy("pool_relation", "type")
    pool = pool.withColumn(
        "position", F.row_number().over(by_pool.orderBy(_hash(F.col("candidate_id"), seed))) - 1
    ).withColumn("pool_size", F.count("*").over(by_pool))
    sizes = pool.select("pool_relation", "type", "pool_size").distinct()
    claims = candidates.where(F.col("object_id").isNotNull()).select(
        "claim_id", "pool_relation", "truth_subject", "object_id"
    )
    probes = (
        claims.join(types.withColumnRenamed("id", "object_id"), "object_id")
        .join(sizes, ["pool_relation", "type"])
        .withColumn("attempt", F.explode(F.sequence(F.lit(0), F.lit(attempts - 1))))
        .withColumn("position", F.pmod(_hash(F.col("claim_id"), F.col("type"), F.col("attempt"), seed),
                                       F.col("pool_size")))
    )
    truth = facts.select(
        F.col("subject_id").alias("truth_subject"), F.col("property").alias("pool_relation"),
        F.col("object_id").alias("candidate_id"),
    ).where(F.col("candidate_id").isNotNull())
    found = (
        probes.join(pool.drop("pool_size"), ["pool_relation", "type", "position"])
        .where(F.col("candidate_id") != F.col("object_id"))
        .join(truth, ["truth_subject", "pool_relation", "candidate_id"], "left_anti")
        .select("claim_id", "candidate_id")
        .distinct()
    )
    ranked = Window.partitionBy("claim_id").orderBy(_hash(F.col("claim_id"), F.col("candidate_id"), seed))
    return (
        found.withColumn("choice", F.row_number().over(ranked) - 1)
        .where(F.col("choice") < wanted)
        .join(labels.select(F.col("id").alias("candidate_id"), F.col("label").alias("candidate_label"),
                            F.col("description").alias("candidate_description")),
              "candidate_id", "left")
        .where(F.col("candidate_label").isNotNull())
    )


def _date_substitutes(candidates: DataFrame, seed: int, wanted: int = 4) -> DataFrame:
    """Other dates for date answers: the true one moved by 1..40 years, never zero."""
    dates = candidates.where(F.col("object_id").isNull() & F.col("object_value").isNotNull())
    rows = dates.select(
        "claim_id", "object_value", "object_precision",
        F.explode(F.sequence(F.lit(0), F.lit(wanted - 1))).alias("choice"),
    )
    magnitude = F.pmod(_hash(F.col("claim_id"), F.col("choice"), seed), F.lit(40)) + 1
    sign = F.when(F.pmod(_hash(F.col("claim_id"), F.col("choice"), seed + 1), F.lit(2)) == 0, 1).otherwise(-1)
    shifted = rows.withColumn("candidate_value", shifted_date(F.col("object_value"), F.col("object_precision"),
                                                              (magnitude * sign).cast("int")))
    return shifted.dropDuplicates(["claim_id", "candidate_value"]).select(
        "claim_id", F.lit(None).cast("string").alias("candidate_id"),
        date_text(F.col("candidate_value"), F.col("object_precision")).alias("candidate_label"),
        F.lit(None).cast("string").alias("candidate_description"),
        F.row_number().over(Window.partitionBy("claim_id").orderBy("choice")).alias("rank1"),
    ).withColumn("choice", F.col("rank1") - 1).drop("rank1")


def _label_substitutes(candidates: DataFrame, seed: int, wanted: int = 4) -> DataFrame:
    """Claims imported by label (2WikiMultihopQA): other answers to the same relation chain."""
    imported = candidates.where(F.col("source") == TWO_WIKI_SOURCE)
    pool = imported.select("pool_relation", F.col("object_label").alias("candidate_label")).distinct()
    options = imported.select("claim_id", "pool_relation", "object_label").join(pool, "pool_relation").where(
        F.col("candidate_label") != F.col("object_label")
    )
    ranked = Window.partitionBy("claim_id").orderBy(_hash(F.col("claim_id"), F.col("candidate_label"), seed))
    return options.withColumn("choice", F.row_number().over(ranked) - 1).where(F.col("choice") < wanted).select(
        "claim_id", F.lit(None).cast("string").alias("candidate_id"), "candidate_label",
        F.lit(None).cast("string").alias("candidate_description"), "choice",
    )


def conflicts(
    candidates: DataFrame, facts: DataFrame, labels: DataFrame, templates: DataFrame,
    seed: int, reference_date: str, attempts: int = 16,
) -> DataFrame:
    """For each kept candidate claim, one conflicting claim per kind (factual, temporal,
    semantic), each with an irrelevant same-type entity for multiple-choice options.
    Claims without two distinct substitutes get none (the job counts them)."""
    kept = candidates.where(F.col("candidate_reason") == KEPT)
    choices = (
        substitutes(kept, facts, labels, seed, attempts)
        .unionByName(_date_substitutes(kept, seed))
        .unionByName(_label_substitutes(kept, seed))
    )
    count = Window.partitionBy("claim_id")
    choices = choices.withColumn("available", F.count("*").over(count))
    kinds = F.array(*[F.lit(k) for k in CONFLICT_KINDS])
    per_kind = kept.select("claim_id", "relation", "subject_label", "subject_description",
                           "statement_template").join(
        choices.where(F.col("available") >= 2).select("claim_id", "available").distinct(), "claim_id"
    ).select("*", F.posexplode(kinds).alias("kind_index", "kind"))
    chosen = per_kind.withColumn("choice", F.col("kind_index") % F.col("available")).join(
        choices.drop("available"), ["claim_id", "choice"]
    )
    irrelevant = chosen.select("claim_id", "kind", "choice").join(
        choices.select("claim_id", F.col("choice").alias("other"),
                       F.col("candidate_id").alias("irrelevant_id"),
                       F.col("candidate_label").alias("irrelevant_label")),
        "claim_id",
    ).where(F.col("other") != F.col("choice"))
    first_other = Window.partitionBy("claim_id", "kind").orderBy("other")
    irrelevant = irrelevant.withColumn("n", F.row_number().over(first_other)).where("n = 1").drop("n", "other", "choice")
    years = F.pmod(_hash(F.col("claim_id"), "from", seed), F.lit(10)) + 1
    months = F.pmod(_hash(F.col("claim_id"), "month", seed), F.lit(12))
    span = F.pmod(_hash(F.col("claim_id"), "span", seed), F.lit(15)) + 1
    valid_from = F.add_months(F.to_date(F.lit(reference_date)), (years * 12 + months).cast("int"))
    temporal = F.col("kind") == "temporal"
    semantic = F.col("kind") == "semantic"
    return (
        chosen.join(irrelevant, ["claim_id", "kind"])
        .join(F.broadcast(templates.select("relation", F.col("statement").alias("template"))),
              "relation", "left")
        .withColumn("template", F.coalesce("statement_template", "template"))
        .select(
            "claim_id", "kind",
            F.col("candidate_id").alias("object_id"),
            F.col("candidate_label").alias("object_label"),
            F.col("candidate_description").alias("object_description"),
            fill(F.col("template"), F.col("subject_label"), F.col("candidate_label")).alias("statement"),
            "irrelevant_id", "irrelevant_label",
            F.when(temporal, valid_from).alias("valid_from"),
            F.when(temporal, F.add_months(valid_from, (span * 12).cast("int"))).alias("valid_until"),
            F.when(semantic, F.col("subject_description")).alias("subject_description"),
        )
    )


def claims_with_conflicts(candidates: DataFrame, conflict_rows: DataFrame) -> DataFrame:
    """Kept candidates that got every kind of conflict: the claims table."""
    complete = conflict_rows.groupBy("claim_id").agg(F.countDistinct("kind").alias("kinds")).where(
        F.col("kinds") == len(CONFLICT_KINDS)
    )
    return candidates.where(F.col("candidate_reason") == KEPT).join(
        complete.select("claim_id"), "claim_id", "left_semi"
    ).select(*CLAIM_COLUMNS)


def claims_stats(candidates: DataFrame, claims: DataFrame) -> DataFrame:
    """Per hop, relation and reason, how many facts (one hop) or chains (two hops) ended
    there; ``kept`` rows count the claims. The counts of a relation add up to its input."""
    kept = candidates.where(F.col("candidate_reason") == KEPT)
    lacking = kept.join(claims.select("claim_id"), "claim_id", "left_anti").withColumn(
        "candidate_reason", F.lit("fewer than two same-type substitutes")
    )
    return (
        candidates.where(F.col("candidate_reason") != KEPT)
        .unionByName(kept.join(claims.select("claim_id"), "claim_id", "left_semi"))
        .unionByName(lacking)
        .groupBy("hop", "relation", F.col("candidate_reason").alias("reason"))
        .agg(F.count("*").alias("facts"))
        .select(*STATS_COLUMNS)
    )
