"""Relation templates: the shipped config is complete and valid; bad config is named."""
import pytest

from misbench.claims.relations import load_pairs, load_relations
from misbench.config import ConfigError, conf_dir

MAINTENANCE = {"P5008", "P6104"}


def test_shipped_relations_are_82_valid_and_free_of_maintenance_relations():
    relations, topics = load_relations()
    assert len(relations) == 82 and len({r.relation for r in relations}) == 82
    assert not MAINTENANCE & {r.relation for r in relations}
    assert {"Academia", "Geography", "Sport"} <= {r.topic for r in relations} <= set(topics)
    for paper_relation in ("P17", "P106", "P27", "P407", "P361", "P69"):
        assert paper_relation in {r.relation for r in relations}
    pairs = load_pairs(topics)
    assert {p.kind for p in pairs} == {"compositional", "inference"}
    assert any(p.relation == "P57/P569" and p.literal_answer for p in pairs)
    assert any(p.relation == "P22/P22" and p.kind == "inference" for p in pairs)


@pytest.mark.parametrize(
    "entry, message",
    [
        ("P1: {question: 'Q <S>?', answer_type: x, topic: Sport}", "relation P1: no statement template"),
        ("P1: {statement: '<S> is.', question: 'Q <S>?', answer_type: x, topic: Sport}", "lacks <O>"),
        ("P1: {statement: '<S> <O>.', question: 'Which?', answer_type: x, topic: Sport}", "question template lacks <S>"),
        ("P1: {statement: '<S> <O>.', question: 'Is <S> <O>?', answer_type: x, topic: Sport}", "gives away"),
        ("P1: {statement: '<S> <O>.', question: 'Q <S>?', answer_type: x, topic: Cooking}", "unknown topic 'Cooking'"),
        ("Q5: {statement: '<S> <O>.', question: 'Q <S>?', answer_type: x, topic: Sport}", "not a Wikidata property"),
    ],
)
def test_invalid_relations_are_named(tmp_path, entry, message):
    path = tmp_path / "relations.yaml"
    path.write_text(f"topics: [Sport]\nrelations:\n  {entry}\n")
    with pytest.raises(ConfigError, match=message):
        load_relations(path)


def test_invalid_pairs_are_named(tmp_path):
    path = tmp_path / "multihop.yaml"
    path.write_text("pairs:\n  - {first: P22, second: P22, kind: sideways, statement: '<S> <O>', "
                    "question: '<S>?', answer_type: person, topic: Family}\n")
    with pytest.raises(ConfigError, match=r"pair 1 \(P22/P22\): kind must be"):
        load_pairs(["Family"], path)
    assert (conf_dir() / "multihop.yaml").is_file()
