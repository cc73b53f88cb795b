"""Hand-written texts standing in for generated ones, for the bench and evaluation tests."""
import datetime as dt

from misbench.generate.stage import GENERATED_SCHEMA
from misbench.quality.stage import QC_COLUMNS, QC_SCHEMA

STYLES = ["wikipedia", "news", "blog"]


def handmade_texts(spark, lake, failing: dict):
    """Texts for every slot (claim, kind, style in STYLES) of the claims, stating the claim or
    its conflict; ``failing`` maps (claim index, kind, style or None for all) to a failed
    verdict. Writes evidence, evidence_qc (the quality stage's columns: the verdict, a reason
    where it failed, no scores) and evidence_slots."""
    claims = lake.read("claims").orderBy("claim_id").collect()
    conflicts = {(r.claim_id, r.kind): r for r in lake.read("conflicts").collect()}
    now = dt.datetime.now(dt.timezone.utc)
    evidence, verdicts, slots = [], [], []
    for index, claim in enumerate(claims):
        kinds = ["correct"] + [k for k in ("factual", "temporal", "semantic") if (claim.claim_id, k) in conflicts]
        for kind in kinds:
            statement = claim.statement if kind == "correct" else conflicts[(claim.claim_id, kind)].statement
            for style in STYLES:
                evidence_id = f"{claim.claim_id}-{kind}-{style}"
                text = f"{statement} This {style} text says so in plain words, for the benchmark's test."
                evidence.append((evidence_id, claim.claim_id, claim.hop, kind, style, text, "hand", "hand", None, None,
                                 None, 0, 0, "stop", 0.0, None, 1, "hand", None, now))
                passed = not (failing.get((index, kind, style)) or failing.get((index, kind, None)))
                verdicts.append(tuple({
                    "evidence_id": evidence_id, "claim_id": claim.claim_id, "hop": claim.hop, "kind": kind,
                    "style": style, "passed": passed, "reasons": [] if passed else ["hand-marked as failing"],
                    "failed_filter": None if passed else "entailment", "checked_at": now,
                }.get(column) for column in QC_COLUMNS))
                slots.append((claim.claim_id, claim.hop, kind, style, 1, passed, passed,
                               evidence_id if passed else None))
    lake.write(spark.createDataFrame(evidence, GENERATED_SCHEMA), "evidence")
    lake.write(spark.createDataFrame(verdicts, QC_SCHEMA), "evidence_qc")
    lake.write(spark.createDataFrame(slots, "claim_id string, hop int, kind string, style string, attempts long, "
                                            "passed boolean, first_attempt_passed boolean, evidence_id string"),
               "evidence_slots")
    return claims


# claim 0: no temporal text passes; claim 1: its correct entry fails (no pair); claim 2: its
# factual entry fails (no single or pair for factual, style and detection still there).
FAILING = {(0, "temporal", None): True, (1, "correct", "wikipedia"): True, (2, "factual", "wikipedia"): True}




def bench_lake_from_dump(spark, lake, cfg, dump: str, failing: dict | None = None):
    """Ingest a dump, build claims, stand hand-written texts in for generated ones and build
    the questions: a benchmark without a generation run (tests and benchmarks)."""
    from misbench.bench.job import run_bench
    from misbench.claims.job import run_claims
    from misbench.ingest.job import run_ingest

    run_ingest(spark, lake, cfg, [str(dump)])
    claims = run_claims(spark, lake, cfg)
    handmade_texts(spark, lake, failing or {})
    return claims, run_bench(spark, lake, cfg)
