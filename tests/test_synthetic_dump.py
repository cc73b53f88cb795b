"""The synthetic Wikidata dump of benchmarks/synthetic_dump.py (what benchmarks/scale.py
measures the pipeline on) through the real ingest, claims and hoax stages on local Spark: it
parses without a reject, and its graph feeds every kind of output those stages make (one-hop
claims of many relations, two-hop chains, all three conflict kinds, statements filtered for
the history the real dump has, MultiHoax questions). Same seed, same bytes."""
import bz2
import gzip
import hashlib
import re
import importlib.util

import pytest
from pyspark.sql import functions as F

from misbench.claims.job import run_claims
from misbench.hoax.job import run_hoax
from misbench.hoax.spec import load_spec
from misbench.hoax.stage import (
    NOT_TRIED, PROOF_DISJOINT, PROOF_FUNCTIONAL, PROOF_LIFESPAN, SECOND_HOP, options_problems,
)
from misbench.ingest.job import run_ingest
from misbench.lake import DeltaRsLake
from tests.conftest import PROJECT, check_counts, copy_lake

ENTITIES = 1600  # about the smallest the generator makes: every kind of entity, a few minutes of Spark
SEED = 3


def generator():
    spec = importlib.util.spec_from_file_location("synthetic_dump", PROJECT / "benchmarks" / "synthetic_dump.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def synthetic(spark, cfg, tmp_path_factory):
    folder = tmp_path_factory.mktemp("synthetic")
    dump = folder / "dump.json"
    counts = generator().write_dump(dump, ENTITIES, SEED)
    root = folder / "lake"
    lake = DeltaRsLake(spark, root=str(root))
    run_cfg = cfg.with_overrides([f"lake.root={root}"])
    reports = {"ingest": run_ingest(spark, lake, run_cfg, [str(dump)])}
    reports["claims"] = run_claims(spark, lake, run_cfg)
    reports["hoax"] = run_hoax(spark, lake, run_cfg)
    return dump, counts, lake, reports


def test_same_seed_same_bytes_another_seed_other_bytes(tmp_path):
    write_dump = generator().write_dump
    first = write_dump(tmp_path / "a.json", 2000, 11)
    again = write_dump(tmp_path / "b.json", 2000, 11)
    other = write_dump(tmp_path / "c.json", 2000, 12)
    assert digest(tmp_path / "a.json") == digest(tmp_path / "b.json") and first == again
    assert digest(tmp_path / "a.json") != digest(tmp_path / "c.json")
    assert first["entities"] == other["entities"] == 2000 and first["statements"] > 10 * 2000 / 2
    # compressed forms hold the same bytes, and are themselves reproducible
    write_dump(tmp_path / "a.json.bz2", 2000, 11)
    write_dump(tmp_path / "a.json.gz", 2000, 11)
    write_dump(tmp_path / "b.json.gz", 2000, 11)
    plain = (tmp_path / "a.json").read_bytes()
    assert bz2.decompress((tmp_path / "a.json.bz2").read_bytes()) == plain
    assert gzip.decompress((tmp_path / "a.json.gz").read_bytes()) == plain
    assert digest(tmp_path / "a.json.gz") == digest(tmp_path / "b.json.gz")
    lines = plain.decode().split("\n")
    assert lines[0] == "[" and lines[-2] == "]" and lines[-1] == ""
    assert all(line.endswith(",") for line in lines[1:-3]) and not lines[-3].endswith(",")
    assert len(lines) == 2000 + 3


@pytest.mark.slow  # ingest, claims and hoax over a 2,000-entity dump
def test_ingest_reads_every_entity_and_statement(synthetic):
    _, counts, lake, reports = synthetic
    report = reports["ingest"]
    assert (report.entities, report.rejects, report.triples) == (ENTITIES, 0, counts["statements"])
    entities = lake.read("entities")
    assert entities.where("type = 'property'").count() == len(generator().PROPERTIES)
    assert entities.where(F.array_contains("instance_of", "Q5")).count() == counts["by_kind"]["person"]
    triples = lake.read("triples")
    kinds = {r.value_type for r in triples.select("value_type").distinct().collect()}
    assert kinds >= {"wikibase-entityid", "time", "quantity", "string", "monolingualtext", "globecoordinate",
                     "somevalue", "novalue"}
    assert {r.rank for r in triples.select("rank").distinct().collect()} == {"preferred", "normal", "deprecated"}
    assert triples.where(F.col("end_time").isNotNull()).count() > 100


@pytest.mark.slow  # ingest, claims and hoax over a 2,000-entity dump
def test_claims_of_many_relations_with_every_conflict_kind(synthetic):
    _, _, lake, reports = synthetic
    report = reports["claims"]
    claims = lake.read("claims")
    one_hop = {r.relation for r in claims.where("hop = 1").select("relation").distinct().collect()}
    two_hop = {r.relation for r in claims.where("hop = 2").select("relation").distinct().collect()}
    assert report.one_hop > 1000 and len(one_hop) >= 40, sorted(one_hop)
    assert report.two_hop > 300 and len(two_hop) >= 20, sorted(two_hop)
    assert {"P22/P22", "P57/P569", "P26/P25"} <= two_hop  # family inference and a date answer
    kinds = {r.kind: r["count"] for r in lake.read("conflicts").groupBy("kind").count().collect()}
    assert set(kinds) == {"factual", "temporal", "semantic"} and kinds["factual"] == report.claims
    assert kinds["temporal"] == claims.where("changes_over_time").count() > 100
    # the graph has the history the filters exist for
    reasons = {r.reason for r in lake.read("claims_stats").where("hop = 1").collect()}
    assert {"kept", "ambiguous: several objects", "ended before the reference date", "deprecated statement",
            "not the preferred statement", "object has no label"} <= reasons
    two_hop_reasons = {r.reason for r in lake.read("claims_stats").where("hop = 2").collect()}
    assert {"first hop: ambiguous: several objects", "second hop: ended before the reference date"} <= two_hop_reasons


@pytest.mark.slow  # ingest, claims and hoax over a 2,000-entity dump
def test_hoax_questions_of_every_reasoning_type(spark, cfg, synthetic):
    _, _, lake, reports = synthetic
    report = reports["hoax"]
    assert report.questions > 500
    assert set(report.by_reasoning) == {"bridge entity", "temporal", "geographical", "comparison", "intersection"}
    assert min(report.by_reasoning.values()) >= 0.05 * report.questions, report.by_reasoning
    violations = check_counts(spark, lake, cfg, PROJECT / "notebooks" / "hoax_checks.sql")
    assert violations == dict.fromkeys(
        ["premise_stated", "premise_true_of_subject", "premise_not_real", "contradicts_nothing", "hop_not_stated",
         "hop_not_unique", "bad_options", "option_names_subject", "idk_unbalanced", "premise_unproven",
         "intersection_both", "comparison_tie"], 0)
    questions = lake.read("hoax_questions").where("source = 'wikidata'").collect()
    assert len(questions) == report.questions
    assert all(options_problems(q.options, q.idk_index) == [] for q in questions)
    # every premise proven false: by a one-value relation, over several of them, or (a shared
    # border) by two countries the graph puts on different continents
    spec = load_spec()
    assert all(q.premise_proof.statement_ids and q.premise_property in
               (spec.functional_premises if q.premise_proof.kind == PROOF_FUNCTIONAL else spec.disjoint_premises)
               for q in questions)
    borders = [q for q in questions if q.premise_proof.kind == PROOF_DISJOINT]
    assert borders and all(q.premise_property == "P47" and "no continent in common" in q.explanation
                           for q in borders)
    # two people one of whom died before the other was born: never married, nor advisor and student
    lives = [q for q in questions if q.premise_proof.kind == PROOF_LIFESPAN]
    assert lives and {q.premise_property for q in lives} <= {"P26", "P184"}
    assert all("never lived at the same time" in q.explanation and " died " in q.explanation for q in lives)
    # premises on the second hop: on the entity the chain ends at, asked through both phrases
    on_answer = [q for q in questions if q.pattern == SECOND_HOP]
    assert len(on_answer) >= 0.05 * len(questions)
    for q in on_answer:
        assert q.premise_subject == q.hops[1].object_id != q.bridge_id and q.question.startswith("Which ")
        assert q.options[q.option_roles.index("near_miss")] == q.premise_subject_label == q.near_miss
        assert q.near_miss not in q.question
    # comparisons: which of two comes first, the premise's description against a true chain's
    comparisons = [q for q in questions if q.pattern == "comparison"]
    assert len(comparisons) >= 0.05 * len(questions)
    for q in comparisons:
        assert q.reasoning_type == "comparison" and len(q.hops) == 4 and q.hops[3].subject_id != q.bridge_id
        premise_year, partner_year = (int(re.match(r"-?\d+", h.value).group()) for h in (q.hops[1], q.hops[3]))
        assert premise_year != partner_year  # so the tie option is false
        near_miss = q.options[q.option_roles.index("near_miss")]
        assert near_miss.casefold() == q.near_miss.casefold() and near_miss.casefold() in q.question.casefold()
        # the near miss is the one first by the graph: the other chain's description (the
        # explanation's first words) if its date is earlier
        partner = q.explanation.split(" is ", 1)[0]
        assert (near_miss == partner) == (partner_year < premise_year), q.question
    # intersections: one thing both facts' objects would be; the first fact's relation has one value
    intersections = [q for q in questions if q.pattern == "intersection"]
    assert len(intersections) >= 0.05 * len(questions)
    for q in intersections:
        assert q.reasoning_type == "intersection" and len(q.hops) == 2 and q.hops[0].object_id != q.hops[1].object_id
        assert q.premise_subject == q.hops[0].subject_id and q.premise_object == q.hops[1].object_id
        assert q.premise_proof.statement_ids == [q.hops[0].statement_id]
    # dated bridges: a former value at a year inside its period, said in the description
    dated = [q for q in questions if q.hops[0].at is not None]
    assert dated and all(q.reasoning_type in ("temporal", "comparison") for q in dated)
    for q in dated:
        assert re.search(rf" in {q.hops[0].at}\b", q.question) and f" in {q.hops[0].at} was " in q.explanation
    assert len({q.premise_property for q in questions}) >= 4
    assert max(report.idk_positions.values()) - min(report.idk_positions.values()) <= \
        len({(q.reasoning_type, q.asked_property) for q in questions})


@pytest.mark.slow  # ingest, claims and hoax over a 2,000-entity dump
def test_a_lifespan_proof_that_the_graph_no_longer_gives_is_found(spark, cfg, synthetic, tmp_path):
    """A lifespan premise's proof (one died before the other was born) fails premise_unproven
    once both are given a death known only to the century (no year to compare, though the
    latest known death is unchanged), and once both are given a death after the other's birth."""
    _, _, lake, _ = synthetic
    copy = copy_lake(spark, lake.location("hoax_questions").rsplit("/", 1)[0], tmp_path / "lake")
    question = copy.read("hoax_questions").where(F.col("premise_proof.kind") == PROOF_LIFESPAN) \
        .orderBy("question_id").first()
    triples = copy.read("triples")
    assert check_counts(spark, copy, cfg, PROJECT / "notebooks" / "hoax_checks.sql")["premise_unproven"] == 0
    deaths = triples.where(F.col("property") == "P570").limit(1)

    def with_deaths(value, precision):
        planted = None
        for side in (question.premise_subject, question.premise_object):
            row = deaths.withColumn("statement_id", F.lit(f"planted-{side}")).withColumn("subject_id", F.lit(side)) \
                .withColumn("value", F.lit(value)).withColumn("time_precision", F.lit(precision)) \
                .withColumn("rank", F.lit("normal"))
            planted = row if planted is None else planted.unionByName(row)
        copy.write(triples.unionByName(planted).localCheckpoint(), "triples", partition_by=["value_type"])
        return check_counts(spark, copy, cfg, PROJECT / "notebooks" / "hoax_checks.sql")["premise_unproven"]

    triples = triples.localCheckpoint()  # the copy's triples are overwritten below
    assert with_deaths("1700", 7) >= 1  # the 18th century: that side's death has no year
    assert with_deaths("2020-01-01", 11) >= 1  # neither died before the other was born


@pytest.mark.slow  # ingest, claims and hoax over a 2,000-entity dump
def test_a_border_proof_that_the_graph_no_longer_gives_is_found(spark, cfg, synthetic, tmp_path):
    """A border premise's proof (two countries on different continents) fails premise_unproven
    once the false object is also put on the bridge's continent, and premise_stated once the
    border is stated the other way round (false object to bridge)."""
    _, _, lake, _ = synthetic
    copy = copy_lake(spark, lake.location("hoax_questions").rsplit("/", 1)[0], tmp_path / "lake")
    question = copy.read("hoax_questions").where(F.col("premise_proof.kind") == PROOF_DISJOINT) \
        .orderBy("question_id").first()
    triples = copy.read("triples")
    bridge_continent = triples.where((F.col("subject_id") == question.premise_subject)
                                     & (F.col("property") == "P30")).first()
    planted = [triples.where(F.col("statement_id") == bridge_continent.statement_id)
               .withColumn("statement_id", F.lit("planted-continent"))
               .withColumn("subject_id", F.lit(question.premise_object)),
               triples.where(F.col("statement_id") == bridge_continent.statement_id)
               .withColumn("statement_id", F.lit("planted-border")).withColumn("property", F.lit("P47"))
               .withColumn("subject_id", F.lit(question.premise_object))
               .withColumn("object_id", F.lit(question.premise_subject))]
    copy.write(triples.unionByName(planted[0]).unionByName(planted[1]).localCheckpoint(), "triples",
               partition_by=["value_type"])
    found = check_counts(spark, copy, cfg, PROJECT / "notebooks" / "hoax_checks.sql")
    assert found["premise_unproven"] >= 1 and found["premise_stated"] >= 1


@pytest.mark.slow  # ingest, claims and hoax over a 2,000-entity dump
def test_premises_tried_per_chain_bounds_the_checks_and_counts_the_rest(spark, cfg, synthetic, tmp_path):
    """A chain yields one question, the first of its candidates in seeded order that passes
    every check, so only its first few are checked against the graph. One tried: none is
    passed over; all tried: none is left untried; every run counts every candidate once, and
    a question at a smaller bound is the same question (text and options) at a larger one."""
    _, _, lake, _ = synthetic
    bridge = "source = 'wikidata' AND pattern IN ('bridge', 'second hop')"

    def asked(at):
        return {r.question_id: (r.question, tuple(sorted(r.options)), r.premise_object)
                for r in at.read("hoax_questions").where("source = 'wikidata'").collect()}

    def stats(at):  # per reason, both hops' candidates together: they compete for one question per chain
        rows = at.read("hoax_stats").where(bridge).groupBy("reason").agg(F.sum("candidates").alias("n")).collect()
        return {r.reason: r.n for r in rows}

    def capped(cap):
        root = tmp_path / f"lake-{cap}"
        at = copy_lake(spark, lake.location("hoax_questions").rsplit("/", 1)[0], root)
        run_hoax(spark, at, cfg.with_overrides([f"lake.root={root}", f"hoax.premises_tried_per_chain={cap}"]))
        return asked(at), stats(at)

    default, default_stats = asked(lake), stats(lake)
    one, one_stats = capped(1)
    every, every_stats = capped(10_000)
    assert sum(one_stats.values()) == sum(default_stats.values()) == sum(every_stats.values())
    assert one_stats.get("another premise chosen for the chain", 0) == 0 and NOT_TRIED not in every_stats
    assert one_stats[NOT_TRIED] > default_stats[NOT_TRIED] > 0
    assert one.items() <= default.items() <= every.items()
    assert len(one) > 0.9 * len(every) and len(default) > 0.97 * len(every)
