"""Comparison and intersection questions on tiny frames. Comparisons: a chosen date question paired with another true chain
of the same date relation, in another year and of another bridge; the near miss is the one
first by the graph; without such a partner, or with comparisons off, it stays as it was."""
import dataclasses

import pytest

from misbench.hoax import spec as hoax_spec
from misbench.hoax.stage import COMPARISON, PATTERN, with_comparisons

CHOSEN = ("candidate_id string, chain_id string, is_date boolean, second string, answer_precision int, "
          "bridge_id string, bridge_label string, premise_object string, answer_value string, answer_text string, "
          "description string, question string, "
          "distractors array<struct<rank:int,option:string,role:string>>, premise_hop int")
WALKED = ("chain_id string, subject_id string, subject_label string, first string, role string, bridge_id string, "
          "bridge_label string, first_statement string, second string, second_statement string, is_date boolean, "
          "answer_precision int, answer_value string, answer_text string, at_year int")


def _chain(chain, subject, bridge, second, value, text, first="P22", role="the father of <S>"):
    return (chain, subject, subject, first, role, bridge, bridge + " Name", f"s-{chain}-1", second, f"s-{chain}-2",
            True, 11, value, text, None)


@pytest.fixture(scope="module")
def frames(spark):
    walked = spark.createDataFrame([
        _chain("c1", "Ann", "B1", "P569", "1950-01-02", "2 January 1950"),
        _chain("c2", "Bob", "B2", "P569", "1950-06-01", "1 June 1950"),  # c1's year: the tie would be true
        _chain("c3", "Cy", "B3", "P569", "1940-03-04", "4 March 1940", first="P26", role="the spouse of <S>"),
        _chain("c4", "Dee", "B4", "P570", "1999-01-01", "1 January 1999"),  # alone with its relation: no partner
    ], WALKED)
    distractors = [(1, "1951", "near_miss"), (2, "1952", "distractor"), (3, "1953", "distractor")]
    chosen = spark.createDataFrame([
        ("k1", "c1", True, "P569", 11, "B1", "B1 Name", "Rome", "1950-01-02", "2 January 1950",
         "the father of Ann who was born in Rome", "When was the father of Ann who was born in Rome born?", distractors, 1),
        ("k4", "c4", True, "P570", 11, "B4", "B4 Name", "Rome", "1999-01-01", "1 January 1999",
         "the father of Dee who died in Rome", "When did the father of Dee who died in Rome die?", distractors, 1),
    ], CHOSEN)
    ambiguous = spark.createDataFrame([], "id string")
    return chosen, walked, ambiguous


def test_a_date_question_becomes_a_comparison_with_a_true_chain_of_another_year(spark, frames):
    from misbench.plans import LocalCheckpoints

    spec = dataclasses.replace(hoax_spec.load_spec(), comparison_share=1.0)
    # whatever the seeded order of the pool: c2 shares its year, c1 is itself
    for seed in range(1, 4):
        assert with_comparisons(*frames, spec, seed=seed).where("candidate_id = 'k1'").first().partner_chain == "c3"
    # A stage function is a pure plan: building it runs no Spark job; the job's plan
    # (misbench.plans.LocalCheckpoints) computes the frame it keeps at once, with the same rows.
    context, tracker = spark.sparkContext, spark.sparkContext.statusTracker()
    try:
        context.setJobGroup("lazy-comparisons", "a pure plan")
        lazy = with_comparisons(*frames, spec, seed=5)
        assert tracker.getJobIdsForGroup("lazy-comparisons") == []
        context.setJobGroup("kept-comparisons", "the job's plan")
        kept = with_comparisons(*frames, spec, seed=5, plan=LocalCheckpoints())
        assert tracker.getJobIdsForGroup("kept-comparisons")
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    rows = {r.candidate_id: r for r in lazy.collect()}
    assert sorted(map(str, rows.values())) == sorted(map(str, kept.collect()))
    asked = rows["k1"]
    assert asked.pattern == COMPARISON
    assert "the father of Ann who was born in Rome" in asked.question and "the spouse of Cy" in asked.question
    roles = {d.option: d.role for d in asked.distractors}
    # Cy's spouse was born in 1940, before 1950: the near miss without the premise
    assert roles == {"The spouse of Cy": "near_miss", "The father of Ann who was born in Rome": "distractor",
                     "Both were born in the same year": "distractor"}
    assert asked.near_miss_text == "The spouse of Cy"  # as its option reads
    assert asked.partner_sentence == "The spouse of Cy is B3 Name (born 4 March 1940). "
    # no other chain asks when someone died: the question stays a date question
    alone = rows["k4"]
    assert alone.pattern == PATTERN and alone.question.startswith("When did") and alone.near_miss_text == "1 January 1999"


def test_comparisons_off_leave_every_question_as_it_was(frames):
    spec = dataclasses.replace(hoax_spec.load_spec(), comparison_share=0.0)
    rows = with_comparisons(*frames, spec, seed=5).collect()
    assert {r.pattern for r in rows} == {PATTERN} and all(r.partner_chain is None for r in rows)
    assert {r.question for r in rows} == {r.question for r in frames[0].collect()}



@pytest.mark.slow  # a dozen joins and windows over the graph, planned and run on Spark
def test_an_intersection_joins_two_facts_that_nothing_satisfies_both_of(spark):
    """"Which city is both the place where Ann was born and the capital of France?": never
    two facts whose objects are one, linked by part-of, or where either relation ever gave
    its subject the other's object (in any rank or time): something could then be both. Each
    case has its own noun, so its two facts can only pair with each other."""
    from misbench.claims.stage import resolved_facts
    from misbench.hoax.intersection import INTERSECTION, intersection_questions
    from tests.claims.test_stage import labels, triples

    graph = triples(spark, [
        ("Ann", "P19", "Lyon"), ("FR", "P36", "Paris"),  # two facts: a question
        ("Bob", "P19", "Rome"), ("IT", "P36", "Rome"),  # one object: Rome is both
        ("Cy", "P19", "Milan"), ("Cy", "P19", "Turin", "deprecated"), ("PI", "P36", "Turin"),  # Cy's disputed birthplace
        ("Dee", "P19", "Westminster"), ("Westminster", "P131", "London"), ("UK", "P36", "London"),  # part of
        ("NO", "P36", "Oslo"), ("NO", "P36", "Bergen", {"end": "1299-01-01"}), ("Eve", "P19", "Bergen"),  # a former capital
        ("Gil", "P19", "Brixton"), ("Brixton", "P131", "Lambeth"), ("Lambeth", "P131", "Londres"),  # inside, two steps
        ("GB", "P36", "Londres"),
    ])
    # a noun per case, and an entity of each with no fact, the extra option
    nouns = {"Lyon": "Q515", "Paris": "Q515", "Nice": "Q515", "Rome": "Q7366", "Pisa": "Q7366",
             "Milan": "Q3918", "Turin": "Q3918", "Siena": "Q3918", "Westminster": "Q4830453", "London": "Q4830453",
             "Bath": "Q4830453", "Oslo": "Q11424", "Bergen": "Q11424", "Molde": "Q11424",
             "Brixton": "Q571", "Londres": "Q571", "Leeds": "Q571"}
    names = labels(spark, [(c, c, "a place", [cls]) for c, cls in nouns.items()]
                   + [(p, p, "a person", ["Q5"]) for p in ("Ann", "Bob", "Cy", "Dee", "Eve", "Gil")]
                   + [(c, c, "a country", ["Q6256"]) for c in ("FR", "IT", "PI", "UK", "NO", "GB")])
    spec = dataclasses.replace(hoax_spec.load_spec(), intersection_share=1.0)
    facts = resolved_facts(graph, spec.properties, "2026-01-01")
    from misbench.plans import LocalCheckpoints

    # as the job plans it (a lazy plan of this size takes Spark seconds more to analyse)
    questions, reasons = intersection_questions(facts, names, spec, seed=3, plan=LocalCheckpoints())
    rows = questions.collect()
    # one question from the two facts, asked from one side
    assert [(q.premise_subject, q.premise_property, q.premise_object) for q in rows] in (
        [("Ann", "P19", "Paris")], [("FR", "P36", "Lyon")])
    for q in rows:
        assert q.pattern == q.reasoning_type == INTERSECTION and q.question.startswith("Which city is both ")
        assert q.premise_proof.statement_ids == q.contradicted_statement_ids == [q.hops[0].statement_id]
        assert q.options[q.option_roles.index("near_miss")] == q.near_miss == q.premise_object_label
        assert q.options[q.option_roles.index("context")] == q.hops[0].object_id  # the first fact's object
        assert sorted(q.options) == ["I do not know", "Lyon", "Nice", "Paris"]
    assert rows[0].question in ("Which city is both the place where Ann was born and the capital of FR?",
                                "Which city is both the capital of FR and the place where Ann was born?")
    assert sorted(r.reason for r in reasons.collect()) == [
        "kept"] + ["no second fact of the same type"] * 10 + ["the same two facts asked from the other side"]


def test_a_former_value_is_a_bridge_at_the_middle_year_only_where_no_other_value_could_hold_it(spark):
    """"The head of state of S1 in 1993": a statement that ended, asked at the middle year of its
    period, only where every other statement of the subject and relation has a period that
    leaves the year out; a deprecated one does not count, an undated one or an unknown value
    does; so does a year outside the bridge's life (a birth in the 1950s could be after 1955)."""
    from misbench.claims.stage import resolved_facts
    from misbench.hoax.stage import chains, dated_first_hops, spec_frames
    from tests.claims.test_stage import labels, triples

    graph = triples(spark, [
        ("S1", "P35", "A", {"start": "1990", "end": "1996-05-01"}),  # 1993
        ("S1", "P35", "B", {"start": "1996-05-01", "end": "2004"}),  # 2000
        ("S1", "P35", "C", {"start": "2004"}),  # current
        ("S1", "P35", "X", "deprecated", {"start": "1992", "end": "1994"}),  # ignored
        ("S1", "P35", "A", {"start": "1990-02", "end": "1996"}),  # A's term stated twice: one chain
        ("S2", "P35", "D", {"start": "1980", "end": "1990"}),  # 1985, but E has no start
        ("S2", "P35", "E", {"end": "1985"}),
        ("S3", "P26", "F", {"start": "2000", "end": "2001"}),  # a year apart: no year inside
        ("S4", "P35", "G", {"start": "1970", "end": "1980"}),  # 1975: an unknown value held 1974-1976
        ("S4", "P35", "?", {"start": "1974", "end": "1976"}),
        ("S5", "P35", "H", {"start": "2020", "end": "2030"}),  # not ended
        ("S6", "P17", "I", {"start": "1990", "end": "2000"}),  # not a dated bridge relation
        ("A", "P569", "1940-02-03"), ("C", "P569", "1950-01-01"),
        ("S7", "P26", "J", {"start": "1950", "end": "1960"}), ("J", "P570", "1954"),  # 1955: J was dead
        ("S8", "P26", "K", {"start": "1950", "end": "1960"}), ("K", "P569", "1956"),  # 1955: K not yet born
        ("S9", "P35", "L", {"start": "1900~", "end": "1990"}),  # a century's precision: no year to take
        ("S10", "P26", "M", {"start": "1950", "end": "1960"}), ("M", "P569", "1950", "normal", 8),  # born in the 1950s
        ("S11", "P26", "N", {"start": "1950", "end": "1960"}), ("S11", "P26", "N", {"start": "1980", "end": "1990"}),
    ])
    spec = hoax_spec.load_spec()
    dated = dated_first_hops(graph, spec, "2026-01-01")
    assert sorted((r.subject_id, r.object_id, r.at_year) for r in dated.collect()) == [
        ("S1", "A", 1993), ("S1", "B", 2000), ("S11", "N", 1955)]  # one year per person: the first statement's
    names = labels(spark, [(e, e, "someone", ["Q5"]) for e in ("A", "B", "C")]
                   + [("S1", "Stugro", "a country", ["Q6256"])])
    rows = chains(resolved_facts(graph, spec.properties, "2026-01-01"), names, spec_frames(spark, spec), dated,
                  spec.dated_role).collect()
    assert len(rows) == 2
    walked = {r.bridge_id: r for r in rows}
    assert walked["A"].role == "the head of state of <S> in 1993" and walked["A"].at_year == 1993
    assert walked["C"].role == "the head of state of <S>" and walked["C"].at_year is None
    assert walked["A"].chain_id != walked["C"].chain_id and set(walked) == {"A", "C"}  # B has no second hop


def test_part_of_links_go_upward_through_three_places_then_a_country_never_between_siblings(spark):
    """Westminster in London in England in the UK: linked through every step, a contains
    statement read the other way; two districts of one city are not inside each other, and
    nothing walks down from a country to everything in it."""
    from misbench.claims.stage import resolved_facts
    from misbench.hoax.common import containment_links
    from tests.claims.test_stage import triples

    graph = triples(spark, [
        ("Soho", "P131", "Westminster"), ("Westminster", "P131", "London"), ("England", "P150", "London"),
        ("England", "P361", "UK"), ("Soho", "P17", "UK"), ("Camden", "P131", "London"), ("Camden", "P17", "UK"),
        ("Paris", "P17", "FR"),
    ])
    facts = resolved_facts(graph, hoax_spec.load_spec().properties, "2026-01-01")
    links = {(r.a, r.b) for r in containment_links(facts).collect()}
    assert {("Soho", "Westminster"), ("Soho", "London"), ("Soho", "England"), ("Soho", "UK"),
            ("Westminster", "UK"), ("London", "England"), ("Camden", "England")} <= links
    assert not {("Soho", "Camden"), ("Camden", "Soho"), ("Camden", "Westminster"), ("Paris", "UK"),
                ("UK", "Soho"), ("London", "Soho")} & links
    assert ("Westminster", "Soho") not in links and all(a != b for a, b in links)


def test_a_lifespan_counts_only_dates_a_year_or_finer_on_every_statement_of_its_side(spark):
    """The earliest birth and the latest death, each only where every such statement (not
    deprecated) is a known date of year precision or finer: a decade or an unknown death
    leaves that side null, so no proof rests on it; the life in words names what is known."""
    from misbench.hoax.stage import LIFESPAN, lifespans

    rows = [  # subject, property, value, precision, rank, statement
        ("Q1", "P569", "1815-12-10", 11, "normal", "b1"), ("Q1", "P569", "1816", 9, "normal", "b1x"),
        ("Q1", "P570", "1852-11-27", 11, "normal", "d1"), ("Q1", "P570", "1900", 9, "deprecated", "d1x"),
        ("Q2", "P569", "1950", 8, "normal", "b2"), ("Q2", "P570", "2001", 9, "normal", "d2"),
        ("Q3", "P569", "1912-06-23", 11, "normal", "b3"), ("Q3", "P570", None, None, "normal", "d3"),
    ]
    facts = spark.createDataFrame(rows, "subject_id string, property string, value string, time_precision int, "
                                        "rank string, statement_id string")
    got = {r.subject_id: r for r in lifespans(facts).collect()}
    assert {r.property for r in got.values()} == {LIFESPAN}
    assert (got["Q1"].born, got["Q1"].died) == (1815, 1852)
    assert got["Q1"].value_names == ["born 10 December 1815, died 27 November 1852"]
    assert got["Q1"].value_statements == ["b1", "b1x", "d1"]
    assert (got["Q2"].born, got["Q2"].died) == (None, 2001)  # born in the 1950s: no year to compare
    assert (got["Q3"].born, got["Q3"].died) == (1912, None)  # died at an unknown date
    assert got["Q3"].value_names == ["born 23 June 1912"]
