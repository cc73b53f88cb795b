"""Intersection questions from the graph: DataFrames in, DataFrames out, no I/O.

"Which city is both the place where Ann Lee was born and the capital of France?" joins two
facts of the graph, each the only current value of its (subject, relation): Ann Lee was born
in Lyon, the capital of France is Paris. The first relation holds one value at a time
(``spec.functional_premises``), so the only thing that is the first is Lyon, and Lyon is not
the second: nothing is both, and the only right option is "I do not know". The false premise
is (Ann Lee, place of birth, Paris), proven false by the statement that she was born in Lyon
(``premise_proof``, as the bridge pattern records it). The options: Paris (the near miss: the
answer without the premise), Lyon, another entity of their type, "I do not know".
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from misbench.claims.stage import KEPT, contains_words, fill, normalized
from misbench.hoax.common import (
    IDK, LETTERS, OUTSIDE_COUNTRIES, PROOF_FUNCTIONAL, ambiguous_ids, answer_type_of, capitalized, class_category,
    conform, containment_links, mapping_column, not_true, only_values, type_noun, with_country, with_idk_dealt,
)
from misbench.hoax.spec import HoaxSpec
from misbench.ids import seeded_hash, stable_id
from misbench.plans import LAZY, Lazy

INTERSECTION = "intersection"
# Pool positions tried for the second fact and the extra distractor.
ATTEMPTS = 6
NO_PARTNER = "no second fact of the same type"
NOT_DRAWN = "not drawn: past intersections.share"
FEW_OPTIONS = "fewer than three distractors"
ASKED_FROM_OTHER_SIDE = "the same two facts asked from the other side"


def _fact_rows(facts: DataFrame, labels: DataFrame, spec: HoaxSpec) -> DataFrame:
    """Facts that can be a condition: a bridge relation's only current value, subject and
    object named, the object of a class with a noun (``type_nouns``)."""
    named = labels.where(F.col("label").isNotNull())
    return (only_values(facts).where(F.col("object_id").isNotNull() & F.col("property").isin(list(spec.bridges)))
            .join(named.select(F.col("id").alias("subject_id"), F.col("label").alias("subject_label"),
                               F.col("instance_of").alias("subject_types")), "subject_id")
            .join(named.select(F.col("id").alias("object_id"), F.col("label").alias("object_label"),
                               F.col("instance_of").alias("object_types")), "object_id")
            .withColumn("noun", type_noun(F.col("object_types"), spec)).where(F.col("noun").isNotNull())
            .join(ambiguous_ids(labels).select(F.col("id").alias("subject_id")), "subject_id", "left_anti")
            .select("subject_id", "property", "object_id", "statement_id", "subject_label", "subject_types",
                    "object_label", "object_types", "noun"))


def intersection_questions(facts: DataFrame, labels: DataFrame, spec: HoaxSpec, seed: int,
                           source: str = "wikidata", countries=None,
                           containment: DataFrame | None = None, plan: Lazy = LAZY) -> tuple[DataFrame, DataFrame]:
    """(questions, candidates with their reason and pattern). ``facts``, ``labels`` and
    ``containment`` as ``stage.hoax_questions`` takes them. Both facts are on one-value relations: the first's
    proves the premise false, the second's that its object is the only thing the second
    condition names (on an open list, such as the country of a mountain, the first object
    could also be the second's). A drawn share (``spec.intersection_share``) of the facts
    each seeks a second fact of the same noun at ``ATTEMPTS`` seeded positions of its pool:
    another object, named otherwise and unambiguously, not linked to the first by part-of,
    that the first relation never gave the first subject in any rank or time, and whose own
    relation never gave its subject the first object. Two facts make one question, asked
    from the side of the smaller candidate id."""
    spark = facts.sparkSession
    if spec.intersection_share <= 0 or not spec.intersection_question:
        return (conform(spark.createDataFrame([], "question_id string")),
                spark.createDataFrame([], "candidate_id string, reason string, pattern string"))
    rows = _fact_rows(facts, labels, spec).where(F.col("property").isin(list(spec.functional_premises))) \
        .transform(plan.keep)
    firsts = rows.withColumn("candidate_id", stable_id(F.lit(INTERSECTION), F.col("subject_id"), F.col("property")))
    share = int(round(spec.intersection_share * 1000))
    drawn = F.pmod(seeded_hash(F.col("candidate_id"), seed, INTERSECTION), F.lit(1000)) < share
    firsts = firsts.withColumn("reason", F.when(~drawn, F.lit(NOT_DRAWN)))
    by_slot = Window.partitionBy("noun").orderBy(seeded_hash(F.col("b_subject_id"), F.col("b_property"), seed),
                                                  "b_subject_id", "b_property")
    pool = (rows.select(*[F.col(c).alias(f"b_{c}") for c in rows.columns]).withColumnRenamed("b_noun", "noun")
            .withColumn("b_candidate_id", stable_id(F.lit(INTERSECTION), F.col("b_subject_id"), F.col("b_property")))
            .withColumn("slot", F.row_number().over(by_slot) - 1))
    sizes = pool.groupBy("noun").agg(F.count("*").alias("pool_size"))
    tries = (firsts.where(F.col("reason").isNull()).join(F.broadcast(sizes), "noun")
             .withColumn("attempt", F.explode(F.sequence(F.lit(0), F.lit(ATTEMPTS - 1))))
             .withColumn("slot", F.pmod(seeded_hash(F.col("candidate_id"), seed) + F.col("attempt"), F.col("pool_size")))
             .join(pool, ["noun", "slot"]))
    statements = facts.where(F.col("object_id").isNotNull()).select("subject_id", "property", "object_id")
    links = containment if containment is not None else containment_links(facts)
    linked = links.unionByName(links.select(F.col("b").alias("a"), F.col("a").alias("b"))).distinct()
    # Either condition stated, in any rank or time, for the other's object: both would hold.
    stated_first = statements.select(F.col("subject_id"), "property", F.col("object_id").alias("b_object_id"),
                                     F.lit(True).alias("first_holds"))
    stated_second = statements.select(F.col("subject_id").alias("b_subject_id"), F.col("property").alias("b_property"),
                                      "object_id", F.lit(True).alias("second_holds"))
    ambiguous = ambiguous_ids(labels).select("id", F.lit(True).alias("ambiguous"))
    # Options named unlike each other, unlike either subject and absent from the question's
    # words (either would give the question away).
    phrases = F.concat_ws(" ", fill(mapping_column(spec.bridges, F.col("property")), F.col("subject_label")),
                          fill(mapping_column(spec.bridges, F.col("b_property")), F.col("b_subject_label")))
    subjects = (normalized(F.col("subject_label")), normalized(F.col("b_subject_label")))
    valid = (tries.where((F.col("b_object_id") != F.col("object_id"))
                         & ((F.col("b_subject_id") != F.col("subject_id")) | (F.col("b_property") != F.col("property")))
                         & (normalized(F.col("b_object_label")) != normalized(F.col("object_label")))
                         & ~normalized(F.col("b_object_label")).isin(*subjects)
                         & ~normalized(F.col("object_label")).isin(*subjects)
                         & ~contains_words(phrases, F.col("object_label"))
                         & ~contains_words(phrases, F.col("b_object_label")))
             .join(stated_first, ["subject_id", "property", "b_object_id"], "left")
             .join(stated_second, ["b_subject_id", "b_property", "object_id"], "left")
             .join(linked.select(F.col("a").alias("object_id"), F.col("b").alias("b_object_id"),
                                 F.lit(True).alias("part_of")), ["object_id", "b_object_id"], "left")
             .join(ambiguous.withColumnRenamed("id", "object_id"), "object_id", "left")
             .join(ambiguous.withColumnRenamed("id", "b_object_id").withColumnRenamed("ambiguous", "b_ambiguous"),
                   "b_object_id", "left")
             .where(F.col("first_holds").isNull() & F.col("second_holds").isNull() & F.col("part_of").isNull()
                    & F.col("ambiguous").isNull() & F.col("b_ambiguous").isNull()))
    first_try = Window.partitionBy("candidate_id").orderBy("attempt")
    partners = valid.withColumn("n", F.row_number().over(first_try)).where("n = 1").drop("n").withColumn(
        "phrases", phrases).transform(plan.keep)
    reasons = firsts.select("candidate_id", F.coalesce("reason", F.lit(NO_PARTNER)).alias("reason"),
                            F.lit(INTERSECTION).alias("pattern"))
    # a small graph (the demo's) has none: the options, countries and wording cost seconds of Spark
    if not plan.has_rows(partners):
        return conform(spark.createDataFrame([], "question_id string")), reasons
    # The extra distractor: another named entity of the noun, named unlike both objects and
    # both subjects and absent from the question (neither condition's value, so not both).
    entities = (labels.where(F.col("label").isNotNull()).select(F.col("label").alias("extra_label"),
                                                                type_noun(F.col("instance_of"), spec).alias("noun"), "id")
                .where(F.col("noun").isNotNull()))
    entities = entities.withColumn("slot", F.row_number().over(
        Window.partitionBy("noun").orderBy(seeded_hash(F.col("id"), seed), "id")) - 1)
    entity_sizes = entities.groupBy("noun").agg(F.count("*").alias("pool_size"))
    extra = (partners.select("candidate_id", "noun", "object_label", "subject_label", "b_object_label",
                             "b_subject_label", "phrases")
             .join(F.broadcast(entity_sizes), "noun")
             .withColumn("attempt", F.explode(F.sequence(F.lit(0), F.lit(ATTEMPTS - 1))))
             .withColumn("slot", F.pmod(seeded_hash(F.col("candidate_id"), seed, "extra") + F.col("attempt"),
                                        F.col("pool_size")))
             .join(entities.drop("id"), ["noun", "slot"])
             .where(~normalized(F.col("extra_label")).isin(
                 normalized(F.col("object_label")), normalized(F.col("b_object_label")), normalized(F.lit(IDK)),
                 normalized(F.col("subject_label")), normalized(F.col("b_subject_label")))
                 & ~contains_words(F.col("phrases"), F.col("extra_label")))
             .withColumn("n", F.row_number().over(first_try)).where("n = 1").select("candidate_id", "extra_label"))
    paired = partners.join(extra, "candidate_id", "left").transform(plan.keep)
    # the country: the first subject's, else the second's (with_country's order for a bridge)
    optioned = with_country(paired.where(F.col("extra_label").isNotNull())
                            .withColumn("bridge_id", F.col("b_subject_id"))
                            .withColumn("bridge_types", F.col("b_subject_types"))
                            .withColumn("bridge_label", F.col("b_subject_label")), facts, labels, spec)
    if countries:
        among = F.coalesce(F.col("country_id").isin(list(countries)), F.lit(False))
        outside = optioned.where(~among).select("candidate_id", F.lit(OUTSIDE_COUNTRIES).alias("late_reason"))
        optioned = optioned.where(among)
    else:
        outside = spark.createDataFrame([], "candidate_id string, late_reason string")
    # Two facts, one question: from the side of the smaller candidate id among those asked.
    pair = F.array_sort(F.array(F.col("candidate_id"), F.col("b_candidate_id")))
    once = Window.partitionBy(pair).orderBy("candidate_id")
    optioned = optioned.withColumn("copy", F.row_number().over(once)).transform(plan.keep)
    chosen = optioned.where(F.col("copy") == 1)
    late = (paired.where(F.col("extra_label").isNull()).select("candidate_id", F.lit(FEW_OPTIONS).alias("late_reason"))
            .unionByName(outside)
            .unionByName(optioned.where(F.col("copy") > 1).select(
                "candidate_id", F.lit(ASKED_FROM_OTHER_SIDE).alias("late_reason"))))
    reasons = (firsts.select("candidate_id", "reason")
               .join(paired.select("candidate_id", F.lit(KEPT).alias("kept")), "candidate_id", "left")
               .join(late, "candidate_id", "left")
               .select("candidate_id", F.coalesce("reason", "late_reason", "kept", F.lit(NO_PARTNER)).alias("reason")))
    return conform(_assemble(chosen, spec, seed, source, plan)), \
        reasons.select("candidate_id", "reason", F.lit(INTERSECTION).alias("pattern"))


def _assemble(chosen: DataFrame, spec: HoaxSpec, seed: int, source: str, plan: Lazy = LAZY) -> DataFrame:
    first_phrase = fill(mapping_column(spec.bridges, F.col("property")), F.col("subject_label"))
    second_phrase = fill(mapping_column(spec.bridges, F.col("b_property")), F.col("b_subject_label"))
    question = F.replace(F.replace(F.replace(F.lit(spec.intersection_question), F.lit("<T>"), F.col("noun")),
                                   F.lit("<A>"), first_phrase), F.lit("<B>"), second_phrase)
    option = lambda label, role: F.struct(F.lit(0).alias("rank"), F.col(label).alias("option"),  # noqa: E731
                                          F.lit(role).alias("role"))
    statement = mapping_column({r: a.statement for r, a in spec.relations.items()}, F.col("property"))
    premise_statement = fill(statement, F.col("subject_label"), F.col("b_object_label"))
    explanation = F.concat(
        capitalized(first_phrase), F.lit(" is "), F.col("object_label"), F.lit(" ("),
        mapping_column(spec.functional_premises, F.col("property")), F.lit("), and "), second_phrase, F.lit(" is "),
        F.col("b_object_label"), F.lit(" ("), mapping_column(spec.functional_premises, F.col("b_property")),
        F.lit("). It is not true that "), not_true(premise_statement),
        F.lit(". No "), F.col("noun"), F.lit(" is both, so the question has no answer: the only right option is \""),
        F.lit(IDK), F.lit("\"."))
    premise_type = mapping_column({r: a.answer_type for r, a in spec.relations.items()}, F.col("property"))
    topic = mapping_column({r: a.topic for r, a in spec.relations.items()}, F.col("b_property"))
    category = F.coalesce(class_category(F.col("object_types"), spec.categories_by_class),
                          class_category(F.col("subject_types"), spec.categories_by_class),
                          mapping_column(spec.categories_by_relation, F.col("b_property")),
                          mapping_column(spec.categories_by_topic, topic), F.lit(spec.default_category))
    rows = (chosen
            .withColumn("question_id", stable_id(F.lit("hoax"), F.col("candidate_id"), F.col("b_subject_id"),
                                                 F.col("b_property")))
            .withColumn("reasoning_type", F.lit(INTERSECTION)).withColumn("second", F.col("b_property"))
            .withColumn("distractors", F.array(option("b_object_label", "near_miss"), option("object_label", "context"),
                                               option("extra_label", "distractor"))))
    rows = with_idk_dealt(rows, seed, plan)
    hops = F.array(
        F.struct(F.col("subject_id"), F.col("property"), F.col("object_id"), F.lit(None).cast("string").alias("value"),
                 F.col("statement_id"), F.lit(None).cast("string").alias("at")),
        F.struct(F.col("b_subject_id").alias("subject_id"), F.col("b_property").alias("property"),
                 F.col("b_object_id").alias("object_id"), F.lit(None).cast("string").alias("value"),
                 F.col("b_statement_id").alias("statement_id"), F.lit(None).cast("string").alias("at")))
    return rows.select(
        "question_id", F.lit(source).alias("source"),
        F.lit(INTERSECTION).alias("pattern"), question.alias("question"), question.alias("template_question"),
        F.lit(False).alias("reworded"),
        F.transform("ordered", lambda o: o["option"]).alias("options"),
        F.transform("ordered", lambda o: o["role"]).alias("option_roles"),
        "idk_index", F.element_at(F.array(*[F.lit(x) for x in LETTERS]), F.col("idk_index") + 1).alias("idk_letter"),
        F.col("subject_id").alias("premise_subject"), F.col("subject_label").alias("premise_subject_label"),
        F.col("property").alias("premise_property"), F.col("b_object_id").alias("premise_object"),
        F.col("b_object_label").alias("premise_object_label"), premise_statement.alias("premise_statement"),
        F.struct(F.lit(PROOF_FUNCTIONAL).alias("kind"), F.array(F.col("statement_id")).alias("statement_ids"))
        .alias("premise_proof"),
        F.array(F.col("statement_id")).alias("contradicted_statement_ids"), hops.alias("hops"), "subject_id",
        "bridge_id", F.col("b_property").alias("asked_property"), F.col("b_object_label").alias("near_miss"),
        explanation.alias("explanation"), "reasoning_type",
        mapping_column(spec.false_premise_types, premise_type, F.lit("property")).alias("false_premise_type"),
        F.coalesce(answer_type_of(F.col("object_types"), spec), F.lit("common noun")).alias("answer_type"),
        category.alias("category"), "country")
