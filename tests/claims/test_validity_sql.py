"""The README's validity queries (notebooks/validity_checks.sql) give 0 on the claims built
from the real slice and from a replicated dump (the slice three times, fresh subject ids)."""
import bz2
import re

import pytest

from misbench.claims.job import run_claims
from misbench.ingest.job import run_ingest
from misbench.lake import DeltaRsLake
from tests.conftest import PROJECT, SLICE_JSON, check_counts, copy_lake, require_slice

pytestmark = pytest.mark.slow  # claims of the real slice and of a replicated dump

CHECKS = PROJECT / "notebooks" / "validity_checks.sql"
_ID = re.compile(r'^\{"type":"item","id":"Q(\d+)"')


def replicated_dump(path, copies):
    lines = [line for line in SLICE_JSON.read_text(encoding="utf-8").split("\n") if line.startswith("{")]
    with bz2.open(path, "wt", encoding="utf-8") as out:
        out.write("[\n")
        for copy in range(copies):
            for line in lines:
                out.write(_ID.sub(lambda m: f'{{"type":"item","id":"Q{int(m.group(1)) + copy * 10_000_000}"',
                                  line, count=1) + "\n")
        out.write("]\n")
    return path


@pytest.mark.parametrize("copies", [1, 3])
def test_validity_queries_find_nothing(spark, cfg, slice_claims_root, tmp_path, copies):
    require_slice()
    root = tmp_path / "lake"
    if copies == 1:  # the slice as every test run claims it once
        lake = copy_lake(spark, slice_claims_root, root)
    else:
        run_cfg = cfg.with_overrides([f"lake.root={root}"])
        lake = DeltaRsLake(spark, root=str(root))
        run_ingest(spark, lake, run_cfg, [str(replicated_dump(tmp_path / "replicated.json.bz2", copies))])
        run_claims(spark, lake, run_cfg)
    assert lake.row_count("claims") >= 5 * copies  # the checks look at real claims
    found = check_counts(spark, lake, cfg, CHECKS)
    assert len(found) == 7 and all(v == 0 for v in found.values()), found
