"""Refresh from a newer dump: dump versions, claims_changes, questions retired with the version
they left, export and evaluation of a benchmark version. Real Spark, real Delta, the real slice
and a second version of it written by benchmarks/synthetic_dump.py."""
from __future__ import annotations

import json

import pytest

from misbench import versions
from misbench.bench.job import run_bench
from misbench.claims.job import run_claims
from misbench.ingest.job import run_ingest
from tests.bench.handmade import handmade_texts
from tests.conftest import PROJECT, SLICE_ENTITIES, SLICE_JSON, copy_lake


def write_next_version(*args, **kwargs) -> dict:
    import importlib.util

    spec = importlib.util.spec_from_file_location("synthetic_dump", PROJECT / "benchmarks" / "synthetic_dump.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_next_version(*args, **kwargs)


def edited_slice(out, renamed: str, dropped: tuple[str, str, str]) -> None:
    """The real slice with entity ``renamed``'s English label changed and the statement
    (subject, property, object) ``dropped`` taken out."""
    subject, prop, target = dropped
    lines = [line.rstrip(",\n") for line in SLICE_JSON.read_text().splitlines() if line.strip() not in ("[", "]", "")]
    entities = [json.loads(line) for line in lines]
    for entity in entities:
        if entity["id"] == renamed:
            entity["labels"]["en"]["value"] += " Renamed"
        if entity["id"] == subject:
            statements = entity["claims"][prop]
            entity["claims"][prop] = [st for st in statements if
                                      ((st["mainsnak"].get("datavalue") or {}).get("value") or {}).get("id") != target]
            assert len(entity["claims"][prop]) < len(statements)
    out.write_text("[\n" + ",\n".join(json.dumps(e) for e in entities) + "\n]\n")


def test_a_next_version_of_a_dump_edits_the_share_of_facts_asked_for(tmp_path):
    newer = tmp_path / "newer.json"
    edits = write_next_version(SLICE_JSON, newer, changed=0.2, added=0.05, removed=0.05, seed=3)
    assert edits["facts"] > 1000
    for kind, share in (("changed", 0.2), ("added", 0.05), ("removed", 0.05)):
        assert abs(edits[kind] / edits["facts"] - share) < share / 2, (kind, edits)
    again = tmp_path / "again.json"
    assert write_next_version(SLICE_JSON, again, changed=0.2, added=0.05, removed=0.05, seed=3) == edits
    assert again.read_bytes() == newer.read_bytes()
    assert len(json.loads(newer.read_text())) == SLICE_ENTITIES


def test_an_older_dump_is_refused_unless_asked_for(spark, lake):
    versions.record_dump(lake, "20260105", ["wikidata-20260105-all.json.bz2"])
    versions.check_dump_order(lake, "20260105", allow_older=False)  # the same dump again: fine
    versions.check_dump_order(lake, "20260112", allow_older=False)  # a newer one: fine
    with pytest.raises(versions.OlderDump, match="20260101 is older than 20260105.*--allow-older-dump"):
        versions.check_dump_order(lake, "20260101", allow_older=False)
    versions.check_dump_order(lake, "20260101", allow_older=True)
    assert versions.record_dump(lake, "20260101", ["wikidata-20260101-all.json.bz2"]) == 2
    assert versions.latest_version(lake) == "20260101"
    # a dump the lake took before a later one cannot come back, even when asked for
    for allow in (False, True):
        with pytest.raises(versions.OlderDump, match="was taken before 20260101"):
            versions.check_dump_order(lake, "20260105", allow_older=allow)
    assert versions.record_dump(lake, "20260101", ["wikidata-20260101-all.json.bz2"]) == 2  # again: same place
    assert [r["dump_version"] for r in versions.recorded(lake)] == ["20260105", "20260101"]


def test_the_dump_identity_is_its_date_else_its_checksum(tmp_path):
    from misbench.ingest.reader import dump_identity

    assert dump_identity(["/x/wikidata-20250106-all.json.bz2"]) == "20250106"
    assert dump_identity(["s3://b/wikidata-20250106-all.json.bz2", "s3://b/part2-20250106.json.bz2"]) == "20250106"
    with pytest.raises(ValueError, match="different dates"):
        dump_identity(["/x/wikidata-20250106-all.json", "/x/wikidata-20250113-all.json"])
    first, second = tmp_path / "latest-all.json", tmp_path / "other.json"
    first.write_text('[\n{"id": "Q1"}\n]\n')
    second.write_text('[\n{"id": "Q2"}\n]\n')
    assert dump_identity([str(first)]).startswith("sha256-")
    assert dump_identity([str(first)]) == dump_identity([str(first)])
    assert dump_identity([str(first)]) != dump_identity([str(second)])


@pytest.mark.slow
def test_a_refresh_records_what_changed_and_retires_questions(spark, cfg, bench_root, tmp_path):
    """bench_root: the slice's claims and hand-written texts, then bench (version 1, the slice's
    checksum). A week later a share of its facts changed, some were added and removed."""
    from misbench.evaluate.job import run_evaluate, run_export

    lake = copy_lake(spark, bench_root, tmp_path / "lake")
    run_cfg = cfg.with_overrides([f"lake.root={lake.root}"])
    first = versions.latest_version(lake)
    assert first.startswith("sha256-") and versions.claims_version(lake) == first
    before_questions = {r.claim_id: r for r in lake.read("questions").collect()}
    assert all(r.version_entered == first and r.version_left is None for r in before_questions.values())
    before_claims = {r.claim_id: r for r in lake.read("claims").collect()}
    def current_texts():
        return {(r.claim_id, r.kind, r.style): (r.evidence_id, r.text)
                for r in lake.read("bench_texts").where("version_left IS NULL").collect()}

    before_texts = current_texts()
    fake = run_cfg.with_overrides(["llm.backend=fake", "evaluate.commit_rows=64"])
    (evaluated,) = run_evaluate(spark, lake, fake, settings=["probe"])
    assert evaluated.answered_now == len(before_questions)

    # A week later: one claim's subject is renamed (its statements change, same claims), one
    # claim's fact is gone from the graph.
    one_hop = sorted((c for c in before_claims.values() if c.hop == 1), key=lambda c: c.claim_id)
    renamed = one_hop[0].subject_id
    dropped = next(c for c in one_hop if c.subject_id != renamed and c.object_id)
    newer = tmp_path / "wikidata-20260105-slice.json"
    edited_slice(newer, renamed, (dropped.subject_id, dropped.relation, dropped.object_id))
    run_ingest(spark, lake, run_cfg, [str(newer)])
    assert versions.latest_version(lake) == "20260105"
    report = run_claims(spark, lake, run_cfg)
    # The refresh's generation, by hand: texts for every slot, failing where they failed before.
    failed_before = {(r.claim_id, r.kind, r.style) for r in lake.read("evidence_qc").where("NOT passed").collect()}
    index = {r.claim_id: i for i, r in enumerate(lake.read("claims").orderBy("claim_id").collect())}
    handmade_texts(spark, lake, {(index[c], kind, style): True for c, kind, style in failed_before if c in index})

    changes = {r.claim_id: r for r in lake.read("claims_changes").where("dump_version = '20260105'").collect()}
    after_claims = {r.claim_id: r for r in lake.read("claims").collect()}
    assert set(changes) == set(before_claims) | set(after_claims)
    by_change = {c: {k for k, r in changes.items() if r.change == c} for c in versions.CHANGES}
    assert report.changes == {c: len(ids) for c, ids in by_change.items()}
    assert by_change["removed"] == set(before_claims) - set(after_claims)
    assert by_change["added"] == set(after_claims) - set(before_claims)
    assert by_change["changed"] and by_change["unchanged"], report.changes
    assert {c.claim_id for c in one_hop if c.subject_id == renamed} <= by_change["changed"]
    assert dropped.claim_id in by_change["removed"]
    for claim_id in by_change["unchanged"]:
        old, new = before_claims[claim_id], after_claims[claim_id]
        assert (old.statement, old.object_id, old.object_label) == (new.statement, new.object_id, new.object_label)
    for claim_id, row in changes.items():
        claim = after_claims.get(claim_id) or before_claims[claim_id]
        assert (row.subject_id, row.relation) == (claim.subject_id, claim.relation)

    run_bench(spark, lake, run_cfg)
    questions = lake.read("questions").where("source = 'wikidata'")
    rows = questions.collect()
    assert len({r.question_id for r in rows}) == len(rows), "question ids are unique over every version"
    current = {r.claim_id: r for r in rows if r.version_left is None}
    retired = {r.claim_id: r for r in rows if r.version_left == "20260105"}
    assert by_change["unchanged"] & set(before_questions) & set(current)
    assert by_change["changed"] & set(before_questions) and by_change["removed"] & set(before_questions)
    # unchanged claims keep their question as it was: the same id, letters and version entered
    for claim_id in by_change["unchanged"] & set(before_questions) & set(current):
        old, new = before_questions[claim_id], current[claim_id]
        assert (new.question_id, new.options, new.roles, new.version_entered) == \
            (old.question_id, old.options, old.roles, first)
    # a removed claim's question is retired, not deleted; a changed one's no longer current
    for claim_id in by_change["removed"] & set(before_questions):
        assert claim_id in retired and claim_id not in current
    for claim_id in by_change["changed"] & set(before_questions):
        assert claim_id in retired
        assert claim_id not in current or current[claim_id].question_id != before_questions[claim_id].question_id
    # a model evaluated before is asked only the questions that entered
    entered = {r.question_id for r in rows if r.version_entered == "20260105"}
    assert entered
    (again_evaluated,) = run_evaluate(spark, lake, fake, settings=["probe"])
    assert again_evaluated.answered_now == len(entered) and again_evaluated.items == len(current)
    (older,) = run_evaluate(spark, lake, fake, settings=["probe"], version=first)
    assert older.answered_now == 0 and older.items == len(before_questions)
    metrics = lake.read("eval_metrics").where("setting = 'probe' AND metric = 'accuracy' AND kind IS NULL "
                                              "AND hop IS NULL AND topic IS NULL AND memory IS NULL").collect()
    assert {(r.benchmark_version, r.n) for r in metrics} == {(first, len(before_questions)),
                                                            ("20260105", len(current))}
    # the kept texts are byte-identical
    # the texts of unchanged claims are the same slots, ids and bytes
    unchanged_slots = {slot: text for slot, text in current_texts().items() if slot[0] in by_change["unchanged"]}
    assert unchanged_slots and unchanged_slots == {slot: text for slot, text in before_texts.items()
                                                   if slot[0] in by_change["unchanged"]}

    # each version's questions, as export writes them
    in_first = versions.as_of(lake, questions, first).collect()
    assert {r.question_id for r in in_first} == {r.question_id for r in before_questions.values()}
    in_latest = versions.as_of(lake, questions, "20260105").collect()
    assert {r.claim_id for r in in_latest} == set(current)
    line = run_export(spark, lake, run_cfg, "hf", tmp_path / "export-first", "wikidata", version=first)
    assert f"{len(before_questions)} questions" in line
    with pytest.raises(ValueError, match="not a dump this lake was built from"):
        run_export(spark, lake, run_cfg, "hf", tmp_path / "export-x", "wikidata", version="20990101")

    # the same dump again: a no-op refresh
    recorded_before = sorted(tuple(r) for r in lake.read("claims_changes").collect())
    questions_before = sorted(json.dumps(r.asDict(recursive=True), sort_keys=True, default=str) for r in rows)
    run_ingest(spark, lake, run_cfg, [str(newer)])
    again = run_claims(spark, lake, run_cfg)
    assert again.changes == report.changes  # the version's record stands
    assert sorted(tuple(r) for r in lake.read("claims_changes").collect()) == recorded_before
    run_bench(spark, lake, run_cfg)
    assert sorted(json.dumps(r.asDict(recursive=True), sort_keys=True, default=str)
                  for r in lake.read("questions").where("source = 'wikidata'").collect()) == questions_before
    assert [r["dump_version"] for r in versions.recorded(lake)] == [first, "20260105"]


@pytest.mark.slow
def test_claims_changes_of_a_first_build_are_all_added(spark, cfg, slice_claims_root, tmp_path):
    lake = copy_lake(spark, slice_claims_root, tmp_path / "lake")
    rows = lake.read("claims_changes").collect()
    assert rows and {r.change for r in rows} == {"added"}
    assert {r.dump_version for r in rows} == {versions.latest_version(lake)}
    assert {r.claim_id for r in rows} == {r.claim_id for r in lake.read("claims").collect()}
