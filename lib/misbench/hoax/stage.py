"""MultiHoax-style questions from the graph: DataFrames in, DataFrames out, no I/O.

A question walks a true chain subject --first--> bridge --second--> answer and names the
bridge through a description with a false premise on it: "What is the capital of the
country where Forth Bridge lies whose head of government is George Washington?". The premise
(bridge, property, object) is proven false by the graph (``premise_proof``: the relation holds
one value at a time and the bridge's single current value is another; the statements it
rests on are recorded), and is absent from ``triples`` in every rank, time and direction.
Nothing matches the description, so the only right option is "I do not know"; the others
are the answer the question would have without its premise (the near miss), the answer it
would have if the premise's object were the bridge (context), and same-type entities.

Each candidate (chain x premise) gets a reason: ``kept`` or why not. The stats count them.
A seeded share of the chosen date questions is asked as comparisons instead
(``with_comparisons``: "Who was born first: <the description>, or <another chain's>?");
intersection questions are built in ``hoax/intersection.py``.
"""
from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from misbench.claims.relations import BIRTH, DEATH
from misbench.claims.stage import (
    KEPT, contains_words, date_text, fill, normalized, period_start, precision_years, shifted_date, substitutes,
)
from misbench.hoax.common import (  # noqa: F401 (IDK, LETTERS, conform... are also read from here)
    HOP, IDK, LETTERS, OUTSIDE_COUNTRIES, PROOF, PROOF_DISJOINT, PROOF_FUNCTIONAL, PROOF_LIFESPAN, QUESTION_FIELDS,
    QUESTION_SCHEMA, ambiguous_ids, answer_type_of, capitalized, class_category, conform, containment_links, mapping_column, not_true,
    only_values, type_noun, with_country, with_idk_dealt,
)
from misbench.hoax.spec import LIFESPAN, HoaxSpec
from misbench.ids import seeded_hash, stable_id
from misbench.plans import LAZY, Lazy

PATTERN = "bridge"
# A premise on the entity the chain ends at (hoax.yaml's second_hop): "Which person who was
# born in Lyon is the spouse of the director of Titanic?"
SECOND_HOP = "second hop"
# A chosen date question asked instead as which of two comes first (with_comparisons): its
# candidate counts under the bridge walk that found it, with this reason.
COMPARISON = "comparison"
ASKED_AS_COMPARISON = "kept: asked as a comparison"
KEPT_REASONS = (KEPT, ASKED_AS_COMPARISON)
# Pool positions a comparison tries for its partner chain (a partner may share its bridge or year).
PARTNER_ATTEMPTS = 4
# Dates compared by year: at least year precision (9), so that two different years decide.
YEAR_PRECISION = 9
# The pool of false premise objects when the premise's relation offers none: any named entity.
ANY_RELATION = "*"
# Resolutions of statements that hold at the reference date (one value, or one of several).
CURRENT = (KEPT, "ambiguous: several objects", "not the preferred statement", "same fact stated twice")


def spec_frames(spark: SparkSession, spec: HoaxSpec) -> dict[str, DataFrame]:
    """The spec as small frames to join: relations (asked or premise), bridges."""
    rows = [(r.relation, r.question, r.statement, r.clause, r.answer_type, r.topic, False)
            for r in spec.relations.values()]
    rows += [(relation, question, None, None, "date", "Identity", True)
             for relation, question in spec.date_questions.items()]
    relations = spark.createDataFrame(
        rows, "relation string, question string, statement string, clause string, answer_type string, "
              "topic string, is_date boolean")
    bridges = spark.createDataFrame(list(spec.bridges.items()), "relation string, role string")
    roles = spark.createDataFrame(
        [(role_pool(relation), prop, obj) for relation, role in sorted(spec.premise_object_roles.items())
         for prop, objects in sorted(role.items()) for obj in (objects or [None])],
        "pool string, property string, role_object string")
    return {"relations": relations, "bridges": bridges, "object_roles": roles}


def role_pool(relation: str) -> str:
    """The name of the fallback pool of a relation with hoax.premise_object_roles."""
    return f"{ANY_RELATION}{relation}"


def _year(value: Column) -> Column:
    """The year of a canonical time value (1994, 1994-05, 1994-05-03); null where unknown, BCE,
    five digits or coarser than a year (1990~)."""
    return F.when(value.rlike(r"^\d{4}(-\d{2}){0,2}$"), F.substring(value, 1, 4).cast("int"))


def dated_first_hops(triples: DataFrame, spec: HoaxSpec, reference_date: str) -> DataFrame:
    """subject_id, property, object_id, statement_id, at_year: statements of
    ``spec.dated_bridges`` that ended before ``reference_date``, each at the middle year of its
    period, where that year names one object by the graph: the statement starts and ends in
    known years at least two apart, and every other statement of its subject and relation
    (deprecated ones aside, unknown values included) has a period that leaves the year out
    ("the head of state of Stugro in 1994": one person); a missing or unreadable start or end
    leaves that side open. A year outside the bridge's lifespan (P569, P570) is refused too."""
    if not spec.dated_bridges:
        return triples.sparkSession.createDataFrame(
            [], "subject_id string, property string, object_id string, statement_id string, at_year int")
    rows = triples.where(F.col("property").isin(list(spec.dated_bridges)) & (F.col("rank") != "deprecated")).select(
        "subject_id", "property", "object_id", "statement_id", "end_time",
        _year(F.col("start_time")).alias("start_year"), _year(F.col("end_time")).alias("end_year"))
    ended = period_start(F.col("end_time")) <= F.lit(str(reference_date))  # as resolved_facts reads it
    dated = (rows.where(F.col("object_id").isNotNull() & ended
                        & (F.col("end_year") - F.col("start_year") >= 2))
             .withColumn("at_year", F.col("start_year") + F.floor((F.col("end_year") - F.col("start_year")) / 2)
                         .cast("int")))
    others = rows.select("subject_id", "property", F.col("statement_id").alias("other_statement"),
                         F.col("object_id").alias("other_object"),
                         F.col("start_year").alias("other_start"), F.col("end_year").alias("other_end"))
    # Another value whose period could hold the year (a missing start or end reaches it).
    covering = (dated.join(others, ["subject_id", "property"])
                .where((F.col("other_statement") != F.col("statement_id"))
                       & ~F.coalesce(F.col("other_object") == F.col("object_id"), F.lit(False))
                       & F.coalesce(F.col("other_start") <= F.col("at_year"), F.lit(True))
                       & F.coalesce(F.col("other_end") >= F.col("at_year"), F.lit(True)))
                .select("statement_id").distinct())
    # A year outside the bridge's life (born after it, dead before it): the graph contradicts
    # itself there, and the question would read as nonsense.
    # A date of a decade or a century ("1950" at precision 8) could be any year of it: the
    # latest birth and the earliest death it allows are what count.
    life = triples.where(F.col("property").isin(BIRTH, DEATH) & (F.col("rank") != "deprecated")).select(
        F.col("subject_id").alias("object_id"), "property", _year(F.col("value")).alias("year"),
        precision_years(F.coalesce(F.col("time_precision"), F.lit(11))).alias("span"))
    outside = (dated.select("statement_id", "object_id", "at_year").join(life, "object_id")
               .where(((F.col("property") == BIRTH) & (F.col("year") + F.col("span") - 1 > F.col("at_year")))
                      | ((F.col("property") == DEATH) & (F.col("year") < F.col("at_year"))))
               .select("statement_id").distinct())
    # One row per object: a term stated twice (1989-1996 and 1990-1996) would make two
    # questions of one person, and two terms of one person ask the same thing twice.
    first_statement = Window.partitionBy("subject_id", "property", "object_id").orderBy("statement_id")
    return (dated.join(covering, "statement_id", "left_anti").join(outside, "statement_id", "left_anti")
            .withColumn("n", F.row_number().over(first_statement)).where("n = 1")
            .select("subject_id", "property", "object_id", "statement_id", "at_year"))


def chains(facts: DataFrame, labels: DataFrame, frames: dict[str, DataFrame],
           dated_first: DataFrame | None = None, dated_role: str = "<R> in <Y>") -> DataFrame:
    """subject --first--> bridge --second--> answer where both hops are the only current value
    of their (subject, property); the answer an entity or a date. ``dated_first``
    (``dated_first_hops``) adds first hops that held at a past year (``at_year``), their
    bridge's phrase put at that year by ``dated_role``."""
    unique = only_values(facts)
    relations, bridges = frames["relations"], frames["bridges"]
    bridges = F.broadcast(bridges.withColumnRenamed("relation", "property"))
    first = unique.where(F.col("object_id").isNotNull()).join(bridges, "property").select(
        "subject_id", F.col("property").alias("first"), F.col("object_id").alias("bridge_id"),
        F.col("statement_id").alias("first_statement"), "role", F.lit(None).cast("int").alias("at_year"))
    if dated_first is not None:
        at_role = F.replace(F.replace(F.lit(dated_role), F.lit("<R>"), F.col("role")),
                            F.lit("<Y>"), F.col("at_year").cast("string"))
        first = first.unionByName(dated_first.join(bridges, "property").select(
            "subject_id", F.col("property").alias("first"), F.col("object_id").alias("bridge_id"),
            F.col("statement_id").alias("first_statement"), at_role.alias("role"), "at_year"))
    second = unique.join(F.broadcast(relations.where(F.col("question").isNotNull())
                                     .withColumnRenamed("relation", "property")), "property") \
        .where(F.when(F.col("is_date"), F.col("value").isNotNull() & F.col("object_id").isNull())
               .otherwise(F.col("object_id").isNotNull())) \
        .select(F.col("subject_id").alias("bridge_id"), F.col("property").alias("second"),
                F.col("object_id").alias("answer_id"), F.col("value").alias("answer_value"),
                F.col("time_precision").alias("answer_precision"), F.col("statement_id").alias("second_statement"),
                F.col("question").alias("second_question"), F.col("answer_type").alias("second_answer_type"),
                F.col("topic").alias("second_topic"), "is_date")
    name = labels.select("id", "label", "instance_of")
    walked = first.join(second, "bridge_id").where(
        (F.col("first") != F.col("second")) & (F.col("bridge_id") != F.col("subject_id"))
        & (F.coalesce(F.col("answer_id"), F.lit("")) != F.col("subject_id"))
        & (F.coalesce(F.col("answer_id"), F.lit("")) != F.col("bridge_id")))
    topics = relations.select(F.col("relation").alias("first"), F.col("topic").alias("first_topic"))
    return (walked.join(F.broadcast(topics), "first", "left")
            .join(name.select(F.col("id").alias("subject_id"), F.col("label").alias("subject_label"),
                              F.col("instance_of").alias("subject_types")), "subject_id", "left")
            .join(name.select(F.col("id").alias("bridge_id"), F.col("label").alias("bridge_label"),
                              F.col("instance_of").alias("bridge_types")), "bridge_id", "left")
            .join(name.select(F.col("id").alias("answer_id"), F.col("label").alias("answer_label"),
                              F.col("instance_of").alias("answer_types")), "answer_id", "left")
            .withColumn("answer_text", F.when(F.col("is_date"), date_text(F.col("answer_value"), F.col("answer_precision")))
                        .otherwise(F.col("answer_label")))
            # the year only where there is one: a current chain's id stays what it was
            .withColumn("chain_id", stable_id(F.col("subject_id"), "first", "bridge_id", "second",
                                              F.col("at_year").cast("string"))))


def premise_targets(walked: DataFrame, spec: HoaxSpec) -> DataFrame:
    """chain_id, premise_hop, premise_on: the entities a chain's premise may describe. Hop 1:
    its bridge. Hop 2 (``spec.second_hop_question``): the entity it ends at, where the second
    hop is a bridge relation (it has a phrase to ask through) and that entity a noun
    (``type_nouns``: "Which person ..."); a date is no entity."""
    first = walked.select("chain_id", F.lit(1).alias("premise_hop"), F.col("bridge_id").alias("premise_on"))
    if not spec.second_hop_question:
        return first
    second = walked.where(~F.col("is_date") & F.col("answer_id").isNotNull() & F.col("second").isin(list(spec.bridges))
                          & type_noun(F.col("answer_types"), spec).isNotNull()).select(
        "chain_id", F.lit(2).alias("premise_hop"), F.col("answer_id").alias("premise_on"))
    return first.unionByName(second)


def value_sets(facts: DataFrame, labels: DataFrame, properties: Sequence[str], links: DataFrame) -> DataFrame:
    """Per subject and property of ``properties`` whose current values are all known (no
    unknown value): the values (``values``, sorted ids), their names (``value_names``: the
    label, or the id where the dump names none), their statements (``value_statements``) and
    ``regions``: the values and every place they lie in by ``links`` (``containment_links``)
    that is itself a value of some subject, so that North America and the Americas, or Europe
    and Eurasia, overlap where a country lists the wider one. What a
    disjointness proof compares (``spec.disjoint_premises``: two countries' continents)."""
    rows = facts.where(F.col("resolution").isin(list(CURRENT)) & F.col("property").isin(list(properties)))
    named = rows.join(labels.select(F.col("id").alias("object_id"), "label"), "object_id", "left").withColumn(
        "name", F.coalesce(F.col("label"), F.concat(F.col("object_id"), F.lit(" (no label in this dump)"))))
    sets = (named.groupBy("subject_id", "property")
            .agg(F.sort_array(F.collect_set("object_id")).alias("values"),
                 F.sort_array(F.collect_set(F.when(F.col("object_id").isNotNull(), F.col("name")))).alias("value_names"),
                 F.sort_array(F.collect_set("statement_id")).alias("value_statements"),
                 F.max(F.col("object_id").isNull().cast("int")).alias("unknown"))
            .where((F.col("unknown") == 0) & (F.size("values") > 0)).drop("unknown"))
    # only places that are themselves some subject's value (Eurasia where a country lists it), so
    # that a wider whole nobody lists (Afro-Eurasia, the World) joins no two continents
    listed = sets.select(F.explode("values").alias("b")).distinct()
    above = (sets.select("subject_id", "property", F.explode("values").alias("a")).join(links.select("a", "b"), "a")
             .join(listed, "b", "left_semi")
             .groupBy("subject_id", "property").agg(F.collect_set("b").alias("above")))
    return (sets.join(above, ["subject_id", "property"], "left")
            .withColumn("regions", F.array_union("values", F.coalesce("above", F.array().cast("array<string>"))))
            .drop("above"))


def lifespans(facts: DataFrame) -> DataFrame:
    """subject_id, property (LIFESPAN), born, died, value_names, value_statements: per entity
    with a date of birth or death (P569, P570; deprecated ones aside), the earliest year it
    may have been born and the latest it may have died, where every such statement of it
    is a known date of year precision or finer (a decade, a century or an unknown value
    leaves that side null: no proof rests on it). ``value_names``: its life in words ("born
    1815, died 1852"). What a lifespan proof compares: one died before the other was born."""
    rows = facts.where(F.col("property").isin(BIRTH, DEATH) & (F.col("rank") != "deprecated"))
    year = F.when(F.coalesce(F.col("time_precision"), F.lit(0)) >= YEAR_PRECISION, _year(F.col("value")))
    rows = rows.withColumn("year", year).withColumn("text", date_text(F.col("value"), F.col("time_precision")))
    side = lambda prop, pick: F.when(  # noqa: E731 (the year only where every statement of that side has one)
        F.sum(((F.col("property") == prop) & F.col("year").isNull()).cast("int")) == 0,
        pick(F.when(F.col("property") == prop, F.col("year"))))
    words = lambda prop, pick: pick(F.when(F.col("property") == prop, F.col("text")),  # noqa: E731
                                    F.when(F.col("property") == prop, F.col("year")))
    life = (rows.groupBy("subject_id")
            .agg(side(BIRTH, F.min).alias("born"), side(DEATH, F.max).alias("died"),
                 words(BIRTH, F.min_by).alias("born_text"), words(DEATH, F.max_by).alias("died_text"),
                 F.sort_array(F.collect_set("statement_id")).alias("value_statements"))
            .where(F.col("born").isNotNull() | F.col("died").isNotNull()))
    name = F.concat_ws(", ", F.when(F.col("born").isNotNull(), F.concat(F.lit("born "), F.col("born_text"))),
                       F.when(F.col("died").isNotNull(), F.concat(F.lit("died "), F.col("died_text"))))
    return life.select("subject_id", F.lit(LIFESPAN).alias("property"), "born", "died",
                       F.array(name).alias("value_names"), "value_statements")


def disjoint_value_sets(facts: DataFrame, labels: DataFrame, spec: HoaxSpec, links: DataFrame) -> DataFrame:
    """``value_sets`` of the properties that set premises apart (``spec.disjoint_premises``'
    vias), and ``lifespans`` where a via is LIFESPAN (``regions`` empty there, ``born`` and
    ``died`` null elsewhere)."""
    vias = {d.via for d in spec.disjoint_premises.values()}
    sets = value_sets(facts, labels, sorted(vias - {LIFESPAN}), links).withColumn(
        "born", F.lit(None).cast("int")).withColumn("died", F.lit(None).cast("int"))
    if LIFESPAN not in vias:
        return sets
    return sets.unionByName(lifespans(facts).withColumn("values", F.array().cast("array<string>"))
                            .withColumn("regions", F.array().cast("array<string>")))


def _apart(one: str, other: str) -> Column:
    """Whether the graph sets two sides apart (``disjoint_value_sets`` columns ``<side>_values``,
    ``<side>_born``, ``<side>_died`` and the row's ``via``): no value in common, or one died
    before the other was born. False where either side has no row."""
    by_dates = (F.coalesce(F.col(f"{one}_died") < F.col(f"{other}_born"), F.lit(False))
                | F.coalesce(F.col(f"{other}_died") < F.col(f"{one}_born"), F.lit(False)))
    return (F.col(f"{one}_values").isNotNull() & F.col(f"{other}_values").isNotNull()
            & F.when(F.col("via") == LIFESPAN, by_dates)
            .otherwise(~F.arrays_overlap(f"{one}_values", f"{other}_values")))


def premises(facts: DataFrame, labels: DataFrame, frames: dict[str, DataFrame], bridges: DataFrame,
             spec: HoaxSpec, seed: int, attempts: int, containment: DataFrame | None = None,
             plan: Lazy = LAZY, sets: DataFrame | None = None) -> DataFrame:
    """Per bridge entity and premise relation: the bridge's recorded values (what a premise
    contradicts), the proof that a premise on it is false, and up to three false objects of
    the same type (claims' ``substitutes``: never a value the graph gives it, in any rank or
    time, never named like one).

    A proof (``premise_proof``: kind and the statement ids it rests on) exists only where the
    relation holds one value at a time (``spec.functional_premises``) and the graph records
    exactly one current value for the bridge, the only one (not one chosen by rank): any
    other object is then false by the graph. On an open list (borders, awards, memberships)
    a missing statement proves nothing: no proof, no question, except where the graph sets
    the bridge and the false object apart (``spec.disjoint_premises``: countries on
    different continents share no border); then up to ``spec.disjoint_candidates`` false
    objects are searched and only those set apart kept, each with its own proof."""
    current = facts.where(F.col("resolution").isin(list(CURRENT)) & F.col("object_id").isNotNull())
    # A false object must not contain or sit inside the true value (born in Westminster, not
    # London; a country inside the United Kingdom): the graph's part-of links, either way,
    # through up to CONTAINMENT_DEPTH steps (a district is inside its country too).
    links = containment if containment is not None else containment_links(facts).transform(plan.keep)
    # ``sets``: ``value_sets`` of the disjointness properties (hoax_questions computes them once
    # for this and its subject check); kept: read for the bridges here and the false objects below
    if sets is None:
        sets = disjoint_value_sets(facts, labels, spec, links).transform(plan.keep)
    bridge_sets = sets.select("subject_id", F.col("property").alias("via"), F.col("regions").alias("bridge_values"),
                              F.col("born").alias("bridge_born"), F.col("died").alias("bridge_died"),
                              F.col("value_names").alias("bridge_value_names"),
                              F.col("value_statements").alias("bridge_value_statements"))
    relations = frames["relations"].where(F.col("clause").isNotNull()).select(
        F.col("relation").alias("property"), F.col("statement").alias("premise_template"),
        F.col("clause").alias("premise_clause"), F.col("answer_type").alias("premise_answer_type"))
    labelled = labels.select(F.col("id").alias("object_id"), F.col("label").alias("true_label"))
    sole = only_values(facts).select("subject_id", "property", F.lit(True).alias("sole_current_value")).distinct()
    known = (current.join(bridges.select(F.col("bridge_id").alias("subject_id")).distinct(), "subject_id", "left_semi")
             .join(F.broadcast(relations), "property").join(labelled, "object_id", "left")
             .groupBy("subject_id", "property", "premise_template", "premise_clause", "premise_answer_type")
             .agg(F.countDistinct("object_id").alias("known_values"), F.min("object_id").alias("object_id"),
                  F.max((F.col("object_id") == F.col("subject_id")).cast("int")).alias("self_valued"),
                  F.sort_array(F.collect_set("statement_id")).alias("contradicted_statement_ids"),
                  F.sort_array(F.collect_set("true_label")).alias("true_labels"),
                  # values without a label (outside the dump, or unnamed in its languages):
                  # the explanation names them by id
                  F.sort_array(F.collect_set(F.when(F.col("true_label").isNull(), F.col("object_id"))))
                  .alias("unlabelled_ids"))
             .join(sole, ["subject_id", "property"], "left")
             .withColumn("premise_key", stable_id(F.lit("premise"), "subject_id", "property"))
             .withColumn("via", mapping_column({r: d.via for r, d in spec.disjoint_premises.items()},
                                               F.col("property")))
             .join(bridge_sets, ["subject_id", "via"], "left")
             .transform(plan.keep))
    functional = F.col("property").isin(list(spec.functional_premises))
    proven = functional & (F.col("known_values") == 1) & F.coalesce(F.col("sole_current_value"), F.lit(False))
    disjoint = F.col("property").isin(list(spec.disjoint_premises))
    apart_possible = disjoint & F.col("bridge_values").isNotNull() & (F.col("self_valued") == 0)
    proven_rows = known.where(proven | apart_possible)
    claims = proven_rows.select(
        F.col("premise_key").alias("claim_id"), F.col("property").alias("pool_relation"),
        F.col("subject_id").alias("truth_subject"), "object_id", "subject_id")
    # A true object outside the dump has no classes: it takes its relation's answer type's
    # class (spec.untyped_object_classes), so a false object of that type can be found.
    fallback = F.broadcast(proven_rows.select(
        F.col("object_id").alias("id"), mapping_column(spec.untyped_object_classes, F.col("premise_answer_type")).alias("cls")
    ).where(F.col("cls").isNotNull()).groupBy("id").agg(F.min("cls").alias("cls")))
    untyped = F.size(F.coalesce(F.col("instance_of"), F.array().cast("array<string>"))) == 0
    typed = labels.join(fallback, "id", "left").withColumn(
        "instance_of", F.when(untyped & F.col("cls").isNotNull(), F.array(F.col("cls"))).otherwise(F.col("instance_of")))
    outside = fallback.join(labels.select("id"), "id", "left_anti").select(
        "id", *[F.lit(None).cast(kind).alias(name) for name, kind in
                (("label", "string"), ("description", "string"))],
        F.array(F.col("cls")).alias("instance_of"), F.lit(None).cast("array<string>").alias("aliases"))
    # kept: the substitute searches below read these labels' types and names a dozen times,
    # and each use would join the fallback types in again
    labels = typed.drop("cls").unionByName(outside).transform(plan.keep)
    # checkpointed: it feeds both the unmatched claims and the union below
    # A premise set apart by a disjointness searches more false objects (most share the
    # bridge's continent); the others keep their first three (the search ranks the same way
    # whatever it is asked for, so they are what a search for three finds).
    wanted = max(3, spec.disjoint_candidates) if spec.disjoint_premises else 3
    found = substitutes(claims, facts, labels, seed, attempts, wanted=wanted, links=links, plan=plan).transform(plan.keep)
    # Where no other object of the relation fits (a small graph: one capital, one head of
    # state), any named entity of the same type: the proof holds whatever the false object.
    # Its pool is every named entity; its truth, every value the graph gives the bridge.
    # A relation with hoax.premise_object_roles draws only on the entities holding a role.
    pools = mapping_column({r: role_pool(r) for r in spec.premise_object_roles}, F.col("pool_relation"), F.lit(ANY_RELATION))
    unmatched = claims.join(found.select("claim_id"), "claim_id", "left_anti") \
        .withColumn("pool_relation", pools).transform(plan.keep)
    # Skipped where every claim found its false objects: the search plans a dozen Spark jobs
    # over every named entity, whether or not a claim asks.
    if plan.has_rows(unmatched):
        named_ids = labels.where(F.col("label").isNotNull()).select(F.col("id").alias("object_id"))
        roles = frames["object_roles"]
        holders = facts.where(F.col("object_id").isNotNull() & (F.col("rank") != "deprecated")).join(
            F.broadcast(roles), (facts["property"] == roles["property"])
            & (roles["role_object"].isNull() | (roles["role_object"] == facts["object_id"]))
        ).select(F.col("subject_id").alias("object_id"), "pool").distinct()
        members = named_ids.withColumn("pool", F.lit(ANY_RELATION)).unionByName(
            holders.join(named_ids, "object_id", "left_semi"))
        named = members.select(F.lit(None).cast("string").alias("subject_id"), F.col("pool").alias("property"),
                               "object_id", F.lit("normal").alias("rank"))
        # every claim's subjects, not only the unmatched ones': the pool's positions (and so
        # the seeded choice) stay those of the full search. A value of a claim's subject in a
        # role pool is its truth there too.
        given = facts.join(claims.select(F.col("subject_id")).distinct(), "subject_id", "left_semi").select(
            "subject_id", "object_id", "rank")
        given = given.withColumn("property", F.lit(ANY_RELATION)).unionByName(
            given.join(holders, "object_id").withColumnRenamed("pool", "property"))
        # kept: the search reads its pool twice (positions and truths)
        pool = named.unionByName(given).transform(plan.keep)
        found = found.unionByName(substitutes(unmatched, pool, labels, seed, attempts, wanted=wanted, links=links,
                                              plan=plan))
    found = found.select(F.col("claim_id").alias("premise_key"), F.col("candidate_id").alias("premise_object"),
                         F.col("candidate_label").alias("premise_object_label"), "choice")
    object_sets = sets.select(F.col("subject_id").alias("premise_object"), F.col("property").alias("via"),
                              F.col("regions").alias("object_values"), F.col("born").alias("object_born"),
                              F.col("died").alias("object_died"), F.col("value_names").alias("object_value_names"),
                              F.col("value_statements").alias("object_value_statements"))
    apart = _apart("bridge", "object")
    joined = known.join(found, "premise_key", "left").join(object_sets, ["premise_object", "via"], "left")
    # every premise keeps its first three false objects: a disjoint one, the first three set apart
    first_apart = F.row_number().over(Window.partitionBy("premise_key").orderBy("choice"))
    fitting = (joined.where(F.when(disjoint, apart).otherwise(F.lit(True)))
               .withColumn("rank", F.when(disjoint, first_apart).otherwise(F.col("choice") + 1))
               .where(F.coalesce(F.col("rank"), F.lit(1)) <= 3).drop("rank"))
    # a premise none of whose false objects fits keeps one row, without an object, for its reason
    unfitted = known.join(fitting.select("premise_key"), "premise_key", "left_anti")
    rows = fitting.drop("choice").unionByName(unfitted, allowMissingColumns=True)
    proof = (F.when(proven, F.struct(F.lit(PROOF_FUNCTIONAL).alias("kind"),
                                     F.col("contradicted_statement_ids").alias("statement_ids")))
             .when(disjoint & F.col("premise_object").isNotNull(), F.struct(
                 F.when(F.col("via") == LIFESPAN, F.lit(PROOF_LIFESPAN)).otherwise(F.lit(PROOF_DISJOINT)).alias("kind"),
                 F.sort_array(F.concat("bridge_value_statements", "object_value_statements")).alias("statement_ids"))))
    return (rows
            .withColumn("premise_reason", F.when(F.col("self_valued") == 1, F.lit("premise relation gives the bridge itself"))
                        .when(disjoint & F.col("bridge_values").isNull(),
                              F.lit("no proof: the relation is an open list, and the graph records no known value "
                                    "that could set the bridge apart"))
                        .when(disjoint & F.col("premise_object").isNull(),
                              F.lit("no false object that the graph sets apart from the bridge"))
                        .when(~functional & ~disjoint, F.lit("no proof: the relation is an open list, where a missing "
                                                             "statement proves nothing"))
                        .when(functional & ~proven, F.lit("no proof: the graph records no single current value"))
                        .when(F.col("premise_object").isNull(), F.lit("no false object of the right type")))
            .withColumn("premise_proof", proof)
            .select(F.col("subject_id").alias("bridge_id"), F.col("property").alias("premise_property"),
                    "premise_template", "premise_clause", "premise_answer_type", "contradicted_statement_ids",
                    "known_values", "true_labels", "unlabelled_ids", "premise_object", "premise_object_label",
                    "premise_reason", "premise_proof", "bridge_value_names", "object_values", "object_born", "object_died",
                    "object_value_names"))


def _usable(options: DataFrame, against: Sequence[str] = ("subject_label", "bridge_label")) -> DataFrame:
    """Options with a name (``name``, normalized) unlike the labels in ``against`` (the
    subject's and the bridge's) and "I do not know"'s: an option must not give the question
    away or repeat the fallback."""
    name = normalized(F.col("option"))
    unlike = [normalized(F.col(column)) for column in against] + [normalized(F.lit(IDK))]
    return options.where(F.col("option").isNotNull() & ~name.isin(*unlike)).withColumn("name", name)


def _first_by_name(options: DataFrame, key: str, seed: int, wanted: int) -> DataFrame:
    """Per ``key``, the first ``wanted`` options by priority (ties in seeded order) with
    pairwise different names: one option per name, the one of highest priority."""
    order = ("priority", seeded_hash(F.col("option"), seed))
    per_name = Window.partitionBy(key, "name").orderBy(*order)
    ranked = Window.partitionBy(key).orderBy(*order)
    return (options.withColumn("copy", F.row_number().over(per_name)).where("copy = 1")
            .withColumn("rank", F.row_number().over(ranked)).where(F.col("rank") <= wanted).drop("copy"))


def _answer_options(answers: DataFrame, facts: DataFrame, labels: DataFrame, seed: int, attempts: int,
                    plan: Lazy = LAZY) -> DataFrame:
    """Per second hop (``bridge_id``, ``second``: its answer is the only current value, so
    the same for every chain through it), options that depend on neither the chain's subject
    nor the premise, ranked and distinct by name: the near miss, same-relation substitutes of
    the answer, then any entity sharing a type with it (dates: the answer moved by whole steps
    of its precision). Searched once per second hop, not per chain: a country is the bridge of
    thousands of chains (millions on the full graph), and the substitute search probes
    ``attempts`` pool positions for each row it gets. Five kept: the subject's name may take
    one (``_chain_options``)."""
    answers = answers.withColumn("answer_key", stable_id(F.col("bridge_id"), F.col("second")))
    near = answers.select("answer_key", F.col("answer_text").alias("option"), F.lit("near_miss").alias("role"),
                          F.lit(0.0).alias("priority"))
    entity = answers.where(~F.col("is_date"))
    # No subject to exclude by id here: the subject is excluded by name, per chain.
    searched = entity.select(F.col("answer_key").alias("claim_id"), F.col("second").alias("pool_relation"),
                             F.col("bridge_id").alias("truth_subject"), F.col("answer_id").alias("object_id"),
                             F.lit(None).cast("string").alias("subject_id"))
    same_relation = substitutes(searched, facts, labels, seed, attempts, wanted=5, plan=plan).select(
        F.col("claim_id").alias("answer_key"), F.col("candidate_label").alias("option"),
        F.lit("distractor").alias("role"), (F.lit(2) + F.col("choice") / 10).alias("priority"))
    anything = labels.where(F.col("label").isNotNull()).select(
        F.lit("any").alias("property"), F.col("id").alias("object_id"), F.lit("normal").alias("rank"),
        F.lit(None).cast("string").alias("subject_id"))
    same_type = substitutes(searched.withColumn("pool_relation", F.lit("any")), anything, labels, seed, attempts,
                            wanted=5, plan=plan).select(
        F.col("claim_id").alias("answer_key"), F.col("candidate_label").alias("option"),
        F.lit("distractor").alias("role"), (F.lit(3) + F.col("choice") / 10).alias("priority"))
    dates = answers.where(F.col("is_date")).select(
        "answer_key", "answer_value", "answer_precision",
        F.explode(F.array(F.lit(-2), F.lit(-1), F.lit(1), F.lit(3))).alias("steps"))
    dates = dates.select(
        "answer_key", date_text(shifted_date(F.col("answer_value"), F.col("answer_precision"),
                                             F.col("steps") * precision_years(F.col("answer_precision"))),
                                F.col("answer_precision")).alias("option"),
        F.lit("distractor").alias("role"), (F.lit(2) + F.abs(F.col("steps")) / 10).alias("priority"))
    options = near.unionByName(same_relation).unionByName(same_type).unionByName(dates)
    options = _usable(options.join(answers.select("answer_key", "bridge_id", "second", "bridge_label"), "answer_key"),
                      against=("bridge_label",))
    return _first_by_name(options, "answer_key", seed, 5).select("bridge_id", "second", "option", "role", "priority",
                                                                  "name", "rank")


def _chain_options(chain_rows: DataFrame, by_answer: DataFrame) -> DataFrame:
    """Per chain (``chain_id``), its second hop's options named unlike its subject, the first
    four by the ``rank`` ``_answer_options`` gave them (already distinct by name). Three would
    do (a context option named like one of them takes its slot); one spare."""
    options = (chain_rows.select("chain_id", "bridge_id", "second", normalized(F.col("subject_label")).alias("subject"))
               .join(by_answer, ["bridge_id", "second"]).where(F.col("name") != F.col("subject")))
    return (options.withColumn("kept", F.row_number().over(Window.partitionBy("chain_id").orderBy("rank")))
            .where("kept <= 4").select("chain_id", "option", "role", "priority", "name"))


ANSWER_COLUMNS = ("bridge_id", "second", "answer_id", "answer_text", "answer_value", "answer_precision", "is_date",
                  "bridge_label")


# Entities holding a second-hop premise (born in Lyon) tried per premise as its context option.
CONTEXT_HOLDERS = 8


def _context_options(candidates: DataFrame, facts: DataFrame, labels: DataFrame, seed: int) -> DataFrame:
    """Per candidate, the context option (entity answers only). A premise on the bridge: the
    answer the question would have if the premise's object were the bridge. A premise on the
    second hop: an entity sharing a class with the answer that the premise is true of (a
    person born in Lyon), the first in seeded order: it fits the description, not the chain."""
    unique = only_values(facts)
    on_bridge = (candidates.where(~F.col("is_date") & (F.col("premise_hop") == 1))
                 .join(unique.select(F.col("subject_id").alias("premise_object"), F.col("property").alias("second"),
                                     F.col("object_id").alias("context_id")), ["premise_object", "second"]))
    # a few seeded holders per premise before the join: "born in London" has thousands
    on_answer_rows = candidates.where(F.col("premise_hop") == 2)
    asked_premises = on_answer_rows.select("premise_property", "premise_object").distinct()
    few = Window.partitionBy("premise_property", "premise_object").orderBy(
        seeded_hash(F.col("context_id"), seed), "context_id")
    holders = (unique.select(F.col("property").alias("premise_property"), F.col("object_id").alias("premise_object"),
                             F.col("subject_id").alias("context_id"))
               .join(asked_premises, ["premise_property", "premise_object"], "left_semi")
               .withColumn("n", F.row_number().over(few)).where(F.col("n") <= CONTEXT_HOLDERS).drop("n"))
    fitting = (on_answer_rows.join(holders, ["premise_property", "premise_object"])
               .join(labels.select(F.col("id").alias("context_id"), F.col("instance_of").alias("context_types")),
                     "context_id")
               .where(F.arrays_overlap(F.coalesce("context_types", F.array().cast("array<string>")),
                                       F.coalesce("answer_types", F.array().cast("array<string>")))))
    first_fitting = Window.partitionBy("candidate_id").orderBy(seeded_hash(F.col("context_id"), seed), "context_id")
    on_answer = fitting.withColumn("n", F.row_number().over(first_fitting)).where("n = 1").drop("n", "context_types")
    columns = ("candidate_id", "chain_id", "answer_id", "subject_label", "bridge_label", "context_id")
    return (on_bridge.select(*columns).unionByName(on_answer.select(*columns))
            .where(F.col("context_id") != F.col("answer_id"))
            .join(labels.select(F.col("id").alias("context_id"), F.col("label").alias("option")), "context_id")
            .transform(_usable)
            .select("candidate_id", "chain_id", "option", F.lit("context").alias("role"),
                    F.lit(1.0).alias("priority"), "name"))


def _option_counts(candidates: DataFrame, by_chain: DataFrame, context: DataFrame) -> DataFrame:
    """Per candidate, its distinct options besides "I do not know", counted up to five (its
    chain's first four and a context option named unlike them: enough to decide three or
    more), without ranking them."""
    per_chain = by_chain.groupBy("chain_id").agg(F.count("*").alias("chain_options"))
    new_context = (context.join(by_chain.select("chain_id", "name"), ["chain_id", "name"], "left_anti")
                   .select("candidate_id").distinct().withColumn("context_options", F.lit(1)))
    return (candidates.select("candidate_id", "chain_id").join(per_chain, "chain_id", "left")
            .join(new_context, "candidate_id", "left")
            .select("candidate_id", (F.coalesce("chain_options", F.lit(0))
                                     + F.coalesce("context_options", F.lit(0))).alias("options_found")))


def _distractors(chosen: DataFrame, by_chain: DataFrame, context: DataFrame, seed: int) -> DataFrame:
    """Per chosen candidate (``candidate_id``), the three options other than "I do not know",
    in order of priority: near miss, context, same-relation substitutes, same-type entities
    (dates: the answer moved by whole steps of its precision)."""
    options = (chosen.select("candidate_id", "chain_id").join(by_chain, "chain_id")
               .unionByName(context.join(chosen.select("candidate_id"), "candidate_id", "left_semi")))
    return (_first_by_name(options, "candidate_id", seed, 3)
            .groupBy("candidate_id").agg(F.sort_array(F.collect_list(F.struct("rank", "option", "role")))
                                         .alias("distractors")))


# What the option searches read of a candidate that passed the checks (hoax_questions).
PASSING_COLUMNS = ANSWER_COLUMNS + ("candidate_id", "chain_id", "subject_label", "premise_hop", "premise_property",
                                    "premise_object", "answer_types")
# What with_country reads of a chosen candidate.
COUNTRY_COLUMNS = ("candidate_id", "subject_id", "bridge_id", "subject_types", "bridge_types", "subject_label",
                   "bridge_label")
# Chosen questions up to this many join the wide candidate rows as a broadcast (465k at 10^5
# entities), not by shuffling those rows.
CHOSEN_BROADCAST_ROWS = 1_000_000
# Comparison partners (about 0.3 kB a row) up to this many join the chosen rows as a broadcast.
PARTNER_BROADCAST_ROWS = 200_000
# What the checks that join the graph read of a candidate, its chain for the pick after them
# and its hop for hoax_stats (hoax_questions).
CHECKED_COLUMNS = ("candidate_id", "chain_id", "subject_id", "premise_property", "premise_object", "premise_hop",
                   "subject_types", "bridge_types", "object_values", "object_born", "object_died",
                   "names_near_miss")
NOT_TRIED = "premise not tried: past the chain's hoax.premises_tried_per_chain"
PREMISE_TRUE_OF_SUBJECT = "premise holds for the subject, which the clause could describe"
PREMISE_UNPROVEN_OF_SUBJECT = "premise not proven false of the subject, which the clause could describe"


def _unlabelled_reason() -> Column:
    """Why none of a chain's candidates can be asked: an entity of the chain without a label
    (on ``chains`` rows). Null: it has its labels."""
    return (F.when(F.col("subject_label").isNull(), F.lit("subject has no label"))
            .when(F.col("bridge_label").isNull(), F.lit("bridge entity has no label"))
            .when(F.col("answer_text").isNull(), F.lit("answer has no label")))


def _early_reason() -> Column:
    """Why a candidate fails before its premise is checked against the graph: its chain's
    labels (``chain_reason``), the premises of the entity it describes (``premise_reason``),
    a premise on a hop's relation or naming an entity of the chain. Null: try it."""
    return (F.when(F.col("chain_reason").isNotNull(), F.col("chain_reason"))
            .when(F.col("premise_property").isNull(),
                  F.when(F.col("premise_hop") == 2, F.lit("answer has no premise relation"))
                  .otherwise(F.lit("bridge entity has no premise relation")))
            .when(F.col("premise_property").isin(F.col("first"), F.col("second")),
                  F.lit("premise relation is a hop's relation"))
            .when(F.col("premise_reason").isNotNull(), F.col("premise_reason"))
            .when(F.col("premise_object").isin(F.col("subject_id"), F.col("bridge_id"),
                                               F.coalesce(F.col("answer_id"), F.lit(""))),
                  F.lit("premise object is an entity of the chain")))


def _seeded_order(seed: int) -> tuple[Column, Column]:
    """The order a chain's candidates are tried and picked in (the id breaks hash ties)."""
    return seeded_hash(F.col("candidate_id"), seed), F.col("candidate_id")


def _triage(walked: DataFrame, targets: DataFrame, found: DataFrame, seed: int, tried_per_chain: int,
            plan: Lazy = LAZY) -> tuple[DataFrame, DataFrame]:
    """(candidates to try: chain and premise keys; every other candidate's ``premise_hop``
    and reason, what ``hoax_stats`` counts), on narrow rows. A chain has a candidate per premise
    of the entities its premise may describe (``premise_targets``; dozens for a country: 14
    per chain on the synthetic graphs) and yields one question, the first candidate in seeded
    order that passes every check. Only its first ``tried_per_chain`` candidates with no early
    reason go through the checks that join the graph; the rest are counted as not tried, so a
    chain whose tried candidates all fail a later check has no question."""
    on_answer = F.col("premise_hop") == 2
    # The labels' reasons are the chain's: worked out per chain, so that the candidate rows
    # (dozens per chain) carry no label text.
    pairs = (walked.select("chain_id", "subject_id", "first", "bridge_id", "second", "answer_id",
                           _unlabelled_reason().alias("chain_reason"))
             .join(targets, "chain_id")
             .join(found.select(F.col("bridge_id").alias("premise_on"), "premise_property", "premise_object",
                                "premise_reason"), "premise_on", "left")
             .withColumn("reason", _early_reason())
             # Only a candidate with no early reason needs its id (its order, its checks): a
             # SHA-256 per row is spared for the 3.5M of the 7.9M rows at 10^5 entities that
             # have an early reason. A bridge premise keeps the id it had before
             # premises on the second hop.
             .withColumn("candidate_id", F.when(F.col("reason").isNull(), stable_id(
                 F.col("chain_id"), F.coalesce("premise_property", F.lit("")), F.coalesce("premise_object", F.lit("")),
                 F.when(on_answer, F.lit(SECOND_HOP))))))
    # what the tried candidates are joined back to their chains and premises by
    keys = ("candidate_id", "chain_id", "bridge_id", "premise_hop", "premise_on", "premise_property", "premise_object")
    pairs = pairs.select(*keys, "reason").transform(plan.keep)
    # Only the candidates with no early reason are ranked: the window sorts them alone.
    order = Window.partitionBy("chain_id").orderBy(*_seeded_order(seed))
    pending = (pairs.where(F.col("reason").isNull())
               .withColumn("reason", F.when(F.row_number().over(order) > tried_per_chain, F.lit(NOT_TRIED)))
               .transform(plan.keep))
    settled = (pairs.where(F.col("reason").isNotNull()).unionByName(pending.where(F.col("reason").isNotNull()))
               .select("premise_hop", "reason"))
    tried = pending.where(F.col("reason").isNull()).select(*keys)
    return tried, settled


def _wide_candidates(walked: DataFrame, tried: DataFrame, found: DataFrame, spec: HoaxSpec) -> DataFrame:
    """The tried candidates' wide rows: the chain's, the premise's (a premise is unique per
    entity, property, object), and the question with its description."""
    # The tried rows meet their premise first, then their chain: the chains' wide rows (labels,
    # types, templates) cross one shuffle where they crossed two, the premises' rows two
    # where they crossed one (at 10^5 entities the chains' second shuffle was 987 MiB).
    candidates = (tried.join(found.withColumnRenamed("bridge_id", "premise_on"),
                             ["premise_on", "premise_property", "premise_object"])
                  .join(walked, ["chain_id", "bridge_id"]))
    on_answer = F.col("premise_hop") == 2
    described_types = F.coalesce(F.when(on_answer, F.col("answer_types")).otherwise(F.col("bridge_types")),
                                 F.array().cast("array<string>"))
    person = F.array_contains(described_types, "Q5")
    clause = fill(F.when(person, F.regexp_replace(F.col("premise_clause"), "^that ", "who "))
                  .otherwise(F.col("premise_clause")), F.lit(""), F.col("premise_object_label"))
    first_phrase = fill(F.col("role"), F.col("subject_label"))
    # The second hop asked through its bridge phrase: "the spouse of the director of Titanic".
    asked = fill(mapping_column(spec.bridges, F.col("second")), first_phrase)
    noun = type_noun(F.col("answer_types"), spec)
    on_answer_question = F.replace(F.replace(F.replace(
        F.lit(spec.second_hop_question), F.lit("<T>"), noun),
        F.lit("<C>"), clause), F.lit("<A>"), asked)
    candidates = (candidates
                  .withColumn("premise_on_label", F.when(on_answer, F.col("answer_text")).otherwise(F.col("bridge_label")))
                  # "a person who was born in Nake and is the spouse of the father of Viktor
                  # Daso": the clause stays on the thing asked for, as in the question
                  .withColumn("description", F.when(on_answer, F.concat(
                      F.when(noun.rlike("^[aeioAEIO]"), F.lit("an ")).otherwise(F.lit("a ")), noun, F.lit(" "),
                      clause, F.lit(" and is "), asked))
                      .otherwise(F.concat(first_phrase, F.lit(" "), clause)))
                  .withColumn("question", F.when(on_answer, on_answer_question)
                              .otherwise(fill(F.col("second_question"), F.col("description"))))
                  # tested here, so that the checks' joins below carry a flag, not the texts
                  .withColumn("names_near_miss", contains_words(F.col("question"), F.col("answer_text"))))
    return candidates


def hoax_questions(facts: DataFrame, labels: DataFrame, frames: dict[str, DataFrame], spec: HoaxSpec,
                   seed: int, attempts: int = 16, source: str = "wikidata",
                   tried_per_chain: int = 3, countries: Sequence[str] | None = None,
                   dated_first: DataFrame | None = None,
                   containment: DataFrame | None = None, plan: Lazy = LAZY) -> tuple[DataFrame, DataFrame]:
    """(questions, the pattern and reason of every candidate of the bridge walk, either hop:
    what ``hoax_stats`` counts).
    ``facts``: claims' ``resolved_facts`` over ``spec.properties``; ``labels``: id, label,
    description, instance_of, aliases (both checkpointed: they are joined dozens of times);
    ``dated_first``: ``dated_first_hops``; ``containment``: ``containment_links`` (computed
    here when not given); ``countries``: country ids a question's country must be one of
    (None: any)."""
    if tried_per_chain < 1:
        raise ValueError(f"hoax.premises_tried_per_chain must be at least 1, not {tried_per_chain}")
    # Kept (plan.keep: the job's plan checkpoints them) where a frame feeds several branches:
    # each would recompute the walk, and the plan (templates filled, names normalised, inlined
    # into every use) grows past what the driver can even print. The inputs are checkpointed
    # by the caller (the job: the intersection pattern reads them too): each of the dozens of
    # joins below would otherwise analyse and optimise their whole lineage again, which took
    # two thirds of a run on a small dump. A local checkpoint is not recomputed if an executor
    # is lost: Spark fails the stage's run, which a rerun repeats whole.
    walked = chains(facts, labels, frames, dated_first, spec.dated_role).transform(plan.keep)
    containment = containment if containment is not None else containment_links(facts).transform(plan.keep)
    sets = disjoint_value_sets(facts, labels, spec, containment).transform(plan.keep)
    targets = premise_targets(walked, spec)
    # one search for both hops' entities: a bridge is often another chain's answer
    found = premises(facts, labels, frames, targets.select(F.col("premise_on").alias("bridge_id")), spec, seed,
                     attempts, containment, plan, sets).transform(plan.keep)
    tried, settled = _triage(walked, targets, found, seed, tried_per_chain, plan)
    # kept: read five times below, each read a projection (the checks' keys and inputs, the
    # option searches', the country's), then the chosen rows
    candidates = _wide_candidates(walked, tried, found, spec).transform(plan.keep)
    # The premise must be absent from the graph in every rank and time, in both directions
    # (borders, spouses and twin towns are symmetric; substitutes already avoid the bridge's
    # values, this is the proof written down), and for every value the first hop ever had: a
    # former spouse who matches the description would make the near miss right.
    statements = facts.where(F.col("object_id").isNotNull()).select("subject_id", "property", "object_id")
    stated = statements.select(F.col("subject_id").alias("holder"), F.col("property").alias("premise_property"),
                               F.col("object_id").alias("premise_object")).unionByName(
        statements.select(F.col("object_id").alias("holder"), F.col("property").alias("premise_property"),
                          F.col("subject_id").alias("premise_object"))).distinct()
    values = facts.where((F.col("rank") != "deprecated") & F.col("object_id").isNotNull()).select(
        "subject_id", "property", "object_id")
    keys = candidates.select("candidate_id", "subject_id", "first", "bridge_id", "second", "premise_hop", "premise_on",
                             "premise_property", "premise_object").where(F.col("premise_object").isNotNull())
    ever_first = keys.join(values.select("subject_id", F.col("property").alias("first"),
                                         F.col("object_id").alias("holder")), ["subject_id", "first"])
    # A premise on the second hop: every second-hop value of every value the first hop had
    # (the current bridge among them).
    ever_second = (ever_first.where(F.col("premise_hop") == 2).withColumnRenamed("holder", "first_value")
                   .join(values.select(F.col("subject_id").alias("first_value"), F.col("property").alias("second"),
                                       F.col("object_id").alias("holder")), ["first_value", "second"])
                   .drop("first_value"))
    # The subject too: "the capital of Grastaia whose head of government is Pedro Gratra" also
    # reads as Grastaia's head of government, and is then true where he is.
    holders = (ever_first.where(F.col("premise_hop") == 1).unionByName(ever_second)
               .unionByName(keys.withColumn("holder", F.col("subject_id"))))
    stated_for = (holders.join(stated, ["holder", "premise_property", "premise_object"])
                  .groupBy("candidate_id").agg(F.max((F.col("holder") == F.col("premise_on")).cast("int"))
                                               .alias("stated_for_bridge"),
                                               F.max((F.col("holder") == F.col("subject_id")).cast("int"))
                                               .alias("stated_for_subject")))
    # The clause could also describe the subject ("the spouse of Bianca whose father is Dario":
    # Bianca's father?) where the subject holds the premise's relation or shares a class with
    # the bridge: then the premise must be proven false of the subject too, by its one current
    # value of a one-value relation being another.
    subject_holds = facts.where(F.col("object_id").isNotNull() & (F.col("rank") != "deprecated")).select(
        "subject_id", F.col("property").alias("premise_property"), F.lit(True).alias("subject_holds")).distinct()
    subject_value = only_values(facts).where(F.col("object_id").isNotNull()).select(
        "subject_id", F.col("property").alias("premise_property"), F.col("object_id").alias("subject_value"))
    # The checks join the graph on narrow rows (a candidate's keys and what the checks read);
    # the wide rows (labels, templates, the question) are joined whole by the chosen only.
    checked = (candidates.select(*CHECKED_COLUMNS)
               .join(subject_holds, ["subject_id", "premise_property"], "left")
               .join(subject_value, ["subject_id", "premise_property"], "left"))
    no_types = F.array().cast("array<string>")
    # (a premise on the second hop follows "Which person": it describes no entity named)
    could_describe_subject = (F.col("premise_hop") == 1) & (F.coalesce(F.col("subject_holds"), F.lit(False)) | F.arrays_overlap(
        F.coalesce(F.col("subject_types"), no_types), F.coalesce(F.col("bridge_types"), no_types)))
    # ... or, for a premise the graph proves by a disjointness, by the subject being set apart
    # from the premise's object too ("the country where Scotland lies that shares a border
    # with Belize": Scotland lies in Europe as well)
    vias = {r: d.via for r, d in spec.disjoint_premises.items()}
    subject_sets = sets.select("subject_id", F.col("property").alias("via"), F.col("regions").alias("subject_values"),
                               F.col("born").alias("subject_born"), F.col("died").alias("subject_died"))
    checked = (checked.withColumn("via", mapping_column(vias, F.col("premise_property")))
               .join(subject_sets, ["subject_id", "via"], "left"))
    proven_of_subject = (
        (F.col("premise_property").isin(list(spec.functional_premises))
         & F.col("subject_value").isNotNull() & (F.col("subject_value") != F.col("premise_object")))
        | (F.col("premise_property").isin(list(vias)) & _apart("subject", "object")))
    ambiguous = ambiguous_ids(labels)
    checked = (checked.join(stated_for, "candidate_id", "left")
               .join(ambiguous.select(F.col("id").alias("subject_id"), F.lit(True).alias("subject_ambiguous")),
                     "subject_id", "left")
               .join(ambiguous.select(F.col("id").alias("premise_object"), F.lit(True).alias("object_ambiguous")),
                     "premise_object", "left"))
    # The early checks passed in _triage; these are the ones that join the graph.
    checks = (
        F.when(F.col("stated_for_bridge") == 1, F.lit("premise is stated in the graph"))
        .when(F.col("stated_for_subject") == 1, F.lit(PREMISE_TRUE_OF_SUBJECT))
        .when(could_describe_subject & ~proven_of_subject, F.lit(PREMISE_UNPROVEN_OF_SUBJECT))
        .when(F.col("stated_for_bridge") == 0, F.when(F.col("premise_hop") == 2, F.lit(
            "premise holds for another value the second hop had")).otherwise(F.lit(
                "premise holds for another value the first hop had")))
        .when(F.col("subject_ambiguous").isNotNull(), F.lit("subject's name is ambiguous"))
        .when(F.col("object_ambiguous").isNotNull(), F.lit("premise object's name is ambiguous"))
        .when(F.col("names_near_miss"), F.lit("question names its near miss"))
    )
    # From here each candidate's verdict travels on narrow rows; the wide rows are read for
    # what each step needs, and joined whole only by the chosen questions.
    # reason: the graph checks' (null: passed them)
    verdicts = checked.select("candidate_id", "chain_id", "premise_hop", checks.alias("reason")).transform(plan.keep)
    # Options only for the candidates every other check passed: searched once per second hop
    # (the costly part) and shared by its chains, counted per candidate, and ranked only for
    # the chosen ones.
    passing = (candidates.select(*PASSING_COLUMNS)
               .join(verdicts.where(F.col("reason").isNull()).select("candidate_id"), "candidate_id", "left_semi")
               .transform(plan.keep))
    # distinct, not dropDuplicates: the columns are functions of the key (the second hop of a
    # chain is the only current value), and dropDuplicates' first() over strings sorts every
    # row, which ran out of memory at 10^6 entities.
    by_answer = _answer_options(passing.select(*ANSWER_COLUMNS).distinct(), facts, labels, seed,
                                attempts, plan).transform(plan.keep)
    by_chain = _chain_options(passing.select("chain_id", "bridge_id", "second", "subject_label").distinct(),
                              by_answer).transform(plan.keep)
    context = _context_options(passing, facts, labels, seed).transform(plan.keep)
    reason = (
        F.when(F.col("reason").isNotNull(), F.col("reason"))
        .when(F.coalesce(F.col("options_found"), F.lit(0)) < 3, F.lit("fewer than three distractors"))
        .otherwise(F.lit(KEPT))
    )
    # reason: KEPT, or why not (the options counted)
    verdicts = (verdicts.join(_option_counts(passing, by_chain, context), "candidate_id", "left")
                .select("candidate_id", "chain_id", "premise_hop", reason.alias("reason")).transform(plan.keep))
    # One question per chain: among its kept premises, the first in seeded order.
    per_chain = Window.partitionBy("chain_id").orderBy(*_seeded_order(seed))
    kept = verdicts.where(F.col("reason") == KEPT).withColumn("pick", F.row_number().over(per_chain))
    placed = with_country(candidates.select(*COUNTRY_COLUMNS).join(kept.where("pick = 1").select("candidate_id"),
                                                                   "candidate_id", "left_semi"), facts, labels, spec)
    chosen = candidates.join(plan.broadcast_if_small(placed.select("candidate_id", "country", "country_id"),
                                                     CHOSEN_BROADCAST_ROWS), "candidate_id").transform(plan.keep)
    late = F.when(F.col("pick") > 1, F.lit("another premise chosen for the chain"))
    if countries:  # the country is the chain's: all its kept premises are outside
        among = F.coalesce(F.col("country_id").isin(list(countries)), F.lit(False))
        outside = chosen.where(~among).select("chain_id", F.lit(True).alias("outside"))
        kept = kept.join(outside, "chain_id", "left")
        late = F.when(F.col("outside").isNotNull(), F.lit(OUTSIDE_COUNTRIES)).otherwise(late)
        chosen = chosen.where(among)
    passed_over = kept.select("candidate_id", late.alias("late_reason")).where(F.col("late_reason").isNotNull())
    chosen = chosen.join(_distractors(chosen, by_chain, context, seed), "candidate_id", "left")
    chosen = with_comparisons(chosen, walked, ambiguous, spec, seed, plan).transform(plan.keep)
    compared = chosen.where(F.col("pattern") == COMPARISON).select(
        "candidate_id", F.lit(ASKED_AS_COMPARISON).alias("compared_reason"))
    # reason: final (a kept candidate passed over for another, or asked as a comparison)
    verdicts = (verdicts.join(passed_over, "candidate_id", "left").join(compared, "candidate_id", "left")
                .select("premise_hop", F.coalesce(F.col("late_reason"), F.col("compared_reason"), F.col("reason"))
                        .alias("reason")))
    questions = _assemble(chosen, spec, seed, source, plan)
    return questions, verdicts.unionByName(settled).select(_hop_pattern().alias("pattern"), "reason")


def _hop_pattern() -> Column:
    """The pattern of a bridge-walk row by the hop its premise is on."""
    return F.when(F.col("premise_hop") == 2, F.lit(SECOND_HOP)).otherwise(F.lit(PATTERN))


def _signed_year(value: Column) -> Column:
    """The year of a canonical time value ("1954-08-16", "-0050"), negative before the common era."""
    year = F.regexp_extract(value, r"^-?(\d+)", 1).cast("long")
    return F.when(value.startswith("-"), -year).otherwise(year)


PARTNER_COLUMNS = ("partner_chain", "partner_subject", "partner_first", "partner_bridge", "partner_bridge_label",
                   "partner_first_statement", "partner_second_statement", "partner_value", "partner_date",
                   "partner_description")


def with_comparisons(chosen: DataFrame, walked: DataFrame, ambiguous: DataFrame, spec: HoaxSpec,
                     seed: int, plan: Lazy = LAZY) -> DataFrame:
    """The chosen questions, a seeded share of the date ones (``spec.comparisons``) turned into
    comparisons: "Who was born first: <the premise's description>, or <another chain's>?".

    The partner is another true chain asking the same date relation (its first hop the only
    current value, its subject's name unambiguous), of another bridge, named unlike it, in
    another year: so the tie is false, the near miss (the one first without the premise) is
    decided by the graph, and nothing matches the premise's description. The partner is
    sought at ``PARTNER_ATTEMPTS`` seeded positions of its relation's pool, a join rather
    than a product of every pair. A question whose tries find none stays a date question.
    Adds ``pattern``; comparison rows replace ``question`` and ``distractors`` and carry the
    partner's hops and sentence for ``_assemble``."""
    chosen = chosen.withColumn("pattern", _hop_pattern())
    if not spec.comparisons or spec.comparison_share <= 0:
        return chosen.withColumn("near_miss_text", F.col("answer_text")).select(
            "*", *[F.lit(None).cast("string").alias(name) for name in PARTNER_COLUMNS + ("partner_sentence",
                                                                                          "bridge_dated")])
    compared = sorted(spec.comparisons)
    dated = F.col("is_date") & F.col("second").isin(compared) & (F.col("answer_precision") >= YEAR_PRECISION)
    drawn = dated & (F.pmod(seeded_hash(F.col("candidate_id"), seed, COMPARISON), F.lit(1000))
                     < int(round(spec.comparison_share * 1000)))
    by_slot = Window.partitionBy("second").orderBy(seeded_hash(F.col("partner_chain"), seed), "partner_chain")
    pool = (walked.where(dated & F.col("subject_label").isNotNull() & F.col("bridge_label").isNotNull()
                         & F.col("at_year").isNull())
            .join(ambiguous.select(F.col("id").alias("subject_id")), "subject_id", "left_anti")
            .select("second", F.col("chain_id").alias("partner_chain"), F.col("subject_id").alias("partner_subject"),
                    F.col("first").alias("partner_first"), F.col("bridge_id").alias("partner_bridge"),
                    F.col("bridge_label").alias("partner_bridge_label"),
                    F.col("first_statement").alias("partner_first_statement"),
                    F.col("second_statement").alias("partner_second_statement"),
                    F.col("answer_value").alias("partner_value"), F.col("answer_text").alias("partner_date"),
                    fill(F.col("role"), F.col("subject_label")).alias("partner_description"))
            .withColumn("slot", F.row_number().over(by_slot) - 1).transform(plan.keep))
    sizes = pool.groupBy("second").agg(F.count("*").alias("pool_size"))
    tries = (chosen.where(drawn).select("candidate_id", "second", "bridge_id", "bridge_label", "premise_object",
                                        "answer_value", "description")
             .join(F.broadcast(sizes), "second")
             .withColumn("attempt", F.explode(F.sequence(F.lit(0), F.lit(PARTNER_ATTEMPTS - 1))))
             .withColumn("slot", F.pmod(seeded_hash(F.col("candidate_id"), seed) + F.col("attempt"), F.col("pool_size"))))
    first_try = Window.partitionBy("candidate_id").orderBy("attempt")
    partners = (tries.join(pool, ["second", "slot"])
                .where((F.col("partner_bridge") != F.col("bridge_id"))
                       & ~F.coalesce(F.col("premise_object"), F.lit("")).isin(F.col("partner_bridge"),
                                                                              F.col("partner_subject"))
                       & (normalized(F.col("partner_bridge_label")) != normalized(F.col("bridge_label")))
                       & (normalized(F.col("partner_description")) != normalized(F.col("description")))
                       & (_signed_year(F.col("partner_value")) != _signed_year(F.col("answer_value"))))
                .withColumn("n", F.row_number().over(first_try)).where("n = 1")
                .drop("n", "attempt", "slot", "second", "bridge_id", "bridge_label", "premise_object", "answer_value",
                      "description"))
    # a share of the date questions: sent whole where few (their rows are wide), else shuffled
    rows = chosen.join(plan.broadcast_if_small(partners, PARTNER_BROADCAST_ROWS), "candidate_id", "left")
    paired = F.col("partner_chain").isNotNull()
    template = mapping_column({r: c.question for r, c in spec.comparisons.items()}, F.col("second"))
    premise_first = F.pmod(seeded_hash(F.col("candidate_id"), seed, "order"), F.lit(2)) == 0
    a = F.when(premise_first, F.col("description")).otherwise(F.col("partner_description"))
    b = F.when(premise_first, F.col("partner_description")).otherwise(F.col("description"))
    question = F.replace(F.replace(template, F.lit("<A>"), a), F.lit("<B>"), b)
    partner_first = _signed_year(F.col("partner_value")) < _signed_year(F.col("answer_value"))
    option = lambda text, role: F.struct(F.lit(0).alias("rank"), capitalized(text).alias("option"),  # noqa: E731
                                         F.lit(role).alias("role"))
    distractors = F.array(
        option(F.col("partner_description"), "near_miss"), option(F.col("description"), "distractor"),
        option(mapping_column({r: c.tie for r, c in spec.comparisons.items()}, F.col("second")), "distractor"))
    distractors = F.when(partner_first, distractors).otherwise(F.array(
        option(F.col("description"), "near_miss"), option(F.col("partner_description"), "distractor"),
        distractors[2]))
    dated = mapping_column({r: c.dated for r, c in spec.comparisons.items()}, F.col("second"))
    dated_text = fill(dated, F.lit(""), F.col("partner_date"))
    partner_sentence = F.concat(capitalized(F.col("partner_description")), F.lit(" is "),
                                F.col("partner_bridge_label"), F.lit(" ("), dated_text, F.lit("). "))
    return (rows.withColumn("pattern", F.when(paired, F.lit(COMPARISON)).otherwise(F.col("pattern")))
            .withColumn("question", F.when(paired, question).otherwise(F.col("question")))
            .withColumn("distractors", F.when(paired, distractors).otherwise(F.col("distractors")))
            .withColumn("near_miss_text", F.when(paired, capitalized(F.when(partner_first, F.col("partner_description"))
                                                             .otherwise(F.col("description"))))
                        .otherwise(F.col("answer_text")))
            .withColumn("partner_sentence", F.when(paired, partner_sentence))
            .withColumn("bridge_dated", F.when(paired, fill(dated, F.lit(""), F.col("answer_text")))))


def _labels(rows: DataFrame, spec: HoaxSpec) -> DataFrame:
    """The paper's labels of each question: reasoning type, false-premise type, answer type, category."""
    date = F.col("is_date")
    geographical = F.col("first_topic").isin(spec.geographical_topics) | F.col("second_topic").isin(spec.geographical_topics)
    # temporal: a first hop fixed at a year (the paper's time reference in an intermediate
    # step), or a date asked (the question asks "when")
    reasoning = F.when(date | F.col("at_year").isNotNull(), F.lit("temporal")).when(
        geographical, F.lit("geographical")).otherwise(F.lit("bridge entity"))
    premise_type = mapping_column(spec.false_premise_types, F.col("premise_answer_type"), F.lit("property"))
    by_class = answer_type_of(F.col("answer_types"), spec)
    answer_type = F.when(date, F.lit("number")).otherwise(F.coalesce(
        by_class, mapping_column(spec.answer_type_relations, F.col("second_answer_type")), F.lit("common noun")))
    by_type = [class_category(F.col(column), spec.categories_by_class) for column in ("answer_types", "subject_types")]
    category = F.coalesce(*by_type, mapping_column(spec.categories_by_relation, F.col("second")),
                          mapping_column(spec.categories_by_topic, F.col("second_topic")), F.lit(spec.default_category))
    if "pattern" in rows.columns:  # a comparison's answer is one of two entities, not a date
        reasoning = F.when(F.col("pattern") == COMPARISON, F.lit(COMPARISON)).otherwise(reasoning)
        answer_type = F.when(F.col("pattern") == COMPARISON, F.coalesce(
            answer_type_of(F.col("bridge_types"), spec), F.lit("common noun"))).otherwise(answer_type)
    return rows.withColumn("reasoning_type", reasoning).withColumn("false_premise_type", premise_type) \
        .withColumn("answer_type", answer_type).withColumn("category", category)


def _assemble(chosen: DataFrame, spec: HoaxSpec, seed: int, source: str, plan: Lazy = LAZY) -> DataFrame:
    comparison = F.col("pattern") == COMPARISON
    rows = _labels(chosen, spec).withColumn(
        "question_id", F.when(comparison, stable_id(F.lit("hoax"), F.col("candidate_id"), F.lit(COMPARISON)))
        .otherwise(stable_id(F.lit("hoax"), F.col("candidate_id"))))
    rows = with_idk_dealt(rows, seed, plan)
    premise_statement = fill(F.col("premise_template"), F.col("premise_on_label"), F.col("premise_object_label"))
    first_statement = F.concat(F.initcap(F.substring(fill(F.col("role"), F.col("subject_label")), 1, 1)),
                               F.substring(fill(F.col("role"), F.col("subject_label")), 2, 10_000),
                               F.when(F.col("at_year").isNull(), F.lit(" is ")).otherwise(F.lit(" was ")),
                               F.col("bridge_label"),
                               F.coalesce(F.concat(F.lit(" ("), F.col("bridge_dated"), F.lit(")")), F.lit("")),
                               F.lit("."))
    # a premise on the second hop: the chain's end too ("The spouse of James Cameron is Suzy Amis.")
    second_statement = F.when(F.col("premise_hop") == 2, F.concat(
        F.lit(" "), capitalized(fill(mapping_column(spec.bridges, F.col("second")), F.col("bridge_label"))),
        F.lit(" is "), F.col("answer_text"), F.lit(".")))
    named_values = F.concat_ws(", ", F.concat(F.col("true_labels"), F.transform(
        "unlabelled_ids", lambda i: F.concat(i, F.lit(" (no label in this dump)")))))
    # The proof in words: what the graph records, and why that makes the premise false.
    recorded = F.concat(
        F.lit(" The graph records "), named_values, F.lit(" instead"),
        F.coalesce(F.concat(F.lit(" ("), mapping_column(spec.functional_premises, F.col("premise_property")), F.lit(")")),
                   F.lit("")),
        F.lit("."))
    # A disjointness in words (hoax.yaml's disjoint_premises): where each side lies.
    apart = mapping_column({r: d.explanation for r, d in spec.disjoint_premises.items()}, F.col("premise_property"))
    for slot, value in (("<S>", F.col("premise_on_label")), ("<O>", F.col("premise_object_label")),
                        ("<A>", F.concat_ws(" and ", "bridge_value_names")),
                        ("<B>", F.concat_ws(" and ", "object_value_names"))):
        apart = F.replace(apart, F.lit(slot), value)
    recorded = F.when(F.col("premise_proof.kind").isin(PROOF_DISJOINT, PROOF_LIFESPAN),
                      F.concat(F.lit(" "), apart)).otherwise(recorded)
    explanation = F.concat_ws(
        "", F.coalesce(F.col("partner_sentence"), F.lit("")), first_statement,
        F.coalesce(second_statement, F.lit("")), F.lit(" It is not true that "), not_true(premise_statement),
        F.lit("."), recorded, F.lit(" Nothing matches \""), F.col("description"),
        F.lit("\", so the question has no answer: the only right option is \"" + IDK + "\"."))
    hops = F.array(
        F.struct(F.col("subject_id"), F.col("first").alias("property"), F.col("bridge_id").alias("object_id"),
                 F.lit(None).cast("string").alias("value"), F.col("first_statement").alias("statement_id"),
                 F.col("at_year").cast("string").alias("at")),
        F.struct(F.col("bridge_id").alias("subject_id"), F.col("second").alias("property"),
                 F.col("answer_id").alias("object_id"), F.col("answer_value").alias("value"),
                 F.col("second_statement").alias("statement_id"), F.lit(None).cast("string").alias("at")))
    partner_hops = F.array(
        F.struct(F.col("partner_subject").alias("subject_id"), F.col("partner_first").alias("property"),
                 F.col("partner_bridge").alias("object_id"), F.lit(None).cast("string").alias("value"),
                 F.col("partner_first_statement").alias("statement_id"), F.lit(None).cast("string").alias("at")),
        F.struct(F.col("partner_bridge").alias("subject_id"), F.col("second").alias("property"),
                 F.lit(None).cast("string").alias("object_id"), F.col("partner_value").alias("value"),
                 F.col("partner_second_statement").alias("statement_id"), F.lit(None).cast("string").alias("at")))
    hops = F.when(comparison, F.concat(hops, partner_hops)).otherwise(hops)
    return conform(rows.select(
        "question_id", F.lit(source).alias("source"), "pattern", "question",
        F.col("question").alias("template_question"), F.lit(False).alias("reworded"),
        F.transform("ordered", lambda o: o["option"]).alias("options"),
        F.transform("ordered", lambda o: o["role"]).alias("option_roles"),
        "idk_index", F.element_at(F.array(*[F.lit(x) for x in LETTERS]), F.col("idk_index") + 1).alias("idk_letter"),
        F.col("premise_on").alias("premise_subject"), F.col("premise_on_label").alias("premise_subject_label"),
        "premise_property", "premise_object", "premise_object_label", premise_statement.alias("premise_statement"),
        "premise_proof", "contradicted_statement_ids", hops.alias("hops"), "subject_id", "bridge_id",
        F.col("second").alias("asked_property"), F.col("near_miss_text").alias("near_miss"),
        explanation.alias("explanation"), "reasoning_type", "false_premise_type", "answer_type", "category",
        "country",
    ))


def hoax_stats(candidates: DataFrame, source: str) -> DataFrame:
    """Candidates per pattern and reason (``kept`` included), with each reason's share. A kept
    candidate of the bridge walk asked as a comparison is counted as ``ASKED_AS_COMPARISON``."""
    total = Window.partitionBy("pattern")
    return (candidates.groupBy(F.lit(source).alias("source"), "pattern", "reason")
            .agg(F.count("*").alias("candidates"))
            .withColumn("share", F.round(F.col("candidates") / F.sum("candidates").over(total), 4)))


def options_problems(options: Sequence[str], idk_index: int) -> list[str]:
    """What is wrong with one question's options (empty: fine)."""
    problems = []
    if len(options) != 4:
        problems.append(f"{len(options)} options, not 4")
    names = [" ".join(str(o or "").casefold().split()) for o in options]
    if any(not n for n in names):
        problems.append("an empty option")
    if len(set(names)) != len(names):
        problems.append("options repeat")
    if not 0 <= idk_index < len(options) or names[idk_index] != IDK.casefold():
        problems.append("'I do not know' is not at idk_index")
    elif names.count(IDK.casefold()) != 1:
        problems.append("'I do not know' more than once")
    return problems
