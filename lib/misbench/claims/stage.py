"""Claims stage: triples + labels -> one-hop and two-hop claims, and their conflicting claims.

Pure DataFrame functions (``misbench.claims.job`` reads and writes the tables). Every fact
that does not become a claim leaves a count with its reason (``claims_stats``).

Inputs:
- ``triples``: the ingest table (subject_id, property, rank, value_type, object_id, value,
  time_precision, start_time, end_time, statement_id); ``somevalue`` / ``novalue`` rows mark
  an unknown or absent value.
- ``labels``: id, label, description, instance_of, aliases (entities, plus enriched ones).
- ``links``: a, b entity pairs linked by subclass of, part of, located in or replaces /
  replaced by (``claims.link_properties``): a substitute is never so close to the true answer.
- ``templates``: relation, statement, question, answer_type, topic, and for two-hop pairs
  first, second, kind (``relations_frame`` / ``pairs_frame`` make them from config).
"""
from __future__ import annotations

import unicodedata
from typing import Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from misbench.claims.relations import BIRTH, DATE_PROPERTIES, DEATH, Relation, RelationPair
from misbench.ids import seeded_hash, stable_id
from misbench.plans import LAZY, Lazy

KEPT = "kept"
CONFLICT_KINDS = ("factual", "temporal", "semantic")
UNKNOWN_VALUE_TYPES = ("somevalue", "novalue")  # "unknown value" / "no value" statements
CLAIM_COLUMNS = [
    "claim_id", "hop", "relation", "relation_kind", "subject_id", "subject_label",
    "subject_description", "bridge_id", "bridge_label", "object_id", "object_label",
    "object_description", "statement", "question", "answer_type", "topic", "source",
    "changes_over_time", "multi_valued",
]
STATS_COLUMNS = ["hop", "relation", "reason", "facts"]


def relations_frame(spark: SparkSession, relations: Sequence[Relation]) -> DataFrame:
    rows = [(r.relation, r.statement, r.question, r.answer_type, r.topic, r.changes_over_time,
             r.multi_valued) for r in relations]
    return spark.createDataFrame(
        rows, "relation string, statement string, question string, answer_type string, topic string, "
              "changes_over_time boolean, multi_valued boolean"
    )


def pairs_frame(spark: SparkSession, pairs: Sequence[RelationPair]) -> DataFrame:
    rows = [(p.relation, p.first, p.second, p.kind, p.statement, p.question, p.answer_type, p.topic,
             p.changes_over_time, p.multi_valued) for p in pairs]
    return spark.createDataFrame(
        rows,
        "relation string, first string, second string, kind string, statement string, "
        "question string, answer_type string, topic string, changes_over_time boolean, "
        "multi_valued boolean",
    )


def _accent_table() -> tuple[str, str]:
    """Latin letters with diacritics and their bare letter, for ``translate``."""
    accented, plain = [], []
    for code in range(0xC0, 0x250):
        char = chr(code)
        base = unicodedata.normalize("NFD", char)[0]
        if base != char and base.isascii() and base.isalpha():
            accented.append(char)
            plain.append(base)
    return "".join(accented), "".join(plain)


_ACCENTED, _PLAIN = _accent_table()


def _folded(text: Column) -> Column:
    return F.translate(F.lower(text), _ACCENTED, _PLAIN)


def normalized(text: Column) -> Column:
    """A name for comparisons: lower case, accents dropped, punctuation and spaces removed
    ("São Paulo" and "sao-paulo" are one name)."""
    return F.regexp_replace(_folded(text), r"[^\p{L}\p{N}]+", "")


def _words(text: Column) -> Column:
    """Lower-case, accent-free words separated by single spaces, padded with one space."""
    return F.concat(F.lit(" "), F.trim(F.regexp_replace(_folded(text), r"[^\p{L}\p{N}]+", " ")), F.lit(" "))


def contains_words(text: Column, part: Column) -> Column:
    """Whether ``part`` occurs in ``text`` as whole words, ignoring case, accents and punctuation."""
    return _contains_word_forms(_words(text), _words(part))


def _contains_word_forms(text_words: Column, part_words: Column) -> Column:
    """``contains_words`` on the ``_words`` of both sides, where they were worked out before."""
    return F.instr(text_words, part_words) > 0


def word_count(text: Column, part: Column) -> Column:
    """How often ``part`` occurs in ``text`` as whole words (as ``contains_words`` matches)."""
    haystack, needle = _words(text), _words(part)
    return ((F.length(haystack) - F.length(F.replace(haystack, needle, F.lit(" ")))) / (F.length(needle) - 1)).cast("int")


def fill(template: Column, subject: Column, obj: Column | None = None) -> Column:
    """Put labels into a template's <S>/<O> slots (literal replacement, no regex)."""
    text = F.replace(template, F.lit("<S>"), subject)
    return text if obj is None else F.replace(text, F.lit("<O>"), obj)


def _as_date(value: Column, precision: Column) -> tuple[Column, Column, Column]:
    """(is_day, is_month, the value as a DATE) for a canonical time value at its precision."""
    is_day = (precision >= 11) & value.rlike(r"^\d{4}-\d{2}-\d{2}$")
    is_month = (precision == 10) & value.rlike(r"^\d{4}-\d{2}$")
    # Only read inside the is_day / is_month branches, so other values never reach to_date.
    as_date = F.to_date(F.when(is_month, F.concat(value, F.lit("-01"))).otherwise(value), "yyyy-MM-dd")
    return is_day, is_month, as_date


def _ordinal(number: Column) -> Column:
    suffix = (F.when(F.pmod(number, F.lit(100)).isin(11, 12, 13), F.lit("th"))
              .when(F.pmod(number, F.lit(10)) == 1, F.lit("st"))
              .when(F.pmod(number, F.lit(10)) == 2, F.lit("nd"))
              .when(F.pmod(number, F.lit(10)) == 3, F.lit("rd"))
              .otherwise(F.lit("th")))
    return F.concat(number.cast("string"), suffix)


def date_text(value: Column, precision: Column) -> Column:
    """A canonical time value in words at its precision: day (16 August 1954), month (August
    1954), year (1954, 50 BCE), decade (the 1950s), century (the 19th century, counted as
    Wikidata does: 1801-1900) and millennium (the 2nd millennium)."""
    is_day, is_month, as_date = _as_date(value, precision)
    year = F.regexp_replace(F.regexp_replace(value, r"^-", ""), r"-.*$", "")
    bce = F.when(value.startswith("-"), F.lit(" BCE")).otherwise(F.lit(""))
    year_words = F.when(value.startswith("-"), F.concat(F.ltrim(F.regexp_replace(year, "^0+", "")), F.lit(" BCE"))) \
        .otherwise(F.regexp_replace(year, "^0+(?=\\d)", ""))
    years = year.cast("long")
    decade = F.concat(F.lit("the "), (F.floor(years / 10) * 10).cast("string"), F.lit("s"), bce)
    century = F.concat(F.lit("the "), _ordinal(F.floor((years - 1) / 100) + 1), F.lit(" century"), bce)
    millennium = F.concat(F.lit("the "), _ordinal(F.floor((years - 1) / 1000) + 1), F.lit(" millennium"), bce)
    return (
        F.when(is_day, F.date_format(as_date, "d MMMM yyyy"))
        .when(is_month, F.date_format(as_date, "MMMM yyyy"))
        .when(precision == 8, decade)
        .when(precision == 7, century)
        .when(precision == 6, millennium)
        .otherwise(year_words)
    )


def precision_years(precision: Column) -> Column:
    """How many years one step of a date's precision spans: a shifted date moves by whole
    steps, so it always falls outside the true date's window (another decade, century...)."""
    return (F.when(precision == 8, F.lit(10)).when(precision == 7, F.lit(100))
            .when(precision == 6, F.lit(1000)).otherwise(F.lit(1)))


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


def period_start(value: Column) -> Column:
    """A canonical time value as the first day of its period, ``yyyy-MM-dd`` text that sorts
    as dates do (1952 -> 1952-01-01; a decade or century qualifier, 1990~, -> 1990-01-01);
    null for BCE and five-digit years. Text, not DATE: no value can make the cast fail."""
    return (F.when(value.rlike(r"^\d{4}-\d{2}-\d{2}$"), value)
            .when(value.rlike(r"^\d{4}-\d{2}$"), F.concat(value, F.lit("-01")))
            .when(value.rlike(r"^\d{4}~?$"), F.concat(F.substring(value, 1, 4), F.lit("-01-01"))))


# --------------------------------------------------------------------------------------------
# facts
# --------------------------------------------------------------------------------------------


def resolved_facts(triples: DataFrame, properties: Sequence[str], reference_date: str) -> DataFrame:
    """Statements of the given properties with a ``resolution``: ``kept`` for the one fact
    per (subject, property) that holds at ``reference_date`` and can be asked about, else why
    not, and ``single``: whether it is the only current value (not one chosen by rank).

    - Deprecated statements are never facts.
    - A statement that ended (end time P582 at or before the reference date, or an unknown
      end) or starts after it (start time P580) is not a current fact: a former spouse, a
      former capital.
    - An "unknown value" or "no value" statement of a (subject, property) makes it ambiguous.
    - Several current objects are ambiguous for a single-answer question, unless exactly one
      of them is stated with preferred rank.
    Dates (P569, P570) count as values; other literals do not.
    """
    unknown = F.col("value_type").isin(list(UNKNOWN_VALUE_TYPES))
    facts = triples.where(
        F.col("property").isin(list(properties))
        & (F.col("object_id").isNotNull() | unknown
           | (F.col("property").isin(list(DATE_PROPERTIES)) & (F.col("value_type") == "time")))
    ).select("subject_id", "property", "rank", "value_type", "object_id", "value", "time_precision",
             "start_time", "end_time", "statement_id")
    answer = F.coalesce(F.col("object_id"), F.col("value"))
    live = F.col("rank") != "deprecated"
    reference = F.lit(reference_date)
    # An end time that cannot be read (a five-digit year) counts as ended: never ask it as current.
    ended = F.col("end_time").isNotNull() & F.coalesce(
        (F.col("end_time") == "somevalue") | F.col("end_time").startswith("-")
        | (period_start(F.col("end_time")) <= reference), F.lit(True))
    not_started = F.coalesce(period_start(F.col("start_time")) > reference, F.lit(False))
    current = live & ~ended & ~not_started
    counted = current & ~unknown
    group = Window.partitionBy("subject_id", "property")
    whole_group = group.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    preferred = F.when(counted & (F.col("rank") == "preferred"), answer)
    # Current statements first: an ended or deprecated copy of the same answer must not be
    # the one kept, or it hides the current fact as "stated twice". The sort key is a column
    # of its own: Spark Connect servers built on DataFusion (Sail) reject a window ordered by
    # this expression inline.
    first_per_answer = Window.partitionBy("subject_id", "property", answer).orderBy(
        "not_counted", F.when(F.col("rank") == "preferred", 0).otherwise(1), "statement_id",
    )
    # One projection: Spark computes the window functions of one partitioning and order in one
    # pass (added a column at a time, each was a pass of its own: five over the statements).
    facts = facts.withColumn("not_counted", F.when(counted, 0).otherwise(1)).select(
        "*",
        F.size(F.collect_set(F.when(counted, answer)).over(group)).alias("answers"),
        F.max((current & unknown).cast("int")).over(whole_group).alias("unknowns"),
        F.size(F.collect_set(preferred).over(group)).alias("preferred_answers"),
        F.first(preferred, ignorenulls=True).over(whole_group).alias("preferred_answer"),
        F.row_number().over(first_per_answer).alias("copy"),
    )
    resolution = (
        F.when(~live, F.lit("deprecated statement"))
        .when(unknown, F.lit("unknown or no value"))
        .when(ended, F.lit("ended before the reference date"))
        .when(not_started, F.lit("starts after the reference date"))
        .when(F.col("unknowns") == 1, F.lit("ambiguous: an unknown or no value is stated too"))
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
        "statement_id", "resolution", (F.col("answers") == 1).alias("single"),
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
    question = fill(F.col("question"), F.col("subject_label"))
    reason = (
        F.when(F.col("resolution") != KEPT, F.col("resolution"))
        .when(F.col("subject_id") == F.col("object_id"), F.lit("object is the subject"))
        .when(F.col("subject_label").isNull(), F.lit("subject has no label"))
        .when(F.col("object_label").isNull(), F.lit("object has no label"))
        .when(contains_words(question, F.col("object_label")), F.lit("question contains its answer"))
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
        question.alias("question"),
        "answer_type", "topic", F.lit("wikidata").alias("source"), "changes_over_time", "multi_valued",
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
        F.col("single").alias("first_single"),
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
    question = fill(F.col("question"), F.col("subject_label"))
    reason = (
        F.when(F.col("first_resolution") != KEPT, F.concat(F.lit("first hop: "), F.col("first_resolution")))
        # another current bridge (outranked by a preferred one) could lead to another answer
        .when(~F.col("first_single"), F.lit("first hop: several bridges, one preferred"))
        .when(F.col("second_resolution") != KEPT, F.concat(F.lit("second hop: "), F.col("second_resolution")))
        .when(F.col("subject_id") == F.col("object_id"), F.lit("object is the subject"))
        .when(F.col("subject_label").isNull(), F.lit("subject has no label"))
        .when(F.col("bridge_label").isNull(), F.lit("bridge has no label"))
        .when(answer_label.isNull(), F.lit("object has no label"))
        .when(contains_words(question, answer_label), F.lit("question contains its answer"))
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
        question.alias("question"),
        "answer_type", "topic", F.lit("wikidata").alias("source"), "changes_over_time", "multi_valued",
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
        F.lit(False).alias("changes_over_time"), F.lit(False).alias("multi_valued"),
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


def names_of(labels: DataFrame) -> DataFrame:
    """id, name: every entity's label and aliases, normalised (see ``normalized``)."""
    aliases = F.coalesce(F.col("aliases"), F.array().cast("array<string>"))
    return labels.select("id", F.explode(F.array_union(F.array(F.col("label")), aliases)).alias("name")) \
        .where(F.col("name").isNotNull()).select("id", normalized(F.col("name")).alias("name")).distinct()


def _distinct_by_name(choices: DataFrame, wanted: int, name: Column | None = None) -> DataFrame:
    """Per claim, at most ``wanted`` choices with pairwise different names, renumbered
    0..n-1 in seeded order: the options of one question never read alike. ``name``: the
    ``normalized`` label where the rows carry it already (default: worked out here)."""
    name = normalized(F.col("candidate_label")) if name is None else name
    per_name = Window.partitionBy("claim_id", name).orderBy("order")
    ranked = Window.partitionBy("claim_id").orderBy("order")
    # One shuffle by claim serves both windows; partitioned by (claim, name), the second
    # window would shuffle again.
    return (choices.repartition("claim_id").withColumn("copy", F.row_number().over(per_name)).where("copy = 1")
            .withColumn("choice", F.row_number().over(ranked) - 1).where(F.col("choice") < wanted)
            .drop("copy", "order"))


# The most bits a ring's buckets take: rings of up to about four million candidates keep
# about one candidate per bucket; larger ones, a few more.
RING_BUCKET_BITS = 22
# Arcs sent whole to every task up to this many (about 2.5 per candidate of a pool, some 60
# MB): pools of up to about 400,000 candidates.
RING_BROADCAST_ROWS = 1_000_000
LOWEST_POINT = -(2 ** 63)  # the bottom of the hash space (seeded_hash is a signed 64-bit hash)


def _ring_bucket(point: Column) -> Column:
    """The bucket of a point on a ring cut into 2^``bits`` buckets (``bits``: a column of the
    row): its top bits, shifted with the sign (a negative point stays below a positive one), so
    the buckets follow the order of the points. 0 bits is one bucket: a shift by 64 would leave
    the point as it is (Java takes shift counts modulo 64)."""
    return F.when(F.col("bits") == 0, F.lit(0).cast("long")).otherwise(
        F.call_function("shiftright", point, F.lit(64) - F.col("bits")))


def next_on_ring(probes: DataFrame, pool: DataFrame, ring: Sequence[str], plan: Lazy = LAZY) -> DataFrame:
    """``probes`` (the ``ring`` columns, ``point``, any others) with ``candidate_id``: the
    candidate of ``pool`` (the ``ring`` columns, ``point``, ``candidate_id``) on the same ring
    at the lowest point at or above the probe's, or the ring's lowest where there is none (a
    probe past the top wraps round). Probes of a ring without candidates are dropped.

    Each candidate owns the arc of its ring from the point of the candidate below it
    (exclusive; the lowest candidate's from the bottom of the hash space) up to its own point,
    and a probe takes the candidate whose arc holds it. Arcs are cut at bucket borders (about
    one bucket per candidate of the ring), so the lookup is a join on ring and bucket and then
    a range test: the probes (claims x types x attempts: millions) are not sorted by ring.
    ``plan``: where the rings and the arcs, when few, are sent whole to every task
    (misbench.plans)."""
    ring = list(ring)
    rings = pool.groupBy(*ring).agg(
        F.min_by("candidate_id", F.struct("point", "candidate_id")).alias("wrapped_id"),
        F.least(F.ceil(F.log2(F.count("*"))), F.lit(RING_BUCKET_BITS)).cast("int").alias("bits")  # 1 candidate: 0
    ).transform(lambda rings: plan.broadcast_if_small(rings, RING_BROADCAST_ROWS))  # one row per ring
    below = Window.partitionBy(*ring).orderBy("point", "candidate_id")
    arcs = (pool.join(rings.select(*ring, "bits"), ring)
            .withColumn("after", F.lag("point").over(below))
            .select(*ring, "after", F.col("point").alias("upto"), F.col("candidate_id").alias("next_id"),
                    F.explode(F.sequence(_ring_bucket(F.coalesce(F.col("after"), F.lit(LOWEST_POINT))),
                                         _ring_bucket(F.col("point")))).alias("bucket"))
            .transform(lambda arcs: plan.broadcast_if_small(arcs, RING_BROADCAST_ROWS)))
    placed = probes.join(rings, ring).withColumn("bucket", _ring_bucket(F.col("point")))
    point = F.col("probe.point")
    holds = (F.col("arc.after").isNull() | (F.col("arc.after") < point)) & (point <= F.col("arc.upto"))
    return placed.alias("probe").join(
        arcs.alias("arc"), [F.col(f"probe.{c}") == F.col(f"arc.{c}") for c in (*ring, "bucket")] + [holds], "left"
    ).select(*[F.col(f"probe.{c}") for c in probes.columns],
             F.coalesce(F.col("arc.next_id"), F.col("probe.wrapped_id")).alias("candidate_id"))


def substitutes(
    candidates: DataFrame, facts: DataFrame, labels: DataFrame, seed: int, attempts: int = 16,
    wanted: int = 4, links: DataFrame | None = None, plan: Lazy = LAZY,
) -> DataFrame:
    """Up to ``wanted`` same-type substitutes per entity-valued claim, ranked: entities that
    share an instance-of type with the true object, occur as object of the same relation
    elsewhere, and are false by meaning, not only by id: never a true object of that subject
    and relation, never the subject itself, never sharing a name (label or alias, normalised)
    with the true answer, never linked to it by ``links`` (either direction), and never named
    like another substitute of the same claim.

    Seeded and deterministic. Each claim probes ``attempts`` pseudo-random points of each of
    its type pools (a hash ring) instead of pairing with whole pools (which can hold
    millions); a pool that gains or loses a candidate changes the probes of its arc only.
    ``plan``: where the pool and the names, each read several times, are computed once, and
    the ring lookup's small frames broadcast (misbench.plans)."""
    types = labels.select("id", F.explode("instance_of").alias("type"))
    pool = (
        facts.where(F.col("object_id").isNotNull() & (F.col("rank") != "deprecated"))
        .select(F.col("property").alias("pool_relation"), F.col("object_id").alias("candidate_id"))
        .distinct()
        .join(types.withColumnRenamed("id", "candidate_id"), "candidate_id")
    )
    # Consistent hashing: each candidate sits at a point of a hash ring, each probe lands at
    # a point and takes the next candidate on the ring. A candidate that joins or leaves a
    # pool (a newer dump) moves only the probes of its arc, so the other claims keep their
    # substitutes and the texts written for them (a position in a sorted pool would move
    # every probe behind it).
    pool = pool.withColumn("point", seeded_hash(F.col("candidate_id"), seed)).transform(plan.keep)  # read twice
    # Each claim's true objects (of its truth subject and relation) as one array: tested on
    # its probes after the lookup, rather than an anti-join that would shuffle every probe.
    claims = candidates.where(F.col("object_id").isNotNull()).select(
        "claim_id", "pool_relation", "truth_subject", "object_id", "subject_id")
    truth = (facts.where(F.col("object_id").isNotNull())
             .select(F.col("subject_id").alias("truth_subject"), F.col("property").alias("pool_relation"), "object_id")
             .join(claims.select("truth_subject", "pool_relation").distinct(), ["truth_subject", "pool_relation"],
                   "left_semi")
             .groupBy("truth_subject", "pool_relation").agg(F.collect_set("object_id").alias("true_objects")))
    claims = claims.join(truth, ["truth_subject", "pool_relation"], "left")
    probes = (
        claims.join(types.withColumnRenamed("id", "object_id"), "object_id")
        .withColumn("attempt", F.explode(F.sequence(F.lit(0), F.lit(attempts - 1))))
        .withColumn("point", seeded_hash(F.col("claim_id"), F.col("type"), F.col("attempt"), seed))
    )
    probed = next_on_ring(probes, pool, ["pool_relation", "type"], plan).drop("point")
    # Two probes of a claim may land on one candidate. Not made distinct here: the copies
    # are the same row through every check below, and _distinct_by_name keeps one per name.
    # (Claims at 10^5 entities: 7.0M rows, 6.3M distinct; the distinct took two shuffles.)
    found = (
        probed
        .where((F.col("candidate_id") != F.col("object_id"))
               & (F.col("candidate_id") != F.coalesce(F.col("subject_id"), F.lit("")))
               & ~F.coalesce(F.array_contains("true_objects", F.col("candidate_id")), F.lit(False)))
        .select("claim_id", "object_id", "candidate_id")
    )
    # Each entity's names as one array, joined to both ends of a row: no name in common is
    # an array test, where joining name rows and then the rows that matched shuffled every
    # probe once more.
    names = names_of(labels).groupBy("id").agg(F.collect_set("name").alias("names")).transform(plan.keep)
    found = (
        found.join(names.select(F.col("id").alias("candidate_id"), F.col("names").alias("candidate_names")),
                   "candidate_id", "left")
        .join(names.select(F.col("id").alias("object_id"), F.col("names").alias("object_names")), "object_id", "left")
        .where(~F.coalesce(F.arrays_overlap("candidate_names", "object_names"), F.lit(False)))
        .select("claim_id", "object_id", "candidate_id")
    )
    # A name inside the other ("Congo" / "Republic of the Congo"): a text stating the
    # substitute would name the true answer too (``contains_words`` both ways, on the words
    # and names of each label worked out once per entity, not once per probe).
    true_names = labels.select(F.col("id").alias("object_id"), _words(F.col("label")).alias("true_words"))
    found = found.join(true_names, "object_id", "left")
    if links is not None:
        both_ways = links.select("a", "b").unionByName(links.select(F.col("b").alias("a"), F.col("a").alias("b")))
        found = found.join(both_ways.withColumnRenamed("a", "object_id").withColumnRenamed("b", "candidate_id"),
                           ["object_id", "candidate_id"], "left_anti")
    named = found.join(
        labels.select(F.col("id").alias("candidate_id"), F.col("label").alias("candidate_label"),
                      F.col("description").alias("candidate_description"),
                      _words(F.col("label")).alias("candidate_words"), normalized(F.col("label")).alias("candidate_name")),
        "candidate_id",
    ).where(F.col("candidate_label").isNotNull() & ~F.coalesce(
        _contains_word_forms(F.col("candidate_words"), F.col("true_words"))
        | _contains_word_forms(F.col("true_words"), F.col("candidate_words")), F.lit(False)))
    return _distinct_by_name(
        named.withColumn("order", seeded_hash(F.col("claim_id"), F.col("candidate_id"), seed)), wanted,
        F.col("candidate_name"),
    ).select("claim_id", "candidate_id", "candidate_label", "candidate_description", "choice")


def _date_substitutes(candidates: DataFrame, facts: DataFrame, seed: int, reference_date: str,
                      wanted: int = 4) -> DataFrame:
    """Other dates for date answers: the true one moved by whole steps of its precision (so
    another year, decade, century...), never zero, always before the reference date; a death
    date stays after the person's birth and a birth date before their death."""
    dates = candidates.where(F.col("object_id").isNull() & F.col("object_value").isNotNull())
    life = facts.where(F.col("property").isin(list(DATE_PROPERTIES)) & (F.col("resolution") == KEPT))
    born = life.where(F.col("property") == BIRTH).select(F.col("subject_id").alias("truth_subject"),
                                                         F.col("value").alias("born"))
    died = life.where(F.col("property") == DEATH).select(F.col("subject_id").alias("truth_subject"),
                                                         F.col("value").alias("died"))
    rows = dates.join(born, "truth_subject", "left").join(died, "truth_subject", "left").select(
        "claim_id", "pool_relation", "object_value", "object_precision", "born", "died",
        F.explode(F.sequence(F.lit(0), F.lit(4 * wanted - 1))).alias("attempt"),
    )
    # 1..40 years, or 1..6 decades, 1..5 centuries, 1..2 millennia: far enough to be another
    # date, near enough to be believable
    steps = (F.when(F.col("object_precision") == 8, F.lit(6)).when(F.col("object_precision") == 7, F.lit(5))
             .when(F.col("object_precision") == 6, F.lit(2)).otherwise(F.lit(40)))
    magnitude = F.pmod(seeded_hash(F.col("claim_id"), F.col("attempt"), seed), steps) + 1
    sign = F.when(F.pmod(seeded_hash(F.col("claim_id"), F.col("attempt"), seed + 1), F.lit(2)) == 0, 1).otherwise(-1)
    years = (magnitude * sign * precision_years(F.col("object_precision"))).cast("int")
    shifted = rows.withColumn("candidate_value", shifted_date(F.col("object_value"), F.col("object_precision"), years))
    start = period_start(F.col("candidate_value"))
    before_birth = F.coalesce(start <= period_start(F.col("born")), F.lit(False))  # unknown birth: no bound
    after_death = F.coalesce(start >= period_start(F.col("died")), F.lit(False))
    plausible = (
        (F.col("candidate_value").startswith("-") | (start < F.lit(reference_date)))
        & ~((F.col("pool_relation") == DEATH) & before_birth)
        & ~((F.col("pool_relation") == BIRTH) & after_death)
    )
    labelled = shifted.where(plausible).select(
        "claim_id", F.lit(None).cast("string").alias("candidate_id"),
        date_text(F.col("candidate_value"), F.col("object_precision")).alias("candidate_label"),
        F.lit(None).cast("string").alias("candidate_description"), F.col("attempt").alias("order"),
        date_text(F.col("object_value"), F.col("object_precision")).alias("true_label"),
    ).where(normalized(F.col("candidate_label")) != normalized(F.col("true_label"))).drop("true_label")
    return _distinct_by_name(labelled, wanted)


def _label_substitutes(candidates: DataFrame, seed: int, wanted: int = 4) -> DataFrame:
    """Claims imported by label (2WikiMultihopQA): other answers to the same relation chain."""
    imported = candidates.where(F.col("source") == TWO_WIKI_SOURCE)
    pool = imported.select("pool_relation", F.col("object_label").alias("candidate_label")).distinct()
    options = imported.select("claim_id", "pool_relation", "object_label").join(pool, "pool_relation").where(
        normalized(F.col("candidate_label")) != normalized(F.col("object_label"))
    )
    return _distinct_by_name(options.select(
        "claim_id", F.lit(None).cast("string").alias("candidate_id"), "candidate_label",
        F.lit(None).cast("string").alias("candidate_description"),
        seeded_hash(F.col("claim_id"), F.col("candidate_label"), seed).alias("order"),
    ), wanted)


def claim_kinds(changes_over_time: Column) -> Column:
    """The conflict kinds a claim gets: temporal only where the relation's object can change."""
    return F.when(changes_over_time, F.array(*[F.lit(k) for k in CONFLICT_KINDS])) \
        .otherwise(F.array(*[F.lit(k) for k in CONFLICT_KINDS if k != "temporal"]))


def conflicts(
    candidates: DataFrame, facts: DataFrame, labels: DataFrame, templates: DataFrame,
    seed: int, reference_date: str, attempts: int = 16, links: DataFrame | None = None, plan: Lazy = LAZY,
) -> DataFrame:
    """For each kept candidate claim, one conflicting claim per kind (factual and semantic;
    temporal too where the relation changes over time). The kinds share one false object and
    one irrelevant same-type entity (MisBench: one QA pair per claim, its misinformation of
    every kind naming the same false answer; Tables 20-22). Claims without two distinct
    substitutes get none (the job counts them). ``plan``: the substitute search's (misbench.plans)."""
    kept = candidates.where(F.col("candidate_reason") == KEPT)
    choices = (
        substitutes(kept, facts, labels, seed, attempts, links=links, plan=plan)
        .unionByName(_date_substitutes(kept, facts, seed, reference_date))
        .unionByName(_label_substitutes(kept, seed))
    )
    # Each claim's choices as one array in choice order (0..n-1), so the substitutes are
    # computed once: every kind takes choice 0 as its false object and choice 1 as the
    # irrelevant option. Structs sort by their first field: `choice` comes first, and is
    # unique per claim (one source numbers a claim's choices 0..n-1).
    options = choices.groupBy("claim_id").agg(F.array_sort(F.collect_list(F.struct(
        "choice", "candidate_id", "candidate_label", "candidate_description"))).alias("options"))
    kinds = claim_kinds(F.col("changes_over_time"))
    per_kind = kept.select("claim_id", "relation", "subject_label", "subject_description",
                           "statement_template", "changes_over_time").join(
        options.where(F.size("options") >= 2), "claim_id"
    ).select("*", F.explode(kinds).alias("kind"))
    chosen = per_kind.withColumn("chosen", F.element_at("options", 1)).withColumn(
        "other", F.element_at("options", 2))
    years = F.pmod(seeded_hash(F.col("claim_id"), "from", seed), F.lit(10)) + 1
    months = F.pmod(seeded_hash(F.col("claim_id"), "month", seed), F.lit(12))
    span = F.pmod(seeded_hash(F.col("claim_id"), "span", seed), F.lit(15)) + 1
    valid_from = F.add_months(F.to_date(F.lit(reference_date)), (years * 12 + months).cast("int"))
    temporal = F.col("kind") == "temporal"
    semantic = F.col("kind") == "semantic"
    return (
        chosen.join(F.broadcast(templates.select("relation", F.col("statement").alias("template"))),
              "relation", "left")
        .withColumn("template", F.coalesce("statement_template", "template"))
        .select(
            "claim_id", "kind",
            F.col("chosen.candidate_id").alias("object_id"),
            F.col("chosen.candidate_label").alias("object_label"),
            F.col("chosen.candidate_description").alias("object_description"),
            fill(F.col("template"), F.col("subject_label"), F.col("chosen.candidate_label")).alias("statement"),
            F.col("other.candidate_id").alias("irrelevant_id"),
            F.col("other.candidate_label").alias("irrelevant_label"),
            F.when(temporal, valid_from).alias("valid_from"),
            F.when(temporal, F.add_months(valid_from, (span * 12).cast("int"))).alias("valid_until"),
            F.when(semantic, F.col("subject_description")).alias("subject_description"),
        )
    )


def mixed_false_objects(conflicts: DataFrame) -> DataFrame:
    """Claims whose conflicts name more than one false object: a lake whose claims stage
    ran before one question per claim (each kind had its own substitute then)."""
    # dates and 2Wiki labels have no entity id: their label is the object
    return conflicts.groupBy("claim_id").agg(
        F.countDistinct(F.coalesce("object_id", "object_label")).alias("objects")).where(F.col("objects") > 1)


def changed_conflicts(old_claims: DataFrame, old_conflicts: DataFrame, new_claims: DataFrame,
                      new_conflicts: DataFrame) -> DataFrame:
    """(claim_id, kind) whose texts no longer fit: a conflict whose claim, false object,
    period or description changed, that is gone, or that a stored claim newly has (a kind it
    gained: its claim changed), and kind ``correct`` where the claim's own
    statement changed or the claim is gone. Texts written for them state something the claim
    no longer says."""
    def signed(columns: list[str]) -> Column:
        return stable_id(*[F.coalesce(F.col(c).cast("string"), F.lit("~")) for c in columns], length=64)

    conflict_columns = ["object_label", "statement", "valid_from", "valid_until", "subject_description"]
    old = old_conflicts.select("claim_id", "kind", signed(conflict_columns).alias("signature"))
    new = new_conflicts.select("claim_id", "kind", signed(conflict_columns).alias("signature"))
    old_truth = old_claims.select("claim_id", F.lit("correct").alias("kind"),
                                  signed(["statement", "object_label"]).alias("signature"))
    new_truth = new_claims.select("claim_id", F.lit("correct").alias("kind"),
                                  signed(["statement", "object_label"]).alias("signature"))
    before, after = old.unionByName(old_truth), new.unionByName(new_truth)
    matched = ["claim_id", "kind", "signature"]
    # both ways: a conflict gone or changed, and one a claim newly has (a kind it gained)
    gone_or_changed = before.join(after, matched, "left_anti")
    gained = after.join(before.select("claim_id", "kind"), ["claim_id", "kind"], "left_anti") \
        .join(before.select("claim_id").distinct(), "claim_id", "left_semi")
    return gone_or_changed.unionByName(gained).select("claim_id", "kind").distinct()


def claims_with_conflicts(candidates: DataFrame, conflict_rows: DataFrame) -> DataFrame:
    """Kept candidates that got every kind of conflict they should (``claim_kinds``): the
    claims table."""
    got = conflict_rows.groupBy("claim_id").agg(F.countDistinct("kind").alias("kinds"))
    kept = candidates.where(F.col("candidate_reason") == KEPT)
    return kept.join(got, "claim_id").where(
        F.col("kinds") == F.size(claim_kinds(F.col("changes_over_time")))
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


def _day(column: str) -> F.Column:
    return F.date_format(F.col(column), "d MMMM yyyy")


def period_words() -> F.Column:
    """A temporal conflict's validity period in words: from 1 July 2031 until 1 July 2046."""
    return F.concat(F.lit("from "), _day("valid_from"), F.lit(" until "),
                    F.coalesce(_day("valid_until"), F.lit("an unknown date")))


def claim_sentence(statement: str) -> F.Column:
    """The sentence a text must state: the statement, or for a temporal conflict the
    statement with its period."""
    return F.when(F.col("valid_from").isNotNull(), F.concat(
        F.regexp_replace(F.col(statement), r"\.\s*$", ""), F.lit(" "), period_words(), F.lit("."),
    )).otherwise(F.col(statement))
