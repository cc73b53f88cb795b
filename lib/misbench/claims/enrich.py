"""Labels, descriptions and types of entities the ingested dump lacks, over SPARQL.

For users who ingest a subset of Wikidata: the objects of their facts are often outside it.
Queries go to a configured endpoint (the Wikidata Query Service in production) in batched
``VALUES`` queries, with a user agent, a timeout and retries with backoff; they run as
Spark tasks (``claims.enrich.parallelism`` at a time). Results, including ids the endpoint
does not know, are cached in the lake table ``entity_enrichment`` so a rerun does not ask
again; a batch that still fails after its retries is stored with its error and asked again
on the next run.
"""
from __future__ import annotations

import datetime as dt
from typing import Iterator, Sequence

import pyarrow as pa
import tenacity

ENRICHMENT_SCHEMA = (
    "id string, label string, description string, instance_of array<string>, "
    "found boolean, error string, fetched_at timestamp"
)
_ARROW_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("label", pa.string()),
        ("description", pa.string()),
        ("instance_of", pa.list_(pa.string())),
        ("found", pa.bool_()),
        ("error", pa.string()),
        ("fetched_at", pa.timestamp("us", tz="UTC")),
    ]
)
ENTITY_PREFIX = "http://www.wikidata.org/entity/"


def entity_query(ids: Sequence[str], language: str) -> str:
    values = " ".join(f"wd:{entity_id}" for entity_id in ids)
    return f"""PREFIX wd: <{ENTITY_PREFIX}>
PREFIX wdt: <http://www.wikidata.org/prop/direct/>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX schema: <http://schema.org/>
SELECT ?item ?label ?description ?type WHERE {{
  VALUES ?item {{ {values} }}
  OPTIONAL {{ ?item rdfs:label ?label . FILTER(LANG(?label) = "{language}") }}
  OPTIONAL {{ ?item schema:description ?description . FILTER(LANG(?description) = "{language}") }}
  OPTIONAL {{ ?item wdt:P31 ?type }}
}}"""


class _RetryAfterOrDoubling(tenacity.wait.wait_base):
    """The endpoint's Retry-After (seconds) when it sends one, else ``backoff_seconds``
    doubled after each failure."""

    def __init__(self, first: float):
        self.doubling = tenacity.wait_exponential(multiplier=first, exp_base=2, min=first)

    def __call__(self, state: tenacity.RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        headers = getattr(error, "headers", None) or getattr(getattr(error, "response", None), "headers", None)
        if headers and str(headers.get("Retry-After", "")).isdigit():
            return float(headers["Retry-After"])
        return self.doubling(state)


def fetch_entities(ids: Sequence[str], settings: dict, language: str) -> list[dict]:
    """One VALUES query for ``ids`` with retries; rows for every id (found or not)."""
    from SPARQLWrapper import JSON, POST, SPARQLWrapper

    client = SPARQLWrapper(settings["endpoint"], agent=settings["user_agent"])
    client.setMethod(POST)
    client.setReturnFormat(JSON)
    client.setTimeout(int(settings["timeout_seconds"]))
    client.setQuery(entity_query(ids, language))
    asking = tenacity.Retrying(stop=tenacity.stop_after_attempt(int(settings["retries"]) + 1),
                               wait=_RetryAfterOrDoubling(float(settings["backoff_seconds"])), reraise=True)
    try:
        bindings = asking(client.queryAndConvert)["results"]["bindings"]
        return _rows_from_bindings(ids, bindings)
    except Exception as exc:  # noqa: BLE001 - HTTP, timeout and endpoint errors alike, after every retry
        error = f"{type(exc).__name__}: {str(exc)[:300]}"
    now = dt.datetime.now(dt.timezone.utc)
    return [
        {"id": i, "label": None, "description": None, "instance_of": [], "found": None,
         "error": error, "fetched_at": now}
        for i in ids
    ]


def _rows_from_bindings(ids: Sequence[str], bindings: list[dict]) -> list[dict]:
    now = dt.datetime.now(dt.timezone.utc)
    rows = {i: {"id": i, "label": None, "description": None, "instance_of": [], "found": False,
                "error": None, "fetched_at": now} for i in ids}
    for binding in bindings:
        entity_id = binding["item"]["value"].rsplit("/", 1)[-1]
        row = rows.get(entity_id)
        if row is None:
            continue
        if "label" in binding:
            row["label"] = binding["label"]["value"]
        if "description" in binding:
            row["description"] = binding["description"]["value"]
        if "type" in binding:
            type_id = binding["type"]["value"].rsplit("/", 1)[-1]
            if type_id not in row["instance_of"]:
                row["instance_of"].append(type_id)
        row["found"] = row["found"] or bool(row["label"] or row["instance_of"] or row["description"])
    return list(rows.values())


def enrich_batches(settings: dict, language: str):
    """mapInArrow function: batches of ``id`` -> enrichment rows, ``batch_size`` ids a query."""
    size = int(settings["batch_size"])

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pending: list[str] = []
        for batch in batches:
            pending.extend(batch.column("id").to_pylist())
            while len(pending) >= size:
                chunk, pending = pending[:size], pending[size:]
                yield pa.RecordBatch.from_pylist(fetch_entities(chunk, settings, language), schema=_ARROW_SCHEMA)
        if pending:
            yield pa.RecordBatch.from_pylist(fetch_entities(pending, settings, language), schema=_ARROW_SCHEMA)

    return run
