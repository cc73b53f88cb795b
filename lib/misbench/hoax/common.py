"""What the hoax patterns share: the question row's columns, the proof kind, seeded choices,
configuration tables as columns, names and countries, and how "I do not know" is dealt.
DataFrames in, DataFrames out, no I/O."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from misbench.claims.stage import KEPT, normalized
from misbench.hoax.spec import CONTAINMENT, CONTAINS, COUNTRY, HoaxSpec
from misbench.ids import seeded_hash
from misbench.plans import LAZY, Lazy
from misbench.prompts import OPTION_LETTERS

IDK = "I do not know"
LETTERS = OPTION_LETTERS[:4]  # three answers and "I do not know"
# The proof kind of a premise on a one-value relation whose single current value is another.
PROOF_FUNCTIONAL = "functional: the graph records another value"
# The proof kind of a premise on an open list whose two sides the graph sets apart
# (hoax.yaml's disjoint_premises: two countries on different continents share no border).
PROOF_DISJOINT = "disjoint: the graph gives the two no value in common"
# The proof kind of a premise two people cannot share (married to, a doctoral student of):
# by the graph's dates, one died before the other was born (disjoint_premises via lifespan).
PROOF_LIFESPAN = "lifespan: one died before the other was born"
PROOF = "struct<kind:string,statement_ids:array<string>>"
# The reason of a chain's question left out by hoax.countries.
OUTSIDE_COUNTRIES = "country not among hoax.countries"
# at: the year a hop holds at (a former head of state "in 1994"); null: a current fact.
HOP = "struct<subject_id:string,property:string,object_id:string,value:string,statement_id:string,at:string>"
QUESTION_FIELDS = (
    ("question_id", "string"), ("source", "string"), ("pattern", "string"), ("question", "string"),
    ("template_question", "string"), ("reworded", "boolean"), ("options", "array<string>"),
    ("option_roles", "array<string>"), ("idk_index", "int"), ("idk_letter", "string"),
    ("premise_subject", "string"), ("premise_subject_label", "string"), ("premise_property", "string"),
    ("premise_object", "string"), ("premise_object_label", "string"), ("premise_statement", "string"),
    ("premise_proof", PROOF), ("contradicted_statement_ids", "array<string>"), ("hops", f"array<{HOP}>"), ("subject_id", "string"),
    ("bridge_id", "string"), ("asked_property", "string"), ("near_miss", "string"), ("explanation", "string"),
    ("reasoning_type", "string"), ("false_premise_type", "string"), ("answer_type", "string"),
    ("category", "string"), ("country", "string"),
)
QUESTION_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in QUESTION_FIELDS)


def conform(questions: DataFrame) -> DataFrame:
    """The hoax_questions columns in order and type (imports and the stage write one table)."""
    have = set(questions.columns)
    return questions.select(*[(F.col(name) if name in have else F.lit(None)).cast(kind).alias(name)
                              for name, kind in QUESTION_FIELDS])


# How many part-of steps apart two entities may be and still count as one inside the other
# (a district, its city, its region, its country), and then a country statement.
CONTAINMENT_DEPTH = 3


def containment_links(facts: DataFrame, depth: int = CONTAINMENT_DEPTH) -> DataFrame:
    """a, b: ``a`` lies inside ``b`` by up to ``depth`` part-of statements (CONTAINMENT, in
    any rank or time) and then perhaps a country (P17): Westminster in London, in England, in
    the United Kingdom. Distinct.

    The walk goes upward only (a contains-statement, P150 or P527, read the other way), so
    each step follows the few places a place lies in: never down into a country's regions,
    which would link siblings. The country (P17) only ends a chain: walking through it would
    fan out over every entity of that country."""
    stated = facts.where(F.col("property").isin(list(CONTAINMENT)) & F.col("object_id").isNotNull())
    inside = F.col("property").isin(list(CONTAINS))
    upward = stated.select(F.when(inside, F.col("object_id")).otherwise(F.col("subject_id")).alias("a"),
                           F.when(inside, F.col("subject_id")).otherwise(F.col("object_id")).alias("b"),
                           (F.col("property") == COUNTRY).alias("country")).where(F.col("a") != F.col("b"))
    parts = upward.where(~F.col("country")).select("a", "b").distinct()
    countries = upward.where(F.col("country")).select("a", "b").distinct()
    reached, step = parts, parts
    for _ in range(depth - 1):
        step = step.join(parts.select(F.col("a").alias("b"), F.col("b").alias("next")), "b").select(
            "a", F.col("next").alias("b")).where(F.col("a") != F.col("b")).distinct()
        reached = reached.unionByName(step)
    # then a country, from the entity itself or from any place it lies in
    via_country = reached.join(countries.select(F.col("a").alias("b"), F.col("b").alias("next")), "b").select(
        "a", F.col("next").alias("b"))
    return reached.unionByName(countries).unionByName(via_country).where(F.col("a") != F.col("b")).distinct()


def mapping_column(mapping: dict[str, str], key: Column, default: Column | None = None) -> Column:
    """``mapping[key]`` as a column (a configuration table inlined), else ``default`` (else null)."""
    if not mapping:
        return default if default is not None else F.lit(None).cast("string")
    lookup = F.create_map(*[F.lit(x) for pair in sorted(mapping.items()) for x in pair])
    value = F.element_at(lookup, key)
    return value if default is None else F.coalesce(value, default)


def ambiguous_ids(labels: DataFrame) -> DataFrame:
    """Entities whose label another entity of one of their types also carries (two cities
    called London): a question naming one is ambiguous. Entities of other types may share
    it (London the city and London the novel)."""
    typed = labels.where(F.col("label").isNotNull()).select(
        "id", normalized(F.col("label")).alias("name"),
        F.explode(F.coalesce(F.col("instance_of"), F.array().cast("array<string>"))).alias("type"))
    holders = Window.partitionBy("name", "type")
    return (typed.withColumn("holders", F.approx_count_distinct("id").over(holders))
            .where("holders > 1").select("id").distinct())


def only_values(facts: DataFrame) -> DataFrame:
    """Statements that are the only current value of their (subject, property)."""
    return facts.where((F.col("resolution") == KEPT) & F.col("single"))


def not_true(statement: Column) -> Column:
    """A statement as the clause of "It is not true that ...": without its full stop, and
    "The capital of ..." in lower case."""
    return F.regexp_replace(F.regexp_replace(statement, r"\.$", ""), r"^The ", "the ")


def capitalized(text: Column) -> Column:
    return F.concat(F.upper(F.substring(text, 1, 1)), F.substring(text, 2, 10_000))


def class_category(types: Column, by_class: dict[str, str]) -> Column:
    """The category of the first of ``types`` (instance-of classes) that ``by_class`` maps; null if none."""
    if not by_class:
        return F.lit(None).cast("string")
    mapped = F.transform(F.coalesce(types, F.array().cast("array<string>")), lambda c: mapping_column(by_class, c))
    return F.get(F.filter(mapped, lambda c: c.isNotNull()), 0)  # null where none is mapped


def type_noun(types: Column, spec: HoaxSpec) -> Column:
    """The noun (``type_nouns``) of the first of an entity's classes that has one; null if none."""
    nouns = F.transform(F.coalesce(types, F.array().cast("array<string>")), lambda c: mapping_column(spec.type_nouns, c))
    return F.get(F.filter(nouns, lambda n: n.isNotNull()), 0)


def answer_type_of(types: Column, spec: HoaxSpec) -> Column:
    """The answer type its instance-of classes give an entity (person before location...); null if none."""
    by_class = F.lit(None).cast("string")
    for answer_type in ("number", "event", "location", "person"):  # last assignment wins: person first
        classes = [c for c, t in spec.answer_type_classes.items() if t == answer_type]
        if classes:
            hit = F.arrays_overlap(F.coalesce(types, F.array().cast("array<string>")),
                                   F.array(*[F.lit(c) for c in classes]))
            by_class = F.when(hit, F.lit(answer_type)).otherwise(by_class)
    return by_class


def with_country(rows: DataFrame, facts: DataFrame, labels: DataFrame, spec: HoaxSpec) -> DataFrame:
    """``country`` (its label, else its id, "unknown" where none) and ``country_id`` of each
    question: the subject when it is a country, else the subject's first country relation
    (``spec.country_relations`` in order), else the bridge when it is a country, else the
    bridge's first country relation."""
    unique = only_values(facts).where(F.col("property").isin(spec.country_relations))
    order = F.array_position(F.array(*[F.lit(p) for p in spec.country_relations]), F.col("property"))
    first_country = Window.partitionBy("subject_id").orderBy(order)
    countries = (unique.withColumn("n", F.row_number().over(first_country)).where("n = 1")
                 .join(labels.select(F.col("id").alias("object_id"), F.col("label").alias("country_label")), "object_id")
                 .select("subject_id", F.struct(F.col("object_id").alias("id"), F.col("country_label").alias("label"))
                         .alias("found")))
    is_country = lambda types: F.arrays_overlap(F.coalesce(types, F.array().cast("array<string>")),  # noqa: E731
                                                F.array(*[F.lit(c) for c in spec.country_classes]))
    rows = (rows.join(countries.withColumnRenamed("found", "subject_country"), "subject_id", "left")
            .join(countries.withColumnRenamed("subject_id", "bridge_id").withColumnRenamed("found", "bridge_country"),
                  "bridge_id", "left"))
    itself = lambda id_column, label_column: F.struct(F.col(id_column).alias("id"),  # noqa: E731
                                                      F.col(label_column).alias("label"))
    country = (F.when(is_country(F.col("subject_types")), itself("subject_id", "subject_label"))
               .when(F.col("subject_country").isNotNull(), F.col("subject_country"))
               .when(is_country(F.col("bridge_types")), itself("bridge_id", "bridge_label"))
               .otherwise(F.col("bridge_country")))
    return (rows.withColumn("country_found", country)
            .withColumn("country", F.coalesce(F.col("country_found.label"), F.col("country_found.id"),
                                              F.lit("unknown")))
            .withColumn("country_id", F.col("country_found.id"))
            .drop("country_found", "subject_country", "bridge_country"))


# Questions up to this many get their "I do not know" slot joined as a broadcast (plan permitting).
DEALT_BROADCAST_ROWS = 1_000_000


def with_idk_dealt(rows: DataFrame, seed: int, plan: Lazy = LAZY) -> DataFrame:
    """Adds ``idk_index`` and ``ordered`` (option and role per letter) to rows with
    ``question_id``, ``reasoning_type``, ``second`` and three ``distractors``. "I do not know"
    is dealt round-robin over A-D within each reasoning type and asked relation, from a seeded
    start: every group's positions are balanced to within one. Distractors fill the other
    slots in a seeded order. ``question_id`` must be unique (the slots join back by it)."""
    group = Window.partitionBy("reasoning_type", "second").orderBy(seeded_hash(F.col("question_id"), seed))
    start = F.pmod(seeded_hash(F.col("reasoning_type"), F.col("second"), seed), F.lit(4))
    # Ranked on narrow rows: the groups are few, so the window's sort lands on few tasks;
    # the wide rows join its result.
    dealt = rows.select("question_id", F.pmod(F.row_number().over(group) - 1 + start, F.lit(4)).cast("int")
                        .alias("idk_index"))
    rows = rows.join(plan.broadcast_if_small(dealt, DEALT_BROADCAST_ROWS), "question_id")
    shuffled = F.transform(F.sort_array(F.transform(
        F.col("distractors"), lambda d: F.struct(seeded_hash(F.col("question_id"), d["option"], seed).alias("k"),
                                                 d["option"].alias("option"), d["role"].alias("role")))),
        lambda d: F.struct(d["option"].alias("option"), d["role"].alias("role")))
    idk = F.struct(F.lit(IDK).alias("option"), F.lit("idk").alias("role"))
    ordered = F.concat(F.slice(shuffled, 1, F.col("idk_index")), F.array(idk),
                       F.slice(shuffled, F.col("idk_index") + 1, 3))
    return rows.withColumn("ordered", ordered)
