"""The claims job: entities + triples -> claims, conflicts, claims_stats.

Reads the ingest tables, optionally enriches missing labels over SPARQL (cached in the lake),
stores the claim candidates once, then derives the three output tables from them. Every
output is replaced in one commit; ids and sampling are deterministic, so reruns give the
same rows.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from misbench import versions
from misbench.claims import stage
from misbench.claims.enrich import ENRICHMENT_SCHEMA, enrich_batches
from misbench.claims.relations import load_pairs, load_relations
from misbench.config import Config
from misbench.lake import Lake
from misbench.plans import Counted, LocalCheckpoints

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClaimsReport:
    claims: int
    one_hop: int
    two_hop: int
    conflicts: int
    enriched: int
    without_temporal: int  # claims of relations that do not change over time: no temporal conflict
    retired_slots: int = 0  # evidence slots whose conflict or claim changed: written again by generate
    changes: dict | None = None  # added / changed / removed / unchanged -> claims, against the stored claims
    dump_version: str | None = None


def require_one_false_object(lake: Lake, stage_name: str) -> None:
    """Stop a stage that would read conflicts built before one question per claim (each kind
    had its own false object then): the claims stage rebuilds them."""
    mixed = stage.mixed_false_objects(lake.read("conflicts")).count()
    if mixed:
        raise RuntimeError(
            f"{stage_name}: the lake's conflicts were built by an earlier misbench ({mixed} claims name a "
            "different false object per kind; one question per claim needs one). Rebuild them: "
            "misbench run-all --from claims (or misbench claims, then the stages after it)")


def changed_since_stored(lake: Lake, claims: DataFrame, conflicts: DataFrame) -> DataFrame | None:
    """(claim_id, kind) whose texts no longer fit (``stage.changed_conflicts``) against the
    stored claims and conflicts, computed once here: recording the changes and retiring stale
    slots both read it, and it must be read before the new claims replace the stored ones.
    None when nothing is stored."""
    if not all(lake.exists(t) for t in ("claims", "conflicts")):
        return None
    return LocalCheckpoints().keep(
        stage.changed_conflicts(lake.read("claims"), lake.read("conflicts"), claims, conflicts))


def record_changes(lake: Lake, claims: DataFrame, changed: DataFrame | None) -> tuple[str | None, dict]:
    """Record, for the dump the new claims come from, which were added, changed, removed or
    stayed against the stored ones (``claims_changes``); returns the version and the counts."""
    version = versions.latest_version(lake)
    changes = versions.claim_changes(changed, lake.read("claims") if changed is not None else None, claims, version)
    table = versions.CLAIMS_CHANGES
    if version is None:
        lake.write(changes, table)  # a lake without recorded dumps: the last run's changes
    else:
        if lake.exists(table):
            earlier = lake.read(table).where(F.col("dump_version") == version)
            changes = versions.keep_earlier_record(changes, earlier)
        lake.replace_where(changes, table, {"dump_version": version})
    rows = lake.read(table)
    rows = rows.where(F.col("dump_version") == version) if version is not None else rows
    counts = {row["change"]: row["n"] for row in rows.groupBy("change").agg(F.count("*").alias("n")).collect()}
    return version, {change: counts.get(change, 0) for change in versions.CHANGES}


def retire_stale_slots(lake: Lake, changed: DataFrame | None) -> int:
    """Before new claims and conflicts replace the stored ones: the evidence slots of the
    (claim, kind) pairs whose conflict or claim changed are removed, so no question is built
    from a text that states an older conflict (the next generation run writes them again).
    Returns how many slots were removed."""
    if changed is None or not lake.exists("evidence_slots"):
        return 0
    slots = lake.read("evidence_slots")
    stale = slots.join(changed, ["claim_id", "kind"], "left_semi").count()
    if stale:
        lake.write(slots.join(changed, ["claim_id", "kind"], "left_anti"), "evidence_slots")
        log.warning("claims: %d evidence slots held texts of conflicts or claims that changed; they are "
                    "removed and the next generation run writes them again", stale)
    return stale


def entity_labels(lake: Lake) -> DataFrame:
    """id, label, description, instance_of, aliases: the ingested entities, plus what
    enrichment found for ids the dump lacks."""
    entities = lake.read("entities").select("id", "label", "description", "instance_of", "aliases")
    if not lake.exists("entity_enrichment"):
        return entities
    enriched = lake.read("entity_enrichment").where(F.col("found")).select(
        "id", "label", "description", "instance_of", F.lit(None).cast("array<string>").alias("aliases")
    )
    return entities.unionByName(enriched.join(entities.select("id"), "id", "left_anti"))


def enrich_missing(spark: SparkSession, lake: Lake, cfg: Config, facts: DataFrame) -> int:
    """Query the SPARQL endpoint for object ids that neither the dump nor the cache holds."""
    settings = cfg.get("claims.enrich")
    needed = facts.where(F.col("object_id").isNotNull()).select(F.col("object_id").alias("id")).distinct()
    missing = needed.join(lake.read("entities").select("id"), "id", "left_anti")
    if lake.exists("entity_enrichment"):
        answered = lake.read("entity_enrichment").where(F.col("found").isNotNull()).select("id")
        missing = missing.join(answered, "id", "left_anti")
    count = missing.count()
    if count == 0:
        return 0
    log.info("claims: asking %s for %d entities", settings["endpoint"], count)
    language = cfg.get("ingest.languages")[0]
    fetched = missing.repartition(int(settings["parallelism"])).mapInArrow(
        enrich_batches(settings, language), ENRICHMENT_SCHEMA
    )
    lake.upsert(fetched, "entity_enrichment", ["id"])
    return count


def run_claims(
    spark: SparkSession, lake: Lake, cfg: Config, two_wiki: Sequence[str] = ()
) -> ClaimsReport:
    relations, topics = load_relations()
    pairs = load_pairs(topics, relations=relations)
    relations_df = stage.relations_frame(spark, relations)
    pairs_df = stage.pairs_frame(spark, pairs)
    properties = sorted(
        {r.relation for r in relations} | {p.first for p in pairs} | {p.second for p in pairs}
    )
    reference_date = str(cfg.get("claims.reference_date"))
    triples = lake.read("triples").where(
        F.col("value_type").isin("wikibase-entityid", "time", *stage.UNKNOWN_VALUE_TYPES)
        & F.col("property").isin(properties)
    )
    # Stored once: candidates and substitutes read the facts several times each.
    lake.write(stage.resolved_facts(triples, properties, reference_date), "claim_facts")
    facts = lake.read("claim_facts")
    links = lake.read("triples").where(
        (F.col("value_type") == "wikibase-entityid") & F.col("property").isin(list(cfg.get("claims.link_properties")))
        & (F.col("rank") != "deprecated")
    ).select(F.col("subject_id").alias("a"), F.col("object_id").alias("b"))

    enriched = 0
    if cfg.get("claims.enrich.enabled"):
        enriched = enrich_missing(spark, lake, cfg, facts)
    labels = entity_labels(lake)

    candidates = stage.one_hop_candidates(facts, labels, relations_df).unionByName(
        stage.two_hop_candidates(facts, labels, pairs_df)
    )
    if two_wiki:
        records = spark.read.option("multiLine", "true").json(list(two_wiki))
        candidates = candidates.unionByName(stage.two_wiki_candidates(records))
    # Stored once: conflicts, claims and stats all derive from the candidates.
    lake.write(candidates, "claim_candidates")
    candidates = lake.read("claim_candidates")

    templates = relations_df.select("relation", "statement").unionByName(
        pairs_df.select("relation", "statement")
    )
    conflict_rows = stage.conflicts(
        candidates, facts, labels, templates,
        seed=int(cfg.get("claims.seed")),
        reference_date=reference_date,
        attempts=int(cfg.get("claims.substitute_attempts")),
        links=links,
        # the search's small frames counted and broadcast, nothing checkpointed: the Spark Connect
        # server the tests run claims on (pysail) has no checkpoint store
        plan=Counted(),
    )
    lake.write(conflict_rows, "conflicts_staging")
    conflict_rows = lake.read("conflicts_staging")
    claims = stage.claims_with_conflicts(candidates, conflict_rows)
    kept_conflicts = conflict_rows.join(claims.select("claim_id"), "claim_id", "left_semi")
    # Recorded before the claims are replaced: the comparison reads the stored ones.
    changed = changed_since_stored(lake, claims, kept_conflicts)
    dump_version, changes = record_changes(lake, claims, changed)
    retired = retire_stale_slots(lake, changed)
    lake.write(claims, "claims", partition_by=["hop"])
    lake.write(conflict_rows.join(claims.select("claim_id"), "claim_id", "left_semi"), "conflicts")
    lake.write(stage.claims_stats(candidates, lake.read("claims")), "claims_stats")

    written = lake.read("claims")
    by_hop = {row["hop"]: row["n"] for row in written.groupBy("hop").agg(F.count("*").alias("n")).collect()}
    return ClaimsReport(
        claims=sum(by_hop.values()),
        one_hop=by_hop.get(1, 0),
        two_hop=by_hop.get(2, 0),
        conflicts=lake.row_count("conflicts"),
        enriched=enriched,
        without_temporal=written.where(~F.col("changes_over_time")).count(),
        dump_version=dump_version,
        retired_slots=retired,
        changes=changes,
    )

