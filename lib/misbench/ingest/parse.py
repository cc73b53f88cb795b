"""Parse lines of a Wikidata JSON dump into Arrow rows (runs inside Spark Python workers).

A dump is ``[``, then one entity per line followed by ``,``, then ``]``. Every line maps to
exactly one row of the *parsed* shape: an ``entity`` (with its statements nested in
``triples``) or a ``reject`` (with the reason and the first characters of the line); bracket
and empty lines produce nothing. After the last line of each file split a ``block`` row
records how many physical lines the split held, so line numbers can be computed later without
reading the file sequentially.
"""
from __future__ import annotations

from typing import Iterable, Iterator

import orjson
import pyarrow as pa

RAW_HEAD_CHARS = 200

TRIPLE_FIELDS = [
    ("statement_id", pa.string()),
    ("property", pa.string()),
    ("rank", pa.string()),
    ("datatype", pa.string()),
    ("value_type", pa.string()),
    ("object_id", pa.string()),
    ("value", pa.string()),
    ("value_lang", pa.string()),
    ("unit_id", pa.string()),
    ("time_precision", pa.int32()),
    ("start_time", pa.string()),
    ("end_time", pa.string()),
    ("point_in_time", pa.string()),
]
TRIPLE_TYPE = pa.struct(TRIPLE_FIELDS)

PARSED_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("source_file", pa.string()),
        ("block_start", pa.int64()),
        ("line_in_block", pa.int64()),
        ("line_count", pa.int64()),
        ("id", pa.string()),
        ("type", pa.string()),
        ("label", pa.string()),
        ("description", pa.string()),
        ("aliases", pa.list_(pa.string())),
        ("sitelink_count", pa.int32()),
        ("instance_of", pa.list_(pa.string())),
        ("subclass_of", pa.list_(pa.string())),
        ("datatype", pa.string()),
        ("triples", pa.list_(TRIPLE_TYPE)),
        ("reason", pa.string()),
        ("raw_head", pa.string()),
    ]
)

_ENTITY_PREFIX = {"item": "Q", "property": "P", "lexeme": "L"}
_QUALIFIER_COLUMNS = (("P580", 10), ("P582", 11), ("P585", 12))  # index in a triple tuple
_SKIP_LINES = {"", "[", "]"}


class MalformedEntity(ValueError):
    """The line is JSON but not a usable entity; the message is the reject reason."""


def _first_value(container, languages: tuple[str, ...]):
    if not container:  # {} or the PHP-style empty array []
        return None
    for language in languages:
        entry = container.get(language)
        if entry:
            return entry.get("value")
    return None


def _aliases(container, languages: tuple[str, ...]) -> list[str]:
    if not container:
        return []
    for language in languages:
        entries = container.get(language)
        if entries:
            return [entry.get("value") for entry in entries if entry.get("value")]
    return []


def time_text(value: dict) -> tuple[str, int]:
    """``+1952-03-11T00:00:00Z`` at precision 11 -> ``1952-03-11``; 10 -> ``1952-03``;
    9 and coarser -> the year (``-0050`` for 50 BCE)."""
    raw = value["time"]
    precision = int(value.get("precision", 11))
    sign = "-" if raw.startswith("-") else ""
    date = raw.lstrip("+-").split("T", 1)[0]
    year, month, day = date.rsplit("-", 2)
    year = year.lstrip("0").rjust(4, "0")
    if precision >= 11:
        return f"{sign}{year}-{month}-{day}", precision
    if precision == 10:
        return f"{sign}{year}-{month}", precision
    return f"{sign}{year}", precision


def entity_id_of(value: dict) -> str:
    """Entity id of a wikibase-entityid value, also in the old form with only numeric-id."""
    if value.get("id"):
        return value["id"]
    prefix = _ENTITY_PREFIX.get(value.get("entity-type"))
    if prefix is None or "numeric-id" not in value:
        raise MalformedEntity(f"entity value without id: {orjson.dumps(value).decode()[:80]}")
    return f"{prefix}{value['numeric-id']}"


def snak_value(datavalue: dict) -> tuple:
    """(value_type, object_id, value, value_lang, unit_id, time_precision) of a snak's datavalue."""
    value_type = datavalue.get("type")
    value = datavalue.get("value")
    if value_type == "wikibase-entityid":
        return value_type, entity_id_of(value), None, None, None, None
    if value_type == "string":
        return value_type, None, value, None, None, None
    if value_type == "time":
        text, precision = time_text(value)
        return value_type, None, text, None, None, precision
    if value_type == "quantity":
        unit = value.get("unit", "1")
        unit_id = None if unit == "1" else unit.rsplit("/", 1)[-1]
        return value_type, None, value["amount"].lstrip("+"), None, unit_id, None
    if value_type == "monolingualtext":
        return value_type, None, value["text"], value.get("language"), None, None
    if value_type == "globecoordinate":
        return value_type, None, f"{value['latitude']},{value['longitude']}", None, None, None
    return value_type, None, orjson.dumps(value).decode(), None, None, None


UNKNOWN_SNAKS = ("somevalue", "novalue")


def _qualifier_time(qualifiers: dict, prop: str) -> str | None:
    """The qualifier's time as canonical text; ``somevalue`` for an unknown time (an end time
    that is unknown still says the statement ended). A time coarser than a year (a decade, a
    century) is its year marked approximate, ``1990~``: read as a year it would claim a
    precision the graph does not give ("the head of state in 1995" against a reign that
    ended "in the 1990s"), so readers take it as a time they cannot read."""
    for snak in qualifiers.get(prop) or ():
        if snak.get("snaktype") == "value":
            datavalue = snak.get("datavalue") or {}
            if datavalue.get("type") == "time":
                text, precision = time_text(datavalue["value"])
                return text if precision >= 9 else f"{text}~"
        elif snak.get("snaktype") == "somevalue":
            return "somevalue"
    return None


def statement_rows(claims) -> list[tuple]:
    """One tuple (in TRIPLE_FIELDS order) per statement. "Unknown value" and "no value" main
    snaks become rows with value_type ``somevalue`` / ``novalue`` and no value: they make a
    (subject, property) ambiguous for a single-answer question."""
    rows = []
    if not claims:
        return rows
    for prop, statements in claims.items():
        for statement in statements:
            mainsnak = statement.get("mainsnak")
            if not isinstance(mainsnak, dict):
                raise MalformedEntity(f"statement {statement.get('id')}: no main snak")
            snaktype = mainsnak.get("snaktype")
            if snaktype in UNKNOWN_SNAKS:
                value_type, object_id, value, value_lang, unit_id, precision = snaktype, None, None, None, None, None
            else:
                datavalue = mainsnak.get("datavalue")
                if not isinstance(datavalue, dict):
                    raise MalformedEntity(f"statement {statement.get('id')}: value snak without datavalue")
                try:
                    value_type, object_id, value, value_lang, unit_id, precision = snak_value(datavalue)
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    if isinstance(exc, MalformedEntity):
                        raise
                    raise MalformedEntity(
                        f"statement {statement.get('id')}: bad {datavalue.get('type')} value ({exc!r})"
                    ) from None
            qualifiers = statement.get("qualifiers") or {}
            rows.append(
                (
                    statement.get("id"),
                    mainsnak.get("property", prop),
                    statement.get("rank", "normal"),
                    mainsnak.get("datatype"),
                    value_type,
                    object_id,
                    value,
                    value_lang,
                    unit_id,
                    precision,
                    _qualifier_time(qualifiers, "P580") if qualifiers else None,
                    _qualifier_time(qualifiers, "P582") if qualifiers else None,
                    _qualifier_time(qualifiers, "P585") if qualifiers else None,
                )
            )
    return rows


def _type_ids(triples: list[tuple], prop: str) -> list[str]:
    return [
        t[5] for t in triples if t[1] == prop and t[5] is not None and t[2] != "deprecated"
    ]


def parse_entity(text, languages: tuple[str, ...]) -> tuple[tuple, list[tuple]]:
    """Entity columns (id .. datatype) and its statement tuples; raises on bad input."""
    try:
        entity = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise MalformedEntity(f"invalid JSON: {exc}") from None
    if not isinstance(entity, dict):
        raise MalformedEntity(f"not a JSON object but {type(entity).__name__}")
    entity_id = entity.get("id")
    if not isinstance(entity_id, str) or not entity_id:
        raise MalformedEntity("entity without an id")
    try:
        triples = statement_rows(entity.get("claims"))
        sitelinks = entity.get("sitelinks")
        columns = (
            entity_id,
            entity.get("type"),
            _first_value(entity.get("labels"), languages),
            _first_value(entity.get("descriptions"), languages),
            _aliases(entity.get("aliases"), languages),
            len(sitelinks) if sitelinks else 0,
            _type_ids(triples, "P31"),
            _type_ids(triples, "P279"),
            entity.get("datatype"),
        )
    except MalformedEntity:
        raise
    except (AttributeError, TypeError, KeyError) as exc:
        raise MalformedEntity(f"unexpected entity structure ({exc!r})") from None
    return columns, triples


class _Columns:
    """Column lists for one output batch of the parsed shape."""

    def __init__(self):
        self.line = {name: [] for name in PARSED_SCHEMA.names if name != "triples"}
        self.triple_offsets = [0]
        self.triple_columns = [[] for _ in TRIPLE_FIELDS]

    def add(self, kind, source_file, block_start, line_in_block, line_count=None,
            entity=None, triples=(), reason=None, raw_head=None):
        line = self.line
        line["kind"].append(kind)
        line["source_file"].append(source_file)
        line["block_start"].append(block_start)
        line["line_in_block"].append(line_in_block)
        line["line_count"].append(line_count)
        for name, value in zip(_ENTITY_COLUMNS, entity or _NO_ENTITY):
            line[name].append(value)
        line["reason"].append(reason)
        line["raw_head"].append(raw_head)
        for triple in triples:
            for column, value in zip(self.triple_columns, triple):
                column.append(value)
        self.triple_offsets.append(self.triple_offsets[-1] + len(triples))

    def __len__(self):
        return len(self.line["kind"])

    def to_batch(self) -> pa.RecordBatch:
        children = [
            pa.array(values, type=field_type)
            for values, (_, field_type) in zip(self.triple_columns, TRIPLE_FIELDS)
        ]
        triples = pa.ListArray.from_arrays(
            pa.array(self.triple_offsets, pa.int32()),
            pa.StructArray.from_arrays(children, fields=[pa.field(n, t) for n, t in TRIPLE_FIELDS]),
        )
        arrays = []
        for field in PARSED_SCHEMA:
            if field.name == "triples":
                arrays.append(triples)
            else:
                arrays.append(pa.array(self.line[field.name], type=field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=PARSED_SCHEMA)


_ENTITY_COLUMNS = (
    "id", "type", "label", "description", "aliases", "sitelink_count",
    "instance_of", "subclass_of", "datatype",
)
_NO_ENTITY = (None,) * len(_ENTITY_COLUMNS)


def parse_line_batches(
    batches: Iterable[pa.RecordBatch], languages: Iterable[str]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: batches of (value, source_file, block_start[, problem]) -> parsed rows.

    ``problem``, when set, is why the reader could not read the line whole (a compressed
    stream that ends early); such a line is a reject with that reason.
    """
    languages = tuple(languages)
    current_block = None
    lines_in_block = 0
    for batch in batches:
        out = _Columns()
        texts = batch.column("value").to_pylist()
        files = batch.column("source_file").to_pylist()
        starts = batch.column("block_start").to_pylist()
        if "problem" in batch.schema.names:
            problems = batch.column("problem").to_pylist()
        else:
            problems = [None] * len(texts)
        for text, source_file, block_start, problem in zip(texts, files, starts, problems):
            block = (source_file, block_start)
            if block != current_block:
                if current_block is not None:
                    out.add("block", *current_block, None, line_count=lines_in_block)
                current_block, lines_in_block = block, 0
            line_in_block = lines_in_block
            lines_in_block += 1
            if problem:
                out.add("reject", source_file, block_start, line_in_block,
                        reason=f"{problem}; the lines before it were kept",
                        raw_head=text[:RAW_HEAD_CHARS])
                continue
            stripped = text.strip()
            if stripped.endswith(","):
                stripped = stripped[:-1]
            if stripped in _SKIP_LINES:
                continue
            try:
                entity, triples = parse_entity(stripped, languages)
            except MalformedEntity as exc:
                out.add("reject", source_file, block_start, line_in_block,
                        reason=str(exc), raw_head=text[:RAW_HEAD_CHARS])
                continue
            out.add("entity", source_file, block_start, line_in_block, entity=entity,
                    triples=triples)
        if len(out):
            yield out.to_batch()
    if current_block is not None:
        out = _Columns()
        out.add("block", *current_block, None, line_count=lines_in_block)
        yield out.to_batch()
