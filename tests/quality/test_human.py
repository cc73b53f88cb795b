"""Human-evaluation arithmetic: allocation, sheet merging and validation, Fleiss' kappa,
agreement and filter accuracy on ratings worked out by hand."""
import pandas as pd
import pytest

from misbench.quality import human


def test_fleiss_kappa_matches_the_published_worked_example():
    # Fleiss (1971) as worked on Wikipedia's "Fleiss' kappa" page: 10 items, 14 raters, 5 categories.
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
             [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    assert human.fleiss_kappa(table) == pytest.approx(0.20993, abs=1e-4)


def test_fleiss_kappa_is_one_for_perfect_agreement_and_undefined_for_one_category():
    assert human.fleiss_kappa([[3, 0, 0], [0, 3, 0], [0, 0, 3]]) == pytest.approx(1.0)
    assert human.fleiss_kappa([[3, 0, 0], [3, 0, 0]]) is None
    with pytest.raises(ValueError):
        human.fleiss_kappa([[3, 0, 0], [2, 0, 0]])


def test_allocation_is_proportional_covers_every_stratum_and_adds_up():
    counts = {("factual", "blog", 1): 100, ("correct", "news", 1): 50, ("semantic", "blog", 2): 1}
    shares = human.allocate(counts, 30)
    assert sum(shares.values()) == 30
    assert shares[("semantic", "blog", 2)] == 1
    assert shares[("factual", "blog", 1)] == pytest.approx(2 * shares[("correct", "news", 1)], abs=1)
    assert human.allocate(counts, 1000) == counts


def sheet(rows):
    frame = human.blank_sheet(pd.DataFrame([
        {"sample_id": f"S{i:04d}", "evidence_id": e, "kind": k, "style": "news", "hop": 1, "question": "q",
         "statement": "s", "about": None, "correct_evidence": "c", "text": "t"} for i, (e, k) in enumerate(rows, 1)]), 3)
    return frame


def test_filled_copies_merge_and_a_clash_is_an_error():
    first, second = sheet([("e1", "factual"), ("e2", "correct")]), sheet([("e1", "factual"), ("e2", "correct")])
    first.loc[0, "entailment_1"] = "2"
    second.loc[0, "entailment_2"] = "1"
    second.loc[1, "entailment_2"] = 2.0  # as Excel returns numbers
    merged = human.merge_sheets([first, second], 3)
    assert merged.loc[0, ["entailment_1", "entailment_2"]].tolist() == ["2", "1"]
    assert merged.loc[1, "conflict_1"] == "n/a"  # correct texts are not rated for conflict
    ratings = human.parse_ratings(merged, 3)
    assert sorted(ratings[["evidence_id", "annotator", "rating"]].itertuples(index=False, name=None)) == [
        ("e1", 1, 2), ("e1", 2, 1), ("e2", 2, 2)]
    second.loc[0, "entailment_1"] = "0"
    with pytest.raises(ValueError, match="disagree"):
        human.merge_sheets([first, second], 3)


def test_a_rating_outside_the_rubric_names_its_cell():
    filled = sheet([("e1", "factual")])
    filled.loc[0, "conflict_3"] = "3"
    with pytest.raises(ValueError, match=r"row 2 \(S0001\) conflict_3: '3'"):
        human.parse_ratings(filled, 3)


def test_agreement_kappa_and_filter_accuracy_on_ratings_worked_by_hand():
    entail = {"e1": [2, 2, 2], "e2": [2, 2, 1], "e3": [0, 0, 1], "e4": [2, 1, 0]}
    conflict = {"e2": [2, 2, 2], "e3": [1, 0, 0], "e4": [2, 2, 2]}
    kinds = {"e1": "correct", "e2": "factual", "e3": "factual", "e4": "temporal"}
    rows = [{"sample_id": None, "evidence_id": e, "kind": kinds[e], "annotator": a + 1, "rubric": rubric,
             "rating": r} for rubric, table in (("entailment", entail), ("conflict", conflict))
            for e, values in table.items() for a, r in enumerate(values)]
    qc = pd.DataFrame({"evidence_id": ["e1", "e2", "e3", "e4"], "kind": list(kinds.values()),
                       "entailed": [True, True, False, True], "passed": [True, False, False, True]})
    report = human.agreement_report(pd.DataFrame(rows), qc, 3, entails_at=2, conflicts_at=1)
    value = {(r.metric, r.rubric, None if pd.isna(r.annotator) else int(r.annotator)): r.value
             for r in report.itertuples()}
    # Entailment majorities e1=2, e2=2, e3=0, e4 none: annotators 1 and 2 always agree, 3 once.
    assert value[("agreement_with_majority", "entailment", 1)] == 1.0
    assert value[("agreement_with_majority", "entailment", 3)] == pytest.approx(1 / 3)
    assert value[("fleiss_kappa", "entailment", None)] == pytest.approx(
        human.fleiss_kappa([[0, 0, 3], [0, 1, 2], [2, 1, 0], [1, 1, 1]]))
    # Human labels (low median): e1, e2 entail; e3, e4 do not. The filter said e4 entails.
    assert value[("accuracy", "entailment_filter", None)] == 0.75
    assert value[("false_positive", "entailment_filter", None)] == 1
    # Accepted by humans: e1 (correct, entails), e2 (entails, conflicts); passed: e1, e4.
    assert value[("accuracy", "all_filters", None)] == 0.5
    assert value[("false_negative", "all_filters", None)] == 1
