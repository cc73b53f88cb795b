"""Every claim means what it says: current and single facts, false options false by meaning,
conflicts that make sense. Hand-made entities, one rule per test."""
import pytest

from misbench.claims import stage
from misbench.claims.relations import RelationPair, load_pairs, load_relations
from misbench.config import ConfigError
from tests.claims.test_stage import labels, relation, resolutions, triples

REFERENCE = "2026-01-01"


def kept_claims(spark, rows, names, rel=None, links=None, seed=5):
    facts = stage.resolved_facts(triples(spark, rows), [(rel or relation()).relation], REFERENCE)
    rels = stage.relations_frame(spark, [rel or relation()])
    candidates = stage.one_hop_candidates(facts, names, rels)
    conflict_rows = stage.conflicts(candidates, facts, names, rels.select("relation", "statement"), seed,
                                    REFERENCE, links=links)
    return candidates, conflict_rows, stage.claims_with_conflicts(candidates, conflict_rows)


@pytest.mark.slow
def test_ended_and_future_statements_are_not_current_facts(spark):
    facts = stage.resolved_facts(triples(spark, [
        ("A", "P26", "X", {"end": "2010-05-01"}), ("A", "P26", "Y"),        # divorced X, married to Y
        ("B", "P36", "Z", {"start": "2030"}),                                # a capital to come
        ("C", "P26", "W", {"end": "somevalue"}),                             # ended, date unknown
        ("D", "P26", "V", {"start": "1990", "end": "2027"}),                 # still current
        ("E", "P36", "U", {"end": "2026"}), ("E", "P36", "T", {"start": "2026"}),  # moved this year
    ]), ["P26", "P36"], REFERENCE)
    got = resolutions(facts)
    assert got[("A", "X")] == "ended before the reference date" and got[("A", "Y")] == "kept"
    assert got[("B", "Z")] == "starts after the reference date"
    assert got[("C", "W")] == "ended before the reference date"
    assert got[("D", "V")] == "kept"
    assert got[("E", "U")] == "ended before the reference date" and got[("E", "T")] == "kept"


@pytest.mark.slow
def test_an_ended_or_deprecated_copy_of_the_current_fact_does_not_hide_it(spark):
    facts = stage.resolved_facts(triples(spark, [
        ("A", "P26", "X", "deprecated"), ("A", "P26", "X"),                       # s0, s1
        ("B", "P36", "Y", {"end": "2001"}), ("B", "P36", "Y", {"start": "2010"}),  # s2, s3: capital again
        ("C", "P36", "Z", "preferred", {"end": "2001"}), ("C", "P36", "Z", "preferred"),  # s4, s5
        ("C", "P36", "W"),                                                         # s6
        ("D", "P26", "V"), ("D", "P26", "V"),                                      # s7, s8: a true copy
        ("E", "P26", "U", {"start": "2030"}), ("E", "P26", "U"),                   # s9, s10: a copy to come
    ]), ["P26", "P36"], REFERENCE)
    rows = facts.collect()
    got = {r.statement_id: r.resolution for r in rows}
    kept = [r.subject_id for r in rows if r.resolution == "kept"]
    assert sorted(kept) == ["A", "B", "C", "D", "E"]  # one current fact each, never two
    assert got["s0"] == "deprecated statement" and got["s1"] == "kept"
    assert got["s2"] == "ended before the reference date" and got["s3"] == "kept"
    assert got["s4"] == "ended before the reference date" and got["s5"] == "kept"
    assert got["s6"] == "not the preferred statement"
    assert sorted((got["s7"], got["s8"])) == ["kept", "same fact stated twice"]
    assert got["s9"] == "starts after the reference date" and got["s10"] == "kept"


@pytest.mark.slow
def test_unknown_or_no_value_makes_a_relation_ambiguous(spark):
    facts = stage.resolved_facts(triples(spark, [
        ("A", "P26", "X"), ("A", "P26", "?"),     # one known spouse and an unknown one
        ("B", "P40", "-"), ("B", "P40", "Y"),     # "no value" beside a value: contradictory
        ("C", "P26", "Z"), ("C", "P26", "?", "deprecated"),
    ]), ["P26", "P40"], REFERENCE)
    got = {(r.subject_id, r.object_id): r.resolution for r in facts.collect()}
    assert got[("A", "X")] == "ambiguous: an unknown or no value is stated too"
    assert got[("A", None)] == "unknown or no value"
    assert got[("B", "Y")] == "ambiguous: an unknown or no value is stated too"
    assert got[("C", "Z")] == "kept"


@pytest.mark.slow
def test_dates_are_written_at_decade_century_and_millennium_precision(spark):
    rows = [("1950", 8), ("1955", 8), ("1850", 7), ("1900", 7), ("1901", 7), ("2001", 7),
            ("1500", 6), ("-0450", 7), ("1890", 9), ("1954-08", 10), ("1954-08-16", 11)]
    frame = spark.createDataFrame(rows, "value string, precision int")
    from pyspark.sql import functions as F

    got = [r.text for r in frame.select(stage.date_text(F.col("value"), F.col("precision")).alias("text")).collect()]
    assert got == ["the 1950s", "the 1950s", "the 19th century", "the 19th century", "the 20th century",
                   "the 21st century", "the 2nd millennium", "the 5th century BCE", "1890", "August 1954",
                   "16 August 1954"]


def _date_claim_conflicts(spark, born, died, precision, second="P570"):
    facts = stage.resolved_facts(triples(spark, [
        ("F", "P57", "D"), ("D", "P569", born, "normal", precision), ("D", "P570", died, "normal", precision),
    ]), ["P57", "P569", "P570"], REFERENCE)
    names = labels(spark, [("F", "Film", None, []), ("D", "Dir", None, [])])
    pairs = stage.pairs_frame(spark, [RelationPair(
        "P57", second, "compositional", "The director of <S> died in <O>.", "When did the director of <S> die?",
        "date", "Media", False)])
    candidates = stage.two_hop_candidates(facts, names, pairs)
    return stage.conflicts(candidates, facts, names, pairs.select("relation", "statement"), 11, REFERENCE).collect()


@pytest.mark.slow
def test_shifted_dates_leave_the_precision_window_and_stay_plausible(spark):
    rows = _date_claim_conflicts(spark, "1980", "2020", 9)
    assert rows
    for row in rows:
        for label in (row.object_label, row.irrelevant_label):
            assert 1980 < int(label) < 2026 and label != "2020"  # after the birth, before today
    decades = _date_claim_conflicts(spark, "1900", "1950", 8)
    assert decades
    for row in decades:
        for label in (row.object_label, row.irrelevant_label):
            assert label.startswith("the ") and label.endswith("0s") and label != "the 1950s"
            assert 1900 < int(label[4:8]) < 2026


@pytest.mark.slow
def test_a_bridge_chosen_by_rank_among_several_is_not_a_single_chain(spark):
    facts = stage.resolved_facts(triples(spark, [
        ("H", "P22", "I", "preferred"), ("H", "P22", "K"), ("I", "P22", "J"), ("K", "P22", "L"),
        ("M", "P22", "N"), ("N", "P22", "O"),
    ]), ["P22"], REFERENCE)
    names = labels(spark, [(x, f"name {x}", None, []) for x in "HIJKLMNO"])
    pairs = stage.pairs_frame(spark, [RelationPair(
        "P22", "P22", "inference", "The paternal grandfather of <S> is <O>.",
        "Who is the paternal grandfather of <S>?", "person", "Family", False)])
    rows = {}
    for r in stage.two_hop_candidates(facts, names, pairs).collect():
        rows.setdefault(r.subject_id, {})[r.bridge_id] = r.candidate_reason
    assert rows["H"] == {"I": "first hop: several bridges, one preferred",
                         "K": "first hop: not the preferred statement"}
    assert rows["M"] == {"N": "kept"}


def test_sibling_in_law_chains_are_not_configured():
    relations, topics = load_relations()
    assert "P3373/P26" not in {pair.relation for pair in load_pairs(topics)}


def albums(spark):
    """Four albums in a series: each follows the one before; the pool of P155 objects holds
    the subjects themselves."""
    names = labels(spark, [(a, f"Album {a}", None, ["album"]) for a in "ABCD"])
    rows = [("B", "P155", "A"), ("C", "P155", "B"), ("D", "P155", "C")]
    return rows, names


@pytest.mark.slow
def test_a_subject_is_never_its_own_substitute(spark):
    rows, names = albums(spark)
    rel = relation("P155", "<S> comes right after <O>.", "What comes right before <S>?", False)
    candidates, conflict_rows, _ = kept_claims(spark, rows, names, rel)
    subject = {r.claim_id: r.subject_id for r in candidates.collect()}
    assert conflict_rows.count() > 0
    for row in conflict_rows.collect():
        assert subject[row.claim_id] not in (row.object_id, row.irrelevant_id)


@pytest.mark.slow
def test_substitutes_never_share_a_name_with_the_answer_or_each_other(spark):
    countries = [("X", "United Kingdom", None, ["country"], ["UK", "Britain"]),
                 ("Y", "U.K.", None, ["country"], []),                 # an alias of X, punctuated
                 ("Z", "united-kingdom", None, ["country"], []),       # X's label, other spelling
                 ("W", "Ünited Kingdom", None, ["country"], []),       # with an accent
                 ("G", "Great Land", None, ["country"], ["Britain"]),  # shares an alias with X
                 ("P1", "Paris", None, ["country"], []), ("P2", "Paris", None, ["country"], []),
                 ("V", "Vale", None, ["country"], [])]
    places = [(p, f"place {p}", None, []) for p in ("S", "T1", "T2", "T3", "T4", "T5", "T6", "T7")]
    rows = [("S", "P17", "X")] + [(f"T{i}", "P17", c) for i, c in enumerate(["Y", "Z", "W", "G", "P1", "P2", "V"], 1)]
    names = labels(spark, countries + places)
    candidates, conflict_rows, _ = kept_claims(spark, rows, names)
    claim = {r.subject_id: r.claim_id for r in candidates.collect()}["S"]
    options = [r for r in conflict_rows.collect() if r.claim_id == claim]
    assert options, "S should keep a claim: P1 or P2, and V remain"
    for row in options:
        assert row.object_id in ("P1", "P2", "V") and row.irrelevant_id in ("P1", "P2", "V")
        assert row.object_label != row.irrelevant_label  # never "Paris" and "Paris"


@pytest.mark.slow
def test_substitutes_are_never_linked_to_the_answer(spark):
    names = labels(spark, [(c, f"city {c}", None, ["city"]) for c in "XLMNV"]
                   + [(p, f"place {p}", None, []) for p in ("S", "T1", "T2", "T3", "T4")])
    rows = [("S", "P36", "X"), ("T1", "P36", "L"), ("T2", "P36", "M"), ("T3", "P36", "N"), ("T4", "P36", "V")]
    links = spark.createDataFrame([("L", "X"), ("X", "M"), ("N", "X")], "a string, b string")  # P131, P361, ...
    rel = relation("P36", "The capital of <S> is <O>.", "What is the capital of <S>?")
    candidates, conflict_rows, _ = kept_claims(spark, rows, names, rel, links=links)
    claim = {r.subject_id: r.claim_id for r in candidates.collect()}["S"]
    chosen = {(r.object_id, r.irrelevant_id) for r in conflict_rows.collect() if r.claim_id == claim}
    assert all(not ({o, i} & {"L", "M", "N"}) for o, i in chosen)


@pytest.mark.slow
def test_a_question_that_names_its_answer_is_not_kept(spark):
    names = labels(spark, [("S", "Borduria National Museum", None, []), ("X", "Borduria", None, ["country"]),
                           ("T", "Plain Museum", None, []), ("Y", "Syldavia", None, ["country"])])
    rel = relation("P17", "<S> lies in the country of <O>.", "In which country does <S> lie?")
    facts = stage.resolved_facts(triples(spark, [("S", "P17", "X"), ("T", "P17", "Y")]), ["P17"], REFERENCE)
    rows = {r.subject_id: r.candidate_reason
            for r in stage.one_hop_candidates(facts, names, stage.relations_frame(spark, [rel])).collect()}
    assert rows == {"S": "question contains its answer", "T": "kept"}


@pytest.mark.slow
def test_temporal_conflicts_only_for_relations_that_change(spark):
    names = labels(spark, [(c, f"land {c}", None, ["country"]) for c in "XYZWV"]
                   + [(p, f"place {p}", None, []) for p in "ABCDE"])
    rows = [("A", "P17", "X"), ("B", "P17", "Y"), ("C", "P17", "Z"), ("D", "P17", "W"), ("E", "P17", "V")]
    for changes, kinds in ((True, ["factual", "semantic", "temporal"]), (False, ["factual", "semantic"])):
        _, conflict_rows, claims = kept_claims(spark, rows, names, relation(changes=changes, multi=not changes))
        per_claim = {}
        for row in conflict_rows.collect():
            per_claim.setdefault(row.claim_id, []).append(row.kind)
        assert per_claim and all(sorted(k) == kinds for k in per_claim.values())
        assert claims.count() == len(per_claim)
        assert {(r.changes_over_time, r.multi_valued) for r in claims.collect()} == {(changes, not changes)}


def test_relation_flags_are_configured_and_checked(tmp_path):
    relations, topics = load_relations()
    by_id = {r.relation: r for r in relations}
    # one rule: a state that lasts a period and can be followed by another changes; what is
    # settled once (creation, birth, death, parentage, children, awards, degrees, wins) does not
    for settled in ("P19", "P20", "P22", "P25", "P50", "P86", "P57", "P161", "P495", "P166", "P184", "P512",
                    "P2522", "P1344", "P40", "P3373"):
        assert by_id[settled].changes_over_time is False, settled
    for changing in ("P17", "P36", "P6", "P35", "P26", "P108", "P54", "P2632",
                     "P69"):  # P69: the paper's temporal example
        assert by_id[changing].changes_over_time is True, changing
    pairs = {(p.first, p.second): p for p in load_pairs(topics)}
    for (first, last), pair in pairs.items():  # a chain ending in a lasting state; the in-laws
        if last in ("P27", "P26", "P108", "P69") or (first, last) in {("P26", "P22"), ("P26", "P25")}:
            assert pair.changes_over_time is True, (first, last)
    for (first, last), pair in pairs.items():
        if last in ("P569", "P570", "P19", "P20", "P166") or (first, last) in {("P22", "P22"), ("P40", "P40")}:
            assert pair.changes_over_time is False, (first, last)
    for many in ("P161", "P166", "P463", "P710", "P3373", "P40"):
        assert by_id[many].multi_valued is True, many
    assert by_id["P36"].multi_valued is False
    bad = tmp_path / "relations.yaml"
    bad.write_text("topics: [Geography]\nrelations:\n  P17: {statement: '<S> in <O>.', question: 'Where is <S>?', "
                   "answer_type: country, topic: Geography}\n")
    with pytest.raises(ConfigError, match="P17: changes_over_time"):
        load_relations(bad)


def test_templates_read_right_for_how_the_properties_are_used():
    by_id = {r.relation: r for r in load_relations()[0]}
    assert "election" in by_id["P541"].statement and "ran for" not in by_id["P541"].statement
    assert "season of <O>" in by_id["P3450"].statement
    assert "took place" not in by_id["P2348"].statement
    assert " a <O>" not in by_id["P106"].statement


def test_a_pair_is_multi_valued_when_either_hop_is():
    relations, topics = load_relations()
    pairs = {p.relation: p for p in load_pairs(topics, relations=relations)}
    assert pairs["P57/P166"].multi_valued  # awards received
    assert pairs["P57/P569"].multi_valued  # several directors, several birth dates
    assert not pairs["P22/P22"].multi_valued


@pytest.mark.slow
def test_a_substitute_whose_name_contains_the_answer_is_not_false_enough(spark):
    names = labels(spark, [("X", "Republic of the Congo", None, ["country"]),
                           ("Y", "Democratic Republic of the Congo", None, ["country"]),
                           ("Z", "Congo", None, ["country"]), ("V", "Vale", None, ["country"]),
                           ("W", "Wold", None, ["country"])]
                   + [(p, f"place {p}", None, []) for p in ("S", "T1", "T2", "T3", "T4")])
    rows = [("S", "P17", "X"), ("T1", "P17", "Y"), ("T2", "P17", "Z"), ("T3", "P17", "V"), ("T4", "P17", "W")]
    candidates, conflict_rows, _ = kept_claims(spark, rows, names)
    claim = {r.subject_id: r.claim_id for r in candidates.collect()}["S"]
    chosen = {i for r in conflict_rows.collect() if r.claim_id == claim for i in (r.object_id, r.irrelevant_id)}
    assert chosen and chosen <= {"V", "W"}
