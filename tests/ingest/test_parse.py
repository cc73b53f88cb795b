"""Line parsing, without Spark: value forms, empty PHP arrays, malformed lines."""
import json

import pyarrow as pa
import pytest

from misbench.ingest.parse import (
    MalformedEntity,
    parse_entity,
    parse_line_batches,
    time_text,
)
from tests.conftest import SLICE_JSON, require_slice


def statement(prop, datavalue, rank="normal", snaktype="value", qualifiers=None, sid=None):
    mainsnak = {"snaktype": snaktype, "property": prop, "datatype": "x"}
    if datavalue is not None:
        mainsnak["datavalue"] = datavalue
    st = {"mainsnak": mainsnak, "type": "statement", "id": sid or f"Q1${prop}", "rank": rank}
    if qualifiers:
        st["qualifiers"] = qualifiers
    return st


def time_value(text, precision):
    return {"type": "time", "value": {"time": text, "precision": precision, "timezone": 0,
                                       "calendarmodel": "http://www.wikidata.org/entity/Q1985727"}}


def entity_line(claims, **extra):
    entity = {"type": "item", "id": "Q1", "labels": {"en": {"language": "en", "value": "One"}},
              "descriptions": [], "aliases": [], "claims": claims, "sitelinks": []}
    entity.update(extra)
    return json.dumps(entity)


@pytest.mark.parametrize(
    "raw, precision, expected",
    [
        ("+1952-03-11T00:00:00Z", 11, "1952-03-11"),
        ("+1952-03-00T00:00:00Z", 10, "1952-03"),
        ("+1952-00-00T00:00:00Z", 9, "1952"),
        ("-0050-00-00T00:00:00Z", 9, "-0050"),
        ("+00000001952-01-01T00:00:00Z", 9, "1952"),
        ("-13798000000-00-00T00:00:00Z", 3, "-13798000000"),
    ],
)
def test_time_text_follows_precision(raw, precision, expected):
    assert time_text({"time": raw, "precision": precision}) == (expected, precision)


def test_every_value_type_has_a_canonical_text():
    claims = {
        "P31": [statement("P31", {"type": "wikibase-entityid",
                                  "value": {"entity-type": "item", "numeric-id": 5, "id": "Q5"}})],
        "P17": [statement("P17", {"type": "wikibase-entityid",  # old form: numeric-id only
                                  "value": {"entity-type": "item", "numeric-id": 142}})],
        "P1659": [statement("P1659", {"type": "wikibase-entityid",
                                      "value": {"entity-type": "property", "numeric-id": 21}})],
        "P569": [statement("P569", time_value("+1732-02-22T00:00:00Z", 11))],
        "P2046": [statement("P2046", {"type": "quantity", "value": {
            "amount": "+891.85", "unit": "http://www.wikidata.org/entity/Q712226"}})],
        "P1082": [statement("P1082", {"type": "quantity", "value": {"amount": "+3500000", "unit": "1"}})],
        "P1448": [statement("P1448", {"type": "monolingualtext",
                                      "value": {"text": "Berlin", "language": "de"}})],
        "P625": [statement("P625", {"type": "globecoordinate", "value": {
            "latitude": 52.5, "longitude": 13.4, "globe": "http://www.wikidata.org/entity/Q2"}})],
        "P856": [statement("P856", {"type": "string", "value": "https://berlin.de"})],
    }
    columns, triples = parse_entity(entity_line(claims), ("en",))
    by_prop = {t[1]: t for t in triples}
    assert by_prop["P31"][4:7] == ("wikibase-entityid", "Q5", None)
    assert by_prop["P17"][5] == "Q142"
    assert by_prop["P1659"][5] == "P21"
    assert (by_prop["P569"][6], by_prop["P569"][9]) == ("1732-02-22", 11)
    assert (by_prop["P2046"][6], by_prop["P2046"][8]) == ("891.85", "Q712226")
    assert (by_prop["P1082"][6], by_prop["P1082"][8]) == ("3500000", None)
    assert (by_prop["P1448"][6], by_prop["P1448"][7]) == ("Berlin", "de")
    assert by_prop["P625"][6] == "52.5,13.4"
    assert by_prop["P856"][6] == "https://berlin.de"
    assert columns[6] == ["Q5"]  # instance_of


def test_php_empty_arrays_are_empty_not_errors():
    line = json.dumps({"type": "item", "id": "Q9", "labels": [], "descriptions": [],
                       "aliases": [], "claims": [], "sitelinks": []})
    columns, triples = parse_entity(line, ("en",))
    assert columns[0] == "Q9" and columns[2] is None and columns[4] == [] and columns[5] == 0
    assert triples == []


def test_somevalue_and_novalue_snaks_are_kept_without_a_value():
    """They make a (subject, relation) ambiguous: one known spouse plus an unknown one is not
    a single spouse."""
    end_unknown = {"P582": [{"snaktype": "somevalue", "property": "P582"}]}
    claims = {"P26": [statement("P26", None, snaktype="somevalue"),
                      statement("P26", None, snaktype="novalue", sid="Q1$b"),
                      statement("P26", {"type": "wikibase-entityid", "value": {"id": "Q5"}}, sid="Q1$c",
                                qualifiers=end_unknown)]}
    rows = parse_entity(entity_line(claims), ("en",))[1]
    assert [(r[4], r[5], r[6]) for r in rows] == [("somevalue", None, None), ("novalue", None, None),
                                                   ("wikibase-entityid", "Q5", None)]
    assert rows[2][11] == "somevalue"  # an unknown end time: the marriage ended


def test_qualifier_dates_and_ranks_are_kept():
    qualifiers = {"P580": [{"snaktype": "value", "property": "P580",
                            "datavalue": time_value("+1999-01-01T00:00:00Z", 11)}],
                  "P582": [{"snaktype": "novalue", "property": "P582"}],
                  "P585": [{"snaktype": "value", "property": "P585",
                            "datavalue": time_value("+2001-00-00T00:00:00Z", 9)}]}
    claims = {"P6": [statement("P6", {"type": "wikibase-entityid", "value": {"id": "Q7"}},
                               rank="deprecated", qualifiers=qualifiers)],
              "P31": [statement("P31", {"type": "wikibase-entityid", "value": {"id": "Q8"}},
                                rank="deprecated", sid="Q1$c")]}
    columns, triples = parse_entity(entity_line(claims), ("en",))
    p6 = [t for t in triples if t[1] == "P6"][0]
    assert p6[2] == "deprecated"
    assert p6[10:13] == ("1999-01-01", None, "2001")
    assert columns[6] == []  # a deprecated P31 is not a type


def test_a_qualifier_time_coarser_than_a_year_is_marked_approximate():
    """A reign that ended "in the 1990s" is not a reign that ended in 1990: readers of the
    year (dated hoax bridges, periods) must not take it as one."""
    qualifiers = {"P580": [{"snaktype": "value", "property": "P580",
                            "datavalue": time_value("+1990-00-00T00:00:00Z", 8)}],
                  "P582": [{"snaktype": "value", "property": "P582",
                            "datavalue": time_value("+1996-00-00T00:00:00Z", 9)}]}
    claims = {"P35": [statement("P35", {"type": "wikibase-entityid", "value": {"id": "Q7"}}, qualifiers=qualifiers)]}
    _, triples = parse_entity(entity_line(claims), ("en",))
    assert triples[0][10:12] == ("1990~", "1996")


def test_label_language_preference_falls_back():
    line = json.dumps({"type": "item", "id": "Q2", "labels": {
        "de": {"language": "de", "value": "Erde"}, "fr": {"language": "fr", "value": "Terre"}},
        "aliases": {"fr": [{"language": "fr", "value": "planète bleue"}]}})
    columns, _ = parse_entity(line, ("en", "fr", "de"))
    assert columns[2] == "Terre" and columns[4] == ["planète bleue"]


@pytest.mark.parametrize(
    "line, reason",
    [
        ('{"type":"item","id":"Q1","labels":{"en":{"lang', "invalid JSON"),
        ('[1, 2]', "not a JSON object"),
        ('{"type":"item","labels":{}}', "without an id"),
        ('{"type":"item","id":"Q1","claims":{"P1":[{"id":"Q1$x","rank":"normal"}]}}', "no main snak"),
        ('{"type":"item","id":"Q1","claims":{"P1":[{"id":"Q1$x","mainsnak":{"snaktype":"value"}}]}}',
         "without datavalue"),
        ('{"type":"item","id":"Q1","claims":{"P1":[{"id":"Q1$x","mainsnak":{"snaktype":"value",'
         '"datavalue":{"type":"wikibase-entityid","value":{"entity-type":"item"}}}}]}}',
         "entity value without id"),
        ('{"type":"item","id":"Q1","claims":{"P1":[{"id":"Q1$x","mainsnak":{"snaktype":"value",'
         '"datavalue":{"type":"time","value":{"precision":11}}}}]}}', "bad time value"),
        ('{"type":"item","id":"Q1","claims":"oops"}', "unexpected entity structure"),
    ],
)
def test_malformed_lines_raise_with_a_reason(line, reason):
    with pytest.raises(MalformedEntity, match=reason):
        parse_entity(line, ("en",))


def batch(lines, source="f.json", block=0):
    return pa.RecordBatch.from_pydict(
        {"value": lines, "source_file": [source] * len(lines), "block_start": [block] * len(lines)}
    )


def test_batches_give_one_row_per_entity_line_and_block_counts():
    require_slice()
    lines = SLICE_JSON.read_text().split("\n")
    lines = [line for line in lines if line != ""]  # Spark's reader yields no trailing empty line
    first, second = lines[:20], lines[20:] + ["]", '{"type":"item","id":"Q99","lab']
    out = pa.Table.from_batches(list(parse_line_batches(
        [batch(first), batch(second[:10]), batch(second[10:], block=500)], ["en"])))
    kinds = out.column("kind").to_pylist()
    assert kinds.count("entity") == 49
    assert kinds.count("reject") == 1
    blocks = [r for r in out.to_pylist() if r["kind"] == "block"]
    assert [(b["block_start"], b["line_count"]) for b in blocks] == [
        (0, 30), (500, len(second) - 10)]
    reject = [r for r in out.to_pylist() if r["kind"] == "reject"][0]
    assert reject["line_in_block"] == len(second) - 10 - 1
    assert reject["raw_head"].startswith('{"type":"item","id":"Q99"')
    assert sum(len(t) for t in out.column("triples").to_pylist()) == 4282  # 5 without a value
