"""The stages run unchanged on Spark Connect (as on Databricks serverless and shared
clusters): ingest and claims through pysail's Spark Connect server with Spark-native Delta
tables give the same tables as local Spark with delta-rs."""
import multiprocessing

import pytest

from misbench.claims.job import run_claims
from misbench.ingest.job import run_ingest
from misbench.lake import DeltaRsLake
from tests.conftest import SLICE_BZ2, require_slice

pytestmark = pytest.mark.slow  # ingest and claims on a Spark Connect server


def run_on_spark_connect(root: str, dump: str) -> dict:
    """In a fresh process (a Connect session switches pyspark's whole API to Connect)."""
    import traceback

    from pysail.spark import SparkConnectServer
    from pyspark.sql import SparkSession

    from misbench.config import load_config
    from misbench.lake import SparkDeltaLake

    server = SparkConnectServer()
    server.start(background=True)
    try:
        host, port = server.listening_address
        spark = SparkSession.builder.remote(f"sc://{host}:{port}").getOrCreate()
        cfg = load_config("local", ["lake.backend=spark_delta", f"lake.root={root}"])
        lake = SparkDeltaLake(spark, root=root)
        ingest = run_ingest(spark, lake, cfg, [dump])
        run_claims(spark, lake, cfg)
        return {
            "ingest": (ingest.entities, ingest.triples, ingest.rejects),
            "claims": sorted((r.claim_id, r.statement) for r in lake.read("claims").collect()),
            "conflicts": sorted((r.claim_id, r.kind, r.object_id) for r in lake.read("conflicts").collect()),
        }
    except Exception:  # noqa: BLE001 - reported to the parent test
        return {"error": traceback.format_exc()}
    finally:
        server.stop()


def test_ingest_and_claims_on_spark_connect_match_local_spark(spark, slice_claims_root, tmp_path):
    require_slice()
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        remote = pool.apply(run_on_spark_connect, (str(tmp_path / "connect-lake"), str(SLICE_BZ2)))
    assert "error" not in remote, remote.get("error")

    # local Spark and delta-rs: the same slice, ingested (uncompressed) and claimed once per run
    lake = DeltaRsLake(spark, root=str(slice_claims_root))
    local = (lake.row_count("entities"), lake.row_count("triples"), lake.row_count("ingest_rejects"))
    assert remote["ingest"] == local == (49, 4282, 0)
    assert remote["claims"] == sorted((r.claim_id, r.statement) for r in lake.read("claims").collect())
    assert remote["conflicts"] == sorted(
        (r.claim_id, r.kind, r.object_id) for r in lake.read("conflicts").collect())
