"""The claims job on the real Wikidata slice, through the lake; enrichment against a real local
SPARQL endpoint (oxigraph); 2WikiMultihopQA import."""
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from misbench.claims.job import run_claims
from misbench.cli import main
from misbench.ingest.job import run_ingest
from tests.conftest import SLICE_JSON, copy_lake, require_slice

pytestmark = pytest.mark.slow  # stage jobs over lakes built from the real slice

MISSING_FROM_SUBSET = {"Q142", "Q145"}  # France and the United Kingdom


@pytest.fixture(scope="module")
def slice_lake(spark, cfg, tmp_path_factory):
    """The real slice ingested once; tests copy it so each gets a fresh lake."""
    from misbench.lake import DeltaRsLake

    require_slice()
    root = tmp_path_factory.mktemp("slice") / "lake"
    run_ingest(spark, DeltaRsLake(spark, root=str(root)), cfg.with_overrides([f"lake.root={root}"]),
               [str(SLICE_JSON)])
    return root


@pytest.fixture()
def claims_lake(spark, slice_lake, tmp_path):
    return copy_lake(spark, slice_lake, tmp_path / "lake")


def table_rows(lake, name):
    return sorted(tuple(r) for r in lake.read(name).collect())


def test_claims_from_the_real_slice(spark, claims_lake, cfg, capsys):
    lake = claims_lake
    run_cfg = cfg.with_overrides([f"lake.root={lake.root}"])
    report = run_claims(spark, lake, run_cfg)
    assert report.one_hop >= 4 and report.conflicts == 3 * report.claims

    claims = {r.subject_label: r for r in lake.read("claims").collect()}
    london = claims["London"]
    assert london.statement == "London lies in the country of United Kingdom."
    assert london.question == "In which country does London lie?"
    assert (london.relation, london.object_id, london.topic, london.hop) == ("P17", "Q145", "Geography", 1)

    types = {r.id: set(r.instance_of) for r in lake.read("entities").collect()}
    by_claim = {}
    for row in lake.read("conflicts").collect():
        by_claim.setdefault(row.claim_id, []).append(row)
    assert set(by_claim) == {c.claim_id for c in claims.values()}
    for claim in claims.values():
        rows = by_claim[claim.claim_id]
        assert sorted(r.kind for r in rows) == ["factual", "semantic", "temporal"]
        for r in rows:
            assert r.object_id != claim.object_id
            assert types[r.object_id] & types[claim.object_id], (claim.statement, r.object_id)
            assert r.irrelevant_id not in (r.object_id, claim.object_id)

    # every one-hop statement of a configured relation is either a claim or counted
    relation_ids = [r.relation for r in __import__("misbench.claims.relations", fromlist=["x"]).load_relations()[0]]
    statements = lake.read("triples").where(
        __import__("pyspark.sql.functions", fromlist=["x"]).col("property").isin(relation_ids)
        & __import__("pyspark.sql.functions", fromlist=["x"]).col("object_id").isNotNull()
    ).count()
    stats = lake.read("claims_stats").collect()
    assert sum(r.facts for r in stats if r.hop == 1) == statements
    assert sum(r.facts for r in stats if r.reason == "kept") == report.claims

    first = (table_rows(lake, "claims"), table_rows(lake, "conflicts"), table_rows(lake, "claims_stats"))
    run_claims(spark, lake, run_cfg)
    assert (table_rows(lake, "claims"), table_rows(lake, "conflicts"),
            table_rows(lake, "claims_stats")) == first

    assert main(["sql", "--lake", str(lake.root), "--format", "json",
                 "SELECT topic, hop, count(*) AS claims FROM claims GROUP BY topic, hop"]) == 0
    per_topic = json.loads(capsys.readouterr().out)
    assert {"topic": "Geography", "hop": 1, "claims": report.one_hop} in per_topic


# --------------------------------------------------------------------------------------------
# SPARQL enrichment against a real endpoint
# --------------------------------------------------------------------------------------------


def _literal(text):
    return json.dumps(text, ensure_ascii=False)


def slice_as_ntriples(path: Path) -> None:
    """Labels, descriptions and P31 of the real slice, in Wikidata's RDF vocabulary."""
    lines = []
    for raw in SLICE_JSON.read_text(encoding="utf-8").split("\n"):
        raw = raw.rstrip(",")
        if not raw.startswith("{"):
            continue
        entity = json.loads(raw)
        subject = f"<http://www.wikidata.org/entity/{entity['id']}>"
        label = (entity.get("labels") or {}).get("en")
        if label:
            lines.append(f'{subject} <http://www.w3.org/2000/01/rdf-schema#label> {_literal(label["value"])}@en .')
        description = (entity.get("descriptions") or {}).get("en")
        if description:
            lines.append(f'{subject} <http://schema.org/description> {_literal(description["value"])}@en .')
        for statement in (entity.get("claims") or {}).get("P31", []):
            value = statement["mainsnak"].get("datavalue", {}).get("value", {})
            if value.get("id"):
                lines.append(f"{subject} <http://www.wikidata.org/prop/direct/P31> "
                             f"<http://www.wikidata.org/entity/{value['id']}> .")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def sparql_endpoint(tmp_path_factory):
    require_slice()
    folder = tmp_path_factory.mktemp("oxigraph")
    data = folder / "slice.nt"
    slice_as_ntriples(data)
    oxigraph = str(Path(sys.executable).parent / "oxigraph")
    subprocess.run([oxigraph, "load", "--location", str(folder / "store"), "--file", str(data)],
                   check=True, capture_output=True)
    port = free_port()
    server = subprocess.Popen([oxigraph, "serve", "--location", str(folder / "store"),
                               "--bind", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/query"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{url}?query=ASK%7B%7D", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    yield url
    server.terminate()
    server.wait()


def ingest_without_countries(spark, cfg, root, tmp_path):
    """A user who ingested a subset: the slice without France and the United Kingdom."""
    from misbench.lake import DeltaRsLake

    subset = tmp_path / "subset.json"
    kept = [line for line in SLICE_JSON.read_text(encoding="utf-8").split("\n")
            if not any(f'"id":"{q}"' in line[:40] for q in MISSING_FROM_SUBSET)]
    subset.write_text("\n".join(kept), encoding="utf-8")
    lake = DeltaRsLake(spark, root=str(root))
    run_ingest(spark, lake, cfg.with_overrides([f"lake.root={root}"]), [str(subset)])
    return lake


def enrich_cfg(cfg, root, endpoint, **extra):
    overrides = [f"lake.root={root}", "claims.enrich.enabled=true", f"claims.enrich.endpoint={endpoint}",
                 "claims.enrich.batch_size=3", "claims.enrich.backoff_seconds=0.01",
                 "claims.enrich.retries=1", "claims.enrich.timeout_seconds=5"]
    return cfg.with_overrides(overrides + [f"{k}={v}" for k, v in extra.items()])


def test_enrichment_fills_labels_of_entities_the_dump_lacks(spark, cfg, tmp_path, sparql_endpoint, slice_claims_root):
    from misbench.lake import DeltaRsLake

    reference = DeltaRsLake(spark, root=str(slice_claims_root))  # the whole slice ingested and claimed
    full_claims = reference.row_count("claims")
    root = tmp_path / "subset-lake"
    lake = ingest_without_countries(spark, cfg, root, tmp_path)

    without = run_claims(spark, lake, cfg.with_overrides([f"lake.root={root}"]))
    assert without.claims < full_claims

    # an endpoint that does not answer: the job finishes, failures are stored to retry later
    dead = f"http://127.0.0.1:{free_port()}/query"
    failed = run_claims(spark, lake, enrich_cfg(cfg, root, dead))
    errors = lake.read("entity_enrichment").where("error IS NOT NULL AND found IS NULL").count()
    assert errors == failed.enriched > 0 and failed.claims == without.claims

    enriched = run_claims(spark, lake, enrich_cfg(cfg, root, sparql_endpoint))
    assert enriched.enriched == failed.enriched  # the failed ids were asked again
    assert enriched.claims == full_claims
    # the same claims and conflicts as when the whole slice was ingested
    assert table_rows(lake, "claims") == table_rows(reference, "claims")
    assert table_rows(lake, "conflicts") == table_rows(reference, "conflicts")
    cache = {r.id: r for r in lake.read("entity_enrichment").collect()}
    assert cache["Q145"].label == "United Kingdom" and "Q6256" in cache["Q145"].instance_of
    assert cache["Q183"].found is False  # Germany is not in the endpoint either: cached as unknown

    # cached: a rerun asks nothing, even with the endpoint gone
    again = run_claims(spark, lake, enrich_cfg(cfg, root, dead))
    assert again.enriched == 0 and again.claims == full_claims


def test_two_wiki_import(spark, claims_lake, cfg, tmp_path):
    records = [
        {"_id": "a1", "type": "compositional", "question": "Who is the mother of the director of film Alpha?",
         "answer": "Ann", "evidences": [["Alpha", "director", "Bob"], ["Bob", "mother", "Ann"]]},
        {"_id": "a2", "type": "compositional", "question": "Who is the mother of the director of film Beta?",
         "answer": "Cara", "evidences": [["Beta", "director", "Dan"], ["Dan", "mother", "Cara"]]},
        {"_id": "a3", "type": "compositional", "question": "Who is the mother of the director of film Gamma?",
         "answer": "Eve", "evidences": [["Gamma", "director", "Fay"], ["Fay", "mother", "Eve"]]},
        {"_id": "c1", "type": "comparison", "question": "Which film came out first, Alpha or Beta?",
         "answer": "Alpha", "evidences": [["Alpha", "publication date", "1990"], ["Beta", "publication date", "1991"]]},
        {"_id": "i1", "type": "inference", "question": "Who is the paternal grandfather of Gil?",
         "answer": "Ivo", "evidences": [["Gil", "father", "Hal"], ["Kim", "father", "Ivo"]]},
    ]
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(records))
    run_claims(spark, claims_lake, cfg, two_wiki=[str(path)])
    imported = {r.subject_label: r for r in claims_lake.read("claims").where("source = '2wikimultihopqa'").collect()}
    assert set(imported) == {"Alpha", "Beta", "Gamma"}
    alpha = imported["Alpha"]
    assert alpha.statement == "The mother of the director of Alpha is Ann." and alpha.bridge_label == "Bob"
    assert alpha.relation == "director/mother" and alpha.hop == 2
    conflicts = claims_lake.read("conflicts").where(f"claim_id = '{alpha.claim_id}'").collect()
    assert sorted(c.kind for c in conflicts) == ["factual", "semantic"]  # a mother never changes
    assert all(c.object_label in {"Cara", "Eve"} for c in conflicts)
    stats = {(r.relation, r.reason): r.facts for r in claims_lake.read("claims_stats").collect()}
    assert stats[("father/father", "evidence is not a two-hop chain")] == 1
