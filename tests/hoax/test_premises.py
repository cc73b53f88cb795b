"""Premise proofs on a tiny graph: a premise is kept only where the graph proves it false (a
one-value relation whose single current value is another), never from a missing statement on
an open list."""
import pytest

pytestmark = pytest.mark.slow  # premises() runs two substitute searches on Spark

from misbench.claims.stage import resolved_facts
from misbench.config import ConfigError
from misbench.hoax import spec as hoax_spec
from misbench.hoax.stage import PROOF_DISJOINT, PROOF_FUNCTIONAL, premises, spec_frames
from misbench.plans import LocalCheckpoints  # as the job runs it
from pyspark.sql import functions as F

from tests.claims.test_stage import labels, triples

COUNTRY, PERSON = ["Q6256"], ["Q5"]


@pytest.fixture(scope="module")
def proved(spark):
    spec = hoax_spec.load_spec()
    graph = triples(spark, [
        ("UK", "P35", "Charles"), ("FR", "P35", "Macron"), ("DE", "P35", "Steinmeier"), ("BE", "P35", "Philippe"),
        # open list: the United Kingdom's recorded neighbours, Belgium not among them
        ("UK", "P47", "FR"), ("UK", "P47", "IE"), ("FR", "P47", "BE"), ("FR", "P47", "DE"), ("DE", "P47", "BE"),
        # two current heads of government recorded: a one-value relation without one value
        ("BE", "P6", "De Croo"), ("BE", "P6", "Michel"), ("FR", "P6", "Barnier"),
        # a former head of government ended: the current one is the single value
        ("DE", "P6", "Merkel", {"end": "2021-12-08"}), ("DE", "P6", "Scholz"),
        # the only capital in the graph, outside the dump (no label, no class); Westminster lies in it
        ("UK", "P36", "London"), ("Westminster", "P131", "London"),
        # continents (hoax.yaml's disjoint_premises): France spans two; Germany records none
        ("UK", "P30", "Europe"), ("IE", "P30", "Europe"), ("BE", "P30", "Europe"), ("FR", "P30", "Europe"),
        ("FR", "P30", "Africa"), ("DZ", "P30", "Africa"), ("MA", "P30", "Africa"),
        ("DZ", "P47", "MA"), ("MA", "P47", "DZ"),
    ])
    names = labels(spark, [(c, c, "a country", COUNTRY) for c in ("UK", "FR", "DE", "BE", "IE", "DZ", "MA")]
                   + [("Europe", "Europe", "a continent", ["Q5107"])]
                   + [(p, p, "a person", PERSON) for p in
                      ("Charles", "Macron", "Steinmeier", "Philippe", "De Croo", "Michel", "Barnier", "Merkel",
                       "Scholz")]
                   + [("Rome", "Rome", "a city", ["Q515"]), ("Westminster", "Westminster", "a city", ["Q515"])])
    # checkpointed as hoax_questions does: premises() joins them a dozen times
    facts = resolved_facts(graph, spec.properties, "2026-01-01").localCheckpoint()
    names = names.localCheckpoint()
    bridges = spark.createDataFrame([(b,) for b in ("UK", "FR", "DE", "BE")], "bridge_id string")
    rows = premises(facts, names, spec_frames(spark, spec), bridges, spec, seed=7, attempts=16,
                    plan=LocalCheckpoints()).collect()
    statement = {(r.subject_id, r.property, r.object_id): r.statement_id for r in graph.collect()}
    objects = {}
    for r in rows:
        objects.setdefault((r.bridge_id, r.premise_property), set()).add(r.premise_object)
    return {(r.bridge_id, r.premise_property): r for r in rows}, statement, objects


def test_a_one_value_relation_with_its_single_current_value_proves_the_premise_false(proved):
    rows, statement, _ = proved
    uk = rows[("UK", "P35")]
    assert uk.premise_reason is None and uk.premise_object in {"Macron", "Steinmeier", "Philippe"}
    assert uk.premise_proof.kind == PROOF_FUNCTIONAL
    assert uk.premise_proof.statement_ids == [statement[("UK", "P35", "Charles")]] == uk.contradicted_statement_ids
    # an ended value does not count: Scholz is the one current head of government
    germany = rows[("DE", "P6")]
    assert germany.premise_proof.statement_ids == [statement[("DE", "P6", "Scholz")]]


def test_a_true_value_outside_the_dump_takes_its_relations_class_and_no_part_of_it_is_false(proved):
    """London has no class in the graph: it takes P36's (a city); no other capital is recorded,
    so the false object is any named city, never Westminster, which lies in London."""
    rows, statement, objects = proved
    capital = rows[("UK", "P36")]
    assert capital.premise_proof.statement_ids == [statement[("UK", "P36", "London")]]
    assert objects[("UK", "P36")] == {"Rome"} and capital.premise_object_label == "Rome"


def test_an_open_list_or_several_current_values_prove_nothing(proved):
    rows, _, _ = proved
    borders = rows[("DE", "P47")]  # "shares a border with Belgium": not listed, yet not disproven
    assert borders.premise_proof is None and borders.premise_object is None
    assert borders.premise_reason.startswith("no proof: the relation is an open list")
    belgium = rows[("BE", "P6")]
    assert belgium.premise_proof is None and belgium.premise_reason == "no proof: the graph records no single current value"


def test_countries_on_different_continents_prove_a_border_false(proved):
    """The United Kingdom (Europe) does not border Algeria or Morocco (Africa): proven by the
    continents, each false object with its own statements; Belgium and Ireland share its
    continent and prove nothing. France lies in Europe and Africa: no country is set apart."""
    rows, statement, objects = proved
    assert objects[("UK", "P47")] == {"DZ", "MA"}
    uk = rows[("UK", "P47")]
    assert uk.premise_reason is None and uk.premise_proof.kind == PROOF_DISJOINT
    assert uk.premise_proof.statement_ids == sorted([statement[("UK", "P30", "Europe")],
                                                     statement[(uk.premise_object, "P30", "Africa")]])
    assert uk.bridge_value_names == ["Europe"] and uk.object_value_names == ["Africa (no label in this dump)"]
    france = rows[("FR", "P47")]
    assert france.premise_proof is None and france.premise_object is None
    assert france.premise_reason == "no false object that the graph sets apart from the bridge"
    # a one-value relation still keeps its first three false objects, whatever more the borders search
    assert len(objects[("UK", "P35")]) <= 3


def test_a_fallback_false_object_holds_the_relations_role(spark):
    """The only current head of government in the graph is the United Kingdom's: no other
    value of P6 fits, so the false object comes from the named persons, and for P6 only from
    those who are politicians or have held an office (hoax.premise_object_roles), not the
    composer or the encyclopedist; never the United Kingdom's former head of government, a
    politician whose premise would be true once."""
    spec = hoax_spec.load_spec()
    graph = triples(spark, [
        ("UK", "P6", "Sunak"), ("UK", "P6", "Johnson", {"end": "2022-09-06"}), ("Johnson", "P106", "Q82955"),
        ("Beethoven", "P106", "Q36834"), ("Washington", "P106", "Q82955"),
        ("Pinera", "P39", "President of Chile"), ("Pinera", "P106", "Q36834"),
    ])
    people = ("Sunak", "Johnson", "Beethoven", "Washington", "Pinera", "Sanger")
    names = labels(spark, [("UK", "UK", "a country", COUNTRY)] + [(p, p, "a person", PERSON) for p in people])
    facts = resolved_facts(graph, spec.properties, "2026-01-01").localCheckpoint()
    bridges = spark.createDataFrame([("UK",)], "bridge_id string")
    rows = premises(facts, names.localCheckpoint(), spec_frames(spark, spec), bridges, spec, seed=7,
                    attempts=16, plan=LocalCheckpoints()).where("premise_property = 'P6'").collect()
    assert rows and all(r.premise_proof.kind == PROOF_FUNCTIONAL for r in rows)
    assert {r.premise_object for r in rows} == {"Washington", "Pinera"}


def _spec_edited(tmp_path, section: str, added: str) -> None:
    """load_spec of conf/hoax.yaml with ``added`` as the first entry of ``section`` (appended
    when ``section`` is None)."""
    spec = (hoax_spec.conf_dir() / "hoax.yaml").read_text()
    bad = tmp_path / "hoax.yaml"
    bad.write_text(spec + added if section is None else spec.replace(f"{section}:\n", f"{section}:\n{added}"))
    hoax_spec.load_spec(bad)


@pytest.mark.parametrize("section, added, error", [
    ("functional_premises", "  P131: one region\n", "functional premise P131 is no premise relation"),
    ("functional_premises", "  P106: one occupation\n", "functional premise P106 usually has several values"),
    (None, "\nmin_known_values: 2\n", "min_known_values is gone"),
    ("premise_words", "  P131: [located]\n", "premise_words: P131 is no premise relation"),
    ("premise_words", "  P37: []\n", "premise_words: P37 needs a list of words"),
    ("premise_words", "  P37: language\n", "premise_words: P37 needs a list of words"),
    ("premise_words", "  P37: [tongue]\n", "premise_words: P37 lists none of the words of its clause"),
    ("  by_class", "    geography: [Q11424]\n", "categories.by_class: Q11424 is under both 'geography' and "
                                               "'entertainment'"),
    ("  by_class", "    cooking: [Q2095]\n", "category 'cooking' is not one of the paper's ten"),
    ("premise_object_roles", "  P47: {P106: []}\n", "premise_object_roles: P47 is no functional premise relation"),
    ("premise_object_roles", "  P19: {P106: Q5}\n", "premise_object_roles: P19.P106 needs a list of item ids"),
    ("premise_object_roles", "  P19: {Pfoo: []}\n", "premise_object_roles: P19.Pfoo is no property id"),
    ("premise_object_roles", "  P19: {P106: ''}\n", "premise_object_roles: P19.P106 needs a list of item ids"),
    ("  by_class", "    geography: Q515\n", "categories.by_class: geography needs a list of class ids"),
    ("  questions", "    P19: {question: 'Who first, <A> or <B>?', tie: Both, dated: 'born <O>'}\n",
     "comparisons.questions: P19 is not one of date_questions"),
    (None, "\ncomparisons: {share: 0.5, questions: {P569: {question: 'Who first?', tie: Both, dated: 'born <O>'}}}\n",
     "P569 needs <A> and <B> in its question"),
    (None, "\ncomparisons: {share: 0.5, questions: {P569: {question: 'Who first, <A> or <B>?'}}}\n",
     "P569 needs question, tie and dated texts"),
    (None, "\ncomparisons: {share: 2, questions: {}}\n", "comparisons.share must be a number from 0 to 1"),
    (None, "\nintersections: {share: 0.5, question: 'Which <T> is <A>?'}\n", "intersections needs a question with <T>"),
    (None, "\nintersections: {share: -1, question: 'Which <T> is both <A> and <B>?'}\n",
     "intersections.share must be a number from 0 to 1"),
    ("disjoint_premises", "  P35: {via: P30, explanation: '<S> <O> <A> <B>'}\n",
     "disjoint_premises: P35 is a functional premise already"),
    ("disjoint_premises", "  P131: {via: P30, explanation: '<S> <O> <A> <B>'}\n",
     "disjoint_premises: P131 is no premise relation"),
    ("disjoint_premises", "  P37: {via: continent, explanation: '<S> <O> <A> <B>'}\n",
     "disjoint_premises: P37 needs via, a property id such as P30, or lifespan"),
    (None, "\nsecond_hop: {question: 'Which <T> is <A>?'}\n", "second_hop needs a question with <T>, <C> and <A>"),
    ("disjoint_premises", "  P37: {via: P30, explanation: 'set apart'}\n",
     "disjoint_premises: P37 needs an explanation with <S>, <O>, <A> and <B>"),
])
def test_a_premise_setting_that_proves_or_checks_nothing_is_a_config_error(tmp_path, section, added, error):
    with pytest.raises(ConfigError, match=error):
        _spec_edited(tmp_path, section, added)


def test_a_rewording_keeps_one_of_the_premise_relations_words():
    """hoax.yaml's words where it lists them, else the clause's own words."""
    words = hoax_spec.load_spec().premise_words
    assert "land border" in words["P47"] and "border" not in words["P47"] and "capital" in words["P36"]
    assert words["P37"] == ["official", "language"]  # from "whose official language is <O>"
    assert "P131" not in words  # never a premise


def test_a_relation_word_counts_as_often_as_the_question_says_it(spark):
    """The rewording check counts whole words: a question asking "born" of a man "who was born
    in Lyon" says it twice, and a rewording that keeps one has dropped the premise's."""
    from pyspark.sql import functions as F

    from misbench.claims.stage import word_count

    rows = spark.createDataFrame([("When was the man who was born in Lyon born?", "born"),
                                  ("When was the man near Lyon born?", "born"),
                                  ("Which head of government, who is the Head-of-Government?", "head of government"),
                                  ("An unborn reborn child", "born")], "text string, word string")
    assert [r[0] for r in rows.select(word_count(F.col("text"), F.col("word"))).collect()] == [2, 1, 2, 0]


def test_a_category_comes_from_the_answers_class_then_the_subjects_then_the_relation(spark):
    """A dish or a wine is food whatever the relation asks; a film subject makes the question
    entertainment (its relation's topic would say history); the answer's class comes before
    the subject's; with no mapped class the relation (P569: history) and its topic decide."""
    from misbench.hoax.stage import _labels

    spec = hoax_spec.load_spec()
    rows = spark.createDataFrame([
        ("q1", ["Q282"], ["Q5"], "P17", "Geography", "country", False),     # the answer is a wine
        ("q2", ["Q5"], ["Q11424"], "P57", "Career", "person", False),        # a film's director
        ("q5", ["Q282"], ["Q11424"], "P495", "Geography", "country", False),  # the answer before the subject
        ("q3", None, ["Q5"], "P569", "Identity", "date", True),              # no class: the relation
        ("q4", ["Q6256"], ["Q5"], "P27", "Identity", "country", False),      # no class: the topic
    ], "candidate_id string, answer_types array<string>, subject_types array<string>, second string, "
       "second_topic string, second_answer_type string, is_date boolean").withColumn(
        "first_topic", F.lit("Family")).withColumn("premise_answer_type", F.lit("person")) \
        .withColumn("at_year", F.lit(None).cast("int"))
    got = {r.candidate_id: r.category for r in _labels(rows, spec).collect()}
    assert got == {"q1": "food", "q2": "entertainment", "q3": "history", "q4": "geography", "q5": "food"}
