"""Human-evaluation jobs: export a stratified sample sheet; import filled sheets into a report.

Export samples texts that passed completeness (the model filters are what humans check),
stratified by kind, style and hop. Import merges the filled copies, validates every rating,
and writes ``human_eval_labels`` and ``human_eval_report`` (both replaced on each import: the
sheets are the source of truth, so importing again is safe).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from misbench.config import Config, conf_dir
from misbench.lake import Lake
from misbench.quality import human, sheets

LABELS_SCHEMA = "sample_id string, evidence_id string, kind string, annotator int, rubric string, rating int"
REPORT_SCHEMA = "metric string, rubric string, annotator int, value double, items long"


@dataclass(frozen=True)
class ExportReport:
    rows: int
    strata: int
    csv_path: Path
    xlsx_path: Path


def export_sample(spark: SparkSession, lake: Lake, cfg: Config, folder: Path, size: int | None = None) -> ExportReport:
    settings = cfg.get("quality.human_eval")
    size = int(size or settings["sample_size"])
    if size <= 0:
        raise ValueError("the sample size must be positive")
    if not lake.exists("evidence_qc"):
        raise ValueError("no evidence_qc table yet: run `misbench quality` first")
    eligible = lake.read("evidence_qc").where(F.col("complete"))
    counts = {(r.kind, r.style, int(r.hop)): r["count"] for r in eligible.groupBy(*human.STRATUM).count().collect()}
    if not counts:
        raise ValueError("no complete evidence text to sample: every text failed completeness")
    allocation = human.allocate(counts, size)
    sample = human.sample_rows(eligible, lake.read("evidence"), allocation, int(settings["seed"])).toPandas()
    sheet = human.blank_sheet(sample.sort_values("sample_id").reset_index(drop=True), int(settings["annotators"]))
    rubric = (conf_dir() / "human_eval_rubric.md").read_text(encoding="utf-8")
    csv_path, xlsx_path = sheets.write_sample(sheet, folder, rubric, human.rating_columns(int(settings["annotators"])))
    (folder / "RUBRIC.md").write_text(rubric, encoding="utf-8")
    return ExportReport(rows=len(sheet), strata=sum(1 for n in allocation.values() if n), csv_path=csv_path,
                        xlsx_path=xlsx_path)


def import_sheets(spark: SparkSession, lake: Lake, cfg: Config, paths: Sequence[Path]) -> list[dict]:
    """Read filled sheets, write human_eval_labels and human_eval_report; the report's rows
    (metric, rubric, annotator, value, items; None where not applicable) are returned."""
    settings = cfg.get("quality.human_eval")
    annotators = int(settings["annotators"])
    if not paths:
        raise ValueError("name at least one filled sheet (.csv or .xlsx)")
    merged = human.merge_sheets([sheets.read_sheet(Path(p)) for p in paths], annotators)
    ratings = human.parse_ratings(merged, annotators)
    if ratings.empty:
        raise ValueError("the sheets hold no ratings yet")
    sampled = spark.createDataFrame(pd.DataFrame({"evidence_id": merged["evidence_id"].astype(str)}))
    qc = lake.read("evidence_qc").join(sampled, "evidence_id", "left_semi").select(
        "evidence_id", "kind", "entailed", "passed").toPandas()
    missing = set(merged["evidence_id"]) - set(qc["evidence_id"])
    if missing:
        raise ValueError(f"{len(missing)} sampled text(s) have no evidence_qc row (e.g. {sorted(missing)[0]}): "
                         "was the sheet exported from this lake?")
    report = human.agreement_report(ratings, qc, annotators, int(settings["entails_at"]),
                                    int(settings["conflicts_at"]))
    lake.write(spark.createDataFrame(ratings, LABELS_SCHEMA), "human_eval_labels")
    rows = [{"metric": r.metric, "rubric": r.rubric,
             "annotator": None if pd.isna(r.annotator) else int(r.annotator),
             "value": None if pd.isna(r.value) else float(r.value), "items": int(r.items)}
            for r in report.itertuples()]
    lake.write(spark.createDataFrame([tuple(r.values()) for r in rows], REPORT_SCHEMA), "human_eval_report")
    return rows
