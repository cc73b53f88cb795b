"""The ingest job end to end on the real Wikidata slice, through real Delta tables."""
import bz2
import gzip
import json

import pytest
from deltalake import DeltaTable

from misbench.cli import EXIT_TOO_MANY_REJECTS, main
from misbench.ingest.job import DumpNotFound, run_ingest
from misbench.lake import DeltaRsLake, is_internal
from tests.conftest import (
    MISBENCH_CLI,
    SLICE_BZ2,
    SLICE_ENTITIES,
    SLICE_ENTITY_VALUED,
    SLICE_JSON,
    SLICE_STATEMENTS,
    kill_after_commits,
    require_slice,
    rerun_in_this_process,
)

pytestmark = pytest.mark.slow  # ingest jobs over the real slice


def table_facts(lake):
    triples = lake.read("triples")
    entities = lake.read("entities")
    return {
        "entities": entities.count(),
        "distinct_ids": entities.select("id").distinct().count(),
        "triples": triples.count(),
        "distinct_statements": triples.select("statement_id").distinct().count(),
        "with_object": triples.where("object_id IS NOT NULL").count(),
        "rejects": lake.read("ingest_rejects").count(),
    }


EXPECTED = {
    "entities": SLICE_ENTITIES,
    "distinct_ids": SLICE_ENTITIES,
    "triples": SLICE_STATEMENTS,
    "distinct_statements": SLICE_STATEMENTS,
    "with_object": SLICE_ENTITY_VALUED,
    "rejects": 0,
}


def test_real_slice_gives_exact_counts_and_a_rerun_changes_nothing(spark, lake, run_cfg):
    require_slice()
    report = run_ingest(spark, lake, run_cfg, [str(SLICE_BZ2)])
    assert (report.entities, report.triples, report.rejects) == (49, SLICE_STATEMENTS, 0)
    assert table_facts(lake) == EXPECTED
    first_versions = {name: lake.version(name) for name in ("entities", "triples")}

    run_ingest(spark, lake, run_cfg, [str(SLICE_BZ2)])
    assert table_facts(lake) == EXPECTED
    assert all(lake.version(n) == v + 1 for n, v in first_versions.items())

    berlin = lake.read("entities").where("id = 'Q64'").first()
    assert berlin.label == "Berlin" and "Q515" in berlin.instance_of
    country = lake.read("triples").where("subject_id = 'Q64' AND property = 'P17'").first()
    assert country.object_id == "Q183" and country.value_type == "wikibase-entityid"
    # triples are partitioned by value_type, so per-relation stages read only what they need
    assert DeltaTable(lake.location("triples")).metadata().partition_columns == ["value_type"]


def test_uncompressed_and_bz2_split_across_tasks_agree(spark, lake, run_cfg):
    require_slice()
    cfg = run_cfg.with_overrides(["ingest.split_mb=0.01"])  # ~40 splits of the 400 KB bz2
    run_ingest(spark, lake, cfg, [str(SLICE_BZ2)])
    blocks = lake.read("ingest_staging").where("kind = 'block' AND line_count > 0").count()
    assert blocks >= 4  # the bz2 file has 5 compressed blocks, read by different tasks
    from_bz2 = sorted(map(tuple, lake.read("triples").collect()))
    # the 3.7 MB of JSON in about 15 splits, each cut inside a line (at the bz2's 0.01 MB it
    # was 370 tasks, most of the test's time)
    run_ingest(spark, lake, cfg.with_overrides(["ingest.split_mb=0.25"]), [str(SLICE_JSON)])
    assert sorted(map(tuple, lake.read("triples").collect())) == from_bz2
    assert table_facts(lake) == EXPECTED


def write_dump(path, entity_lines, compress=None, closing=True):
    text = "[\n" + "\n".join(line + "," for line in entity_lines) + ("\n]\n" if closing else "\n")
    opener = {"bz2": bz2.open, "gz": gzip.open, None: open}[compress]
    with opener(path, "wt", encoding="utf-8") as handle:
        handle.write(text)
    return path


def slice_entity_lines():
    require_slice()
    return [l.rstrip(",") for l in SLICE_JSON.read_text().split("\n")[1:] if l.strip()]


def test_bad_lines_are_quarantined_with_their_line_numbers(spark, lake, run_cfg, tmp_path):
    good = slice_entity_lines()
    bad = {5: '{"type":"item","id":"Q1000001","claims":{"P1":[{"id":"x","rank":"normal"}]}}',
           17: "not json at all",
           31: '{"type":"item"}'}
    lines = list(good)
    for position in sorted(bad):  # position = index among entity lines (file line - 2)
        lines.insert(position, bad[position])
    php_empty = '{"type":"item","id":"Q1000002","labels":[],"descriptions":[],"aliases":[],"claims":[],"sitelinks":[]}'
    lines.append(php_empty)
    lines.append(good[0][: len(good[0]) // 2])  # truncated last line of a partial download
    dump = write_dump(tmp_path / "bad.json.bz2", lines, compress="bz2", closing=False)

    cfg = run_cfg.with_overrides(["ingest.split_mb=0.01", "ingest.max_reject_rate=0.1"])
    report = run_ingest(spark, lake, cfg, [str(dump)])
    assert report.entities == SLICE_ENTITIES + 1 and not report.too_many_rejects
    rejects = sorted((r.line_number, r.reason, r.raw_head[:20])
                     for r in lake.read("ingest_rejects").collect())
    truncated_line = len(lines) + 1
    assert [r[0] for r in rejects] == [7, 19, 33, truncated_line]
    assert "no main snak" in rejects[0][1]
    assert rejects[1][1].startswith("invalid JSON") and rejects[1][2] == "not json at all,"
    assert "without an id" in rejects[2][1]
    assert rejects[3][1].startswith("invalid JSON")
    assert lake.read("entities").where("id = 'Q1000002'").count() == 1
    assert table_facts(lake)["triples"] == SLICE_STATEMENTS


def test_truncated_compressed_file_keeps_what_was_read(spark, lake, run_cfg, tmp_path):
    require_slice()
    data = SLICE_BZ2.read_bytes()
    partial = tmp_path / "partial.json.bz2"
    partial.write_bytes(data[: int(len(data) * 0.7)])
    # What a careful reader can recover: the complete lines before the break.
    decompressor, text = bz2.BZ2Decompressor(), b""
    text = decompressor.decompress(partial.read_bytes())
    complete_lines = text.decode("utf-8", "replace").split("\n")[:-1]
    recoverable = sum(1 for l in complete_lines if l.startswith("{"))

    cfg = run_cfg.with_overrides(["ingest.split_mb=0.01"])
    report = run_ingest(spark, lake, cfg, [str(partial)])
    assert report.entities == recoverable and report.rejects == 1
    reject = lake.read("ingest_rejects").first()
    assert "truncated" in reject.reason and reject.line_number == len(complete_lines) + 1
    assert report.too_many_rejects  # 1 of ~35 lines is far above 0.1%


def test_duplicates_across_files_are_rejected_and_rate_fails_the_job(lake_root, tmp_path, capsys):
    require_slice()
    copy = write_dump(tmp_path / "copy.json.gz", slice_entity_lines(), compress="gz")
    code = main(["ingest", "--lake", str(lake_root), "--dump", str(SLICE_JSON), str(copy),
                 "--set", "spark.master=local[2]"])
    assert code == EXIT_TOO_MANY_REJECTS
    assert "FAILED" in capsys.readouterr().err
    assert main(["sql", "--lake", str(lake_root), "--format", "json",
                 "SELECT count(*) AS n, min(reason) AS reason FROM ingest_rejects"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result[0]["n"] == SLICE_ENTITIES and result[0]["reason"].startswith("duplicate entity")
    # every entity kept once, with its statements once; the first file wins
    assert main(["sql", "--lake", str(lake_root), "--format", "csv",
                 "SELECT count(*) AS n, count(DISTINCT statement_id) AS d FROM triples"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"{SLICE_STATEMENTS},{SLICE_STATEMENTS}"


def test_missing_and_unsupported_inputs_are_clear_errors(spark, lake, run_cfg, tmp_path, capsys):
    with pytest.raises(DumpNotFound, match="no dump file matches"):
        run_ingest(spark, lake, run_cfg, [str(tmp_path / "nothing-*.json.bz2")])
    (tmp_path / "notes.txt").write_text("x")
    assert main(["ingest", "--lake", str(tmp_path / "l"), "--dump", str(tmp_path / "notes.txt")]) == 2
    assert "not a Wikidata JSON dump" in capsys.readouterr().err


def test_glob_of_several_files(spark, lake, run_cfg, tmp_path):
    lines = slice_entity_lines()
    write_dump(tmp_path / "part-1.json.gz", lines[:20], compress="gz")
    write_dump(tmp_path / "part-2.json", lines[20:])
    report = run_ingest(spark, lake, run_cfg, [str(tmp_path / "part-*")])
    assert report.files == 2 and table_facts(lake) == EXPECTED


@pytest.mark.chaos
@pytest.mark.parametrize("kill_after", ["ingest_staging", "entities"])
def test_killed_run_then_rerun_ends_as_a_clean_run(spark, tmp_path, kill_after):
    """kill -9 the job once a given table has been committed, run it again, and compare."""
    require_slice()
    root = tmp_path / "lake"
    command = [*MISBENCH_CLI, "ingest", "--lake", str(root),
               "--dump", str(SLICE_BZ2), "--set", "spark.master=local[2]"]
    marker = root / ("_internal" if is_internal(kill_after) else "") / kill_after / "_delta_log"
    kill_after_commits(command, str(marker), 1, timeout_s=240, poll_s=0.05)
    assert marker.exists(), "the job never reached the kill point"

    code, stderr = rerun_in_this_process(command)
    assert code == 0, stderr[-2000:]
    lake = DeltaRsLake(spark, root=str(root))
    assert table_facts(lake) == EXPECTED
