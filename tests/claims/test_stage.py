"""Claim stage functions on tiny DataFrames."""

import pytest

from misbench.claims import stage
from misbench.claims.relations import Relation, RelationPair
from misbench.plans import Counted, Lazy, LocalCheckpoints

TRIPLE = ("subject_id string, property string, rank string, value_type string, object_id string, "
          "value string, time_precision int, start_time string, end_time string, statement_id string")
LABELS = "id string, label string, description string, instance_of array<string>, aliases array<string>"


def triples(spark, rows):
    """(subject, property, object[, rank[, precision]][, {"start": .., "end": ..}]); an
    object starting with a digit or '-' is a date, "?" an unknown value, "-" no value."""
    full = []
    for i, row in enumerate(rows):
        times = row[-1] if isinstance(row[-1], dict) else {}
        subject, prop, obj, *rest = row[:-1] if times else row
        rank = rest[0] if rest else "normal"
        start, end = times.get("start"), times.get("end")
        if obj in ("?", "-"):
            value_type = "somevalue" if obj == "?" else "novalue"
            full.append((subject, prop, rank, value_type, None, None, None, start, end, f"s{i}"))
        elif obj and (obj[0].isdigit() or obj[0] == "-"):
            full.append((subject, prop, rank, "time", None, obj, rest[1] if len(rest) > 1 else 11,
                         start, end, f"s{i}"))
        else:
            full.append((subject, prop, rank, "wikibase-entityid", obj, None, None, start, end, f"s{i}"))
    return spark.createDataFrame(full, TRIPLE)


def labels(spark, rows):
    """(id, label, description, instance_of[, aliases])."""
    return spark.createDataFrame([tuple(row) + ((None,) if len(row) == 4 else ()) for row in rows], LABELS)


def relation(rid="P17", statement="<S> lies in <O>.", question="Where does <S> lie?", changes=True, multi=False):
    return Relation(rid, statement, question, "country", "Geography", changes, multi)


def resolutions(facts):
    return {(r.subject_id, r.object_id or r.value): r.resolution for r in facts.collect()}


@pytest.mark.slow
def test_one_object_per_subject_and_relation(spark):
    facts = stage.resolved_facts(triples(spark, [
        ("A", "P17", "X"),                                     # single: kept
        ("B", "P17", "X"), ("B", "P17", "Y"),                  # two objects: ambiguous
        ("C", "P17", "X", "preferred"), ("C", "P17", "Y"),     # preferred decides
        ("D", "P17", "X", "deprecated"), ("D", "P17", "Y"),    # deprecated is no fact
        ("E", "P17", "X"), ("E", "P17", "X"),                  # same fact twice
    ]), ["P17"], "2026-01-01")
    got = [(r.subject_id, r.object_id, r.resolution) for r in facts.orderBy("subject_id", "statement_id").collect()]
    assert got == [
        ("A", "X", "kept"),
        ("B", "X", "ambiguous: several objects"), ("B", "Y", "ambiguous: several objects"),
        ("C", "X", "kept"), ("C", "Y", "not the preferred statement"),
        ("D", "X", "deprecated statement"), ("D", "Y", "kept"),
        ("E", "X", "kept"), ("E", "X", "same fact stated twice"),
    ]


@pytest.mark.slow
def test_one_hop_claims_render_labels_literally_and_give_reasons(spark):
    facts = stage.resolved_facts(triples(spark, [
        ("A", "P17", "X"), ("B", "P17", "Y"), ("C", "P17", "C"), ("N", "P17", "X")]), ["P17"], "2026-01-01")
    names = labels(spark, [("A", "Price $1 \\ Co", None, []), ("X", "Land <O>", "a land", ["country"]),
                           ("B", "Bee", None, []), ("C", "Sea", None, []), ("Y", None, None, [])])
    rels = stage.relations_frame(spark, [relation()])
    rows = {r.subject_id: r for r in stage.one_hop_candidates(facts, names, rels).collect()}
    assert rows["A"].statement == "Price $1 \\ Co lies in Land <O>."
    assert rows["A"].question == "Where does Price $1 \\ Co lie?"
    assert rows["A"].candidate_reason == "kept" and rows["A"].topic == "Geography"
    assert rows["B"].candidate_reason == "object has no label"
    assert rows["C"].candidate_reason == "object is the subject"
    assert rows["N"].candidate_reason == "subject has no label"


@pytest.mark.slow
def test_two_hop_chains_with_dates_at_their_precision(spark):
    facts = stage.resolved_facts(triples(spark, [
        ("F", "P57", "D"), ("D", "P569", "1954-08-16", "normal", 11),
        ("G", "P57", "E"), ("E", "P569", "1890", "normal", 9),
        ("H", "P22", "I"), ("I", "P22", "J"),
        ("K", "P22", "L"), ("L", "P22", "M"), ("L", "P22", "O"),   # ambiguous second hop
    ]), ["P57", "P569", "P22"], "2026-01-01")
    names = labels(spark, [(x, f"name {x}", None, []) for x in "FDGEHIJKLMO"])
    pairs = stage.pairs_frame(spark, [
        RelationPair("P57", "P569", "compositional", "The director of <S> was born on <O>.",
                     "When was the director of <S> born?", "date", "Media", False),
        RelationPair("P22", "P22", "inference", "The paternal grandfather of <S> is <O>.",
                     "Who is the paternal grandfather of <S>?", "person", "Family", False),
    ])
    rows = {r.subject_id: r for r in stage.two_hop_candidates(facts, names, pairs).collect()}
    assert rows["F"].statement == "The director of name F was born on 16 August 1954."
    assert rows["F"].object_label == "16 August 1954" and rows["F"].bridge_id == "D"
    assert rows["G"].object_label == "1890"
    assert rows["H"].object_id == "J" and rows["H"].relation_kind == "inference"
    assert rows["H"].question == "Who is the paternal grandfather of name H?"
    assert rows["K"].candidate_reason == "second hop: ambiguous: several objects"


def conflict_world(spark):
    countries = ["X", "Y", "Z", "W", "V"]
    rows = [("A", "P17", "X"), ("B", "P17", "Y"), ("C", "P17", "Z"), ("D", "P17", "W"),
            ("E", "P17", "V"), ("F", "P17", "Q"),
            # A is also (ambiguously) in Y: Y must never replace X for A
            ("A2", "P17", "X")]
    facts = stage.resolved_facts(triples(spark, rows + [("A", "P17", "Y", "normal")]), ["P17"], "2026-01-01")
    names = labels(spark, [(c, f"land {c}", None, ["country"]) for c in countries]
                   + [("Q", "quasar", None, ["galaxy"])]
                   + [(s, f"place {s}", f"about {s}", []) for s in ["A", "A2", "B", "C", "D", "E", "F"]])
    return facts, names


@pytest.mark.slow
def test_conflicts_are_same_type_never_true_and_deterministic(spark):
    facts, names = conflict_world(spark)
    rels = stage.relations_frame(spark, [relation()])
    candidates = stage.one_hop_candidates(facts, names, rels)
    templates = rels.select("relation", "statement")

    def run():
        rows = stage.conflicts(candidates, facts, names, templates, seed=7, reference_date="2026-01-01")
        return sorted(tuple(r) for r in rows.collect())

    first = run()
    assert first == run()
    by_claim = {}
    for row in stage.conflicts(candidates, facts, names, templates, 7, "2026-01-01").collect():
        by_claim.setdefault(row.claim_id, []).append(row)
    truth = {r.claim_id: r for r in candidates.collect()}
    assert len(by_claim) == 5  # B, C, D, E, A2 (A is ambiguous, F's quasar has no peer)
    for claim_id, rows in by_claim.items():
        claim = truth[claim_id]
        assert sorted(r.kind for r in rows) == ["factual", "semantic", "temporal"]
        for r in rows:
            assert r.object_id in {"X", "Y", "Z", "W", "V"} and r.object_id != claim.object_id
            assert r.irrelevant_id not in (r.object_id, claim.object_id, None)
            assert r.statement == f"{claim.subject_label} lies in land {r.object_id}."
            if r.kind == "temporal":
                assert str(r.valid_from) > "2026-01-01" and r.valid_until > r.valid_from
            else:
                assert r.valid_from is None
            assert (r.subject_description is not None) == (r.kind == "semantic")
    # every kind of a claim names the same false object (choice 0 of its substitutes) and the
    # same irrelevant entity (choice 1): one question per claim, as in MisBench
    choices = {}
    for r in stage.substitutes(candidates.where("candidate_reason = 'kept'"), facts, names, seed=7).collect():
        choices.setdefault(r.claim_id, {})[r.choice] = r.candidate_id
    for claim_id, rows in by_claim.items():
        numbered = choices[claim_id]
        assert sorted(numbered) == list(range(len(numbered)))
        assert {(r.object_id, r.irrelevant_id) for r in rows} == {(numbered[0], numbered[1])}
    different_seed = stage.conflicts(candidates, facts, names, templates, 8, "2026-01-01").collect()
    assert sorted(tuple(r) for r in different_seed) != first


@pytest.mark.slow
def test_true_objects_of_the_subject_are_never_substitutes(spark):
    # Subject S has two (ambiguous) countries X and Y plus claim-worthy P17 of T -> X.
    facts = stage.resolved_facts(triples(spark, [
        ("T", "P17", "X"), ("S", "P17", "X"), ("S", "P17", "Y"), ("U", "P17", "Z")]), ["P17"], "2026-01-01")
    names = labels(spark, [(c, c, None, ["country"]) for c in "XYZ"] + [(s, s, None, []) for s in "STU"])
    rels = stage.relations_frame(spark, [relation()])
    candidates = stage.one_hop_candidates(facts, names, rels)
    found = stage.substitutes(candidates.where("candidate_reason = 'kept'"), facts, names, seed=1)
    pairs = {(r.claim_id, r.candidate_id) for r in found.collect()}
    claim_of = {r.subject_id: r.claim_id for r in candidates.where("candidate_reason='kept'").collect()}
    assert {c for k, c in pairs if k == claim_of["T"]} == {"Y", "Z"}
    assert {c for k, c in pairs if k == claim_of["U"]} == {"X", "Y"}


@pytest.mark.slow
def test_stats_add_up_to_the_input(spark):
    facts, names = conflict_world(spark)
    rels = stage.relations_frame(spark, [relation()])
    candidates = stage.one_hop_candidates(facts, names, rels)
    conflict_rows = stage.conflicts(candidates, facts, names, rels.select("relation", "statement"), 7, "2026-01-01")
    claims = stage.claims_with_conflicts(candidates, conflict_rows)
    stats = {r.reason: r.facts for r in stage.claims_stats(candidates, claims).collect()}
    assert stats["kept"] == claims.count() == 5
    assert sum(stats.values()) == facts.count() == 8
    assert stats["fewer than two same-type substitutes"] == 1
    assert stats["ambiguous: several objects"] == 2


@pytest.mark.slow
def test_dates_conflict_with_other_dates(spark):
    facts = stage.resolved_facts(triples(spark, [
        ("F", "P57", "D"), ("D", "P569", "1954-08-16", "normal", 11)]), ["P57", "P569"], "2026-01-01")
    names = labels(spark, [("F", "Film", None, []), ("D", "Dir", None, [])])
    pairs = stage.pairs_frame(spark, [RelationPair(
        "P57", "P569", "compositional", "The director of <S> was born on <O>.",
        "When was the director of <S> born?", "date", "Media", False)])
    candidates = stage.two_hop_candidates(facts, names, pairs)
    rows = stage.conflicts(candidates, facts, names, pairs.select("relation", "statement"), 3, "2026-01-01").collect()
    assert sorted(r.kind for r in rows) == ["factual", "semantic"]  # a birth date never changes
    for r in rows:
        assert r.object_label != "16 August 1954" and r.object_label.endswith(tuple("0123456789"))
        assert r.statement == f"The director of Film was born on {r.object_label}."
        assert r.irrelevant_label not in (r.object_label, "16 August 1954")


def test_changed_conflicts_name_the_slots_whose_texts_no_longer_fit(spark):
    """What a claims rerun invalidates: a conflict with another false object, period or
    description, one that is gone, and the correct texts of a claim whose statement changed."""
    claims_schema = "claim_id string, statement string, object_label string"
    conflict_schema = ("claim_id string, kind string, object_label string, statement string, valid_from date, "
                       "valid_until date, subject_description string")
    import datetime as dt

    day = dt.date(2031, 7, 1)
    old_claims = spark.createDataFrame([("a", "A is in X.", "X"), ("b", "B is in Y.", "Y"), ("c", "C is in Z.", "Z")],
                                       claims_schema)
    new_claims = spark.createDataFrame([("a", "A is in X.", "X"), ("b", "B lies in Y.", "Y")], claims_schema)
    old = spark.createDataFrame([
        ("a", "factual", "W", "A is in W.", None, None, None), ("a", "temporal", "V", "A is in V.", day, day, None),
        ("a", "semantic", "V", "A is in V.", None, None, "a place"), ("b", "factual", "U", "B is in U.", None, None, None),
        ("c", "factual", "T", "C is in T.", None, None, None)], conflict_schema)
    new = spark.createDataFrame([
        ("a", "factual", "W", "A is in W.", None, None, None), ("a", "temporal", "W", "A is in W.", day, day, None),
        ("a", "semantic", "V", "A is in V.", None, None, "a town"), ("b", "factual", "U", "B is in U.", None, None, None),
        ("b", "temporal", "S", "B is in S.", day, day, None), ("d", "factual", "R", "D is in R.", None, None, None)],
        conflict_schema)
    changed = {tuple(r) for r in stage.changed_conflicts(old_claims, old, new_claims, new).collect()}
    # b gained a temporal conflict; d is a new claim (nothing of it was stored)
    assert changed == {("a", "temporal"), ("a", "semantic"), ("b", "correct"), ("b", "temporal"), ("c", "factual"),
                       ("c", "correct")}


def test_next_on_ring_takes_the_next_candidate_up_and_wraps_round(spark):
    import random

    from pyspark.sql import functions as F

    rng = random.Random(3)
    low, high = stage.LOWEST_POINT, -stage.LOWEST_POINT - 1
    pool, probes = [], []
    # rings of 1, 2, 3 and 300 candidates (0, 1, 2 and 9 bucket bits), a candidate listed
    # twice, probes on a candidate's point, at both ends of the hash space and past the top
    for ring, size in (("one", 1), ("two", 2), ("three", 3), ("many", 300)):
        points = sorted(rng.randint(low, high) for _ in range(size))
        pool += [(ring, p, f"{ring}{i}") for i, p in enumerate(points)]
        probes += [(ring, p, f"{ring}-on-{i}") for i, p in enumerate(points)]
        probes += [(ring, rng.randint(low, high), f"{ring}-random-{i}") for i in range(200)]
        probes += [(ring, low, f"{ring}-bottom"), (ring, high, f"{ring}-top"),
                   (ring, points[-1] + 1, f"{ring}-past")]
    pool.append(pool[-1])
    # two candidates at one point (a hash tie): the lower id owns it
    tie = pool[-2][1]
    pool.append(("many", tie, "many-tied"))
    probes.append(("many", tie, "many-on-tie"))
    probes.append(("empty", 5, "no ring"))
    pool_df = spark.createDataFrame(pool, "pool_relation string, point long, candidate_id string") \
        .withColumn("type", F.lit("T"))
    probes_df = spark.createDataFrame(probes, "pool_relation string, point long, probe string") \
        .withColumn("type", F.lit("T"))
    rows = stage.next_on_ring(probes_df, pool_df, ["pool_relation", "type"]).collect()
    got = {r.probe: r.candidate_id for r in rows}
    assert len(rows) == len(got)  # one candidate per probe

    def expected(ring, point):
        members = sorted((p, c) for r, p, c in set(pool) if r == ring)
        above = [c for p, c in members if p >= point]
        return above[0] if above else members[0][1]

    assert got == {probe: expected(ring, point) for ring, point, probe in probes if ring != "empty"}
    assert got["two-past"] == "two0" and got["many-top"] == "many0"
    # as hoax and claims run it (rings and arcs counted, then broadcast), and joined by sorting
    # both sides, as a pool too large to broadcast is
    for plan in (LocalCheckpoints(), Counted()):
        placed = stage.next_on_ring(probes_df, pool_df, ["pool_relation", "type"], plan)
        assert {r.probe: r.candidate_id for r in placed.collect()} == got
    threshold = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        sorted_join = stage.next_on_ring(probes_df, pool_df, ["pool_relation", "type"])
        assert "SortMergeJoin" in sorted_join._jdf.queryExecution().executedPlan().toString()
        assert sorted(tuple(r) for r in sorted_join.collect()) == sorted(tuple(r) for r in rows)
    finally:
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", threshold)


def test_a_frame_is_broadcast_only_when_counted_small(spark):
    frame = spark.range(3)

    def hinted(plan, limit):
        kept = plan.broadcast_if_small(frame, limit)
        return "broadcast" in kept._jdf.queryExecution().logical().toString().lower(), kept.count()

    assert hinted(LocalCheckpoints(), 3) == (True, 3)
    assert hinted(LocalCheckpoints(), 2) == (False, 3)
    assert hinted(Counted(), 3) == (True, 3)  # claims': counted, not checkpointed
    assert hinted(Counted(), 2) == (False, 3)
    assert hinted(Lazy(), 10) == (False, 3)  # the stage functions' default leaves it to Spark
