"""Human evaluation of the automatic filters: a stratified sample out, filled ratings back in.

Annotators rate each sampled text on two 0-2 rubrics (conf/human_eval_rubric.md):
``entailment`` (does the text support the statement it was written for) and ``conflict``
(does a misinformation text contradict the correct evidence; not asked for correct texts).
Back in, the ratings give each annotator's agreement with the majority, Fleiss' kappa per
rubric, and the accuracy of the automatic verdicts against the human labels.
"""
from __future__ import annotations

import math
import statistics
from typing import Mapping, Sequence

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from misbench.ids import seeded_hash

RUBRICS = ("entailment", "conflict")
RATINGS = (0, 1, 2)
NOT_APPLICABLE = "n/a"
STRATUM = ("kind", "style", "hop")
# ``about``: for semantic misinformation, the other entity of the subject's name it describes.
SHEET_FRONT = ["sample_id", "evidence_id", "kind", "style", "hop", "question", "statement", "about",
               "correct_evidence", "text"]


def rating_columns(annotators: int) -> list[str]:
    return [f"{rubric}_{n}" for rubric in RUBRICS for n in range(1, annotators + 1)]


def allocate(counts: Mapping[tuple, int], size: int) -> dict[tuple, int]:
    """Sample size per stratum: proportional to the stratum's rows (largest remainder), every
    non-empty stratum at least one when ``size`` allows, never more than a stratum holds."""
    total = sum(counts.values())
    if total <= size:
        return dict(counts)
    strata = sorted(k for k, n in counts.items() if n > 0)
    floor = 1 if size >= len(strata) else 0
    shares = {k: max(floor, math.floor(size * counts[k] / total)) for k in strata}
    remainders = sorted(strata, key=lambda k: (-(size * counts[k] / total - math.floor(size * counts[k] / total)), k))
    left = size - sum(shares.values())
    while left > 0:
        grown = False
        for key in remainders:
            if left and shares[key] < counts[key]:
                shares[key] += 1
                left -= 1
                grown = True
        if not grown:
            break
    while left < 0:  # the per-stratum floor overshot: take back from the largest shares
        key = max(strata, key=lambda k: (shares[k], k))
        shares[key] -= 1
        left += 1
    return {k: min(v, counts[k]) for k, v in shares.items()}


def sample_rows(qc: DataFrame, evidence: DataFrame, allocation: Mapping[tuple, int], seed: int) -> DataFrame:
    """The sampled texts with what an annotator needs (not the automatic verdicts: annotators
    rate blind). ``qc``: evidence_qc rows eligible for sampling."""
    from pyspark.sql import Window

    quota = qc.sparkSession.createDataFrame(
        [(*key, int(n)) for key, n in allocation.items()], "kind string, style string, hop int, quota int"
    )
    order = seeded_hash(seed, F.col("evidence_id"))
    ranked = qc.join(quota, list(STRATUM)).withColumn(
        "rank", F.row_number().over(Window.partitionBy(*STRATUM).orderBy(order, "evidence_id"))
    ).where(F.col("rank") <= F.col("quota"))
    texts = evidence.select("evidence_id", "text")
    # One correct text per claim and style to compare misinformation with: one that passed
    # quality control where there is one.
    verdicts = qc.select("evidence_id", "passed")
    correct = evidence.where((F.col("kind") == "correct") & F.col("error").isNull()).join(
        verdicts, "evidence_id", "left"
    ).withColumn("pick", F.row_number().over(Window.partitionBy("claim_id", "style").orderBy(
        F.coalesce("passed", F.lit(False)).desc(), "evidence_id"))
    ).where(F.col("pick") == 1).select("claim_id", "style", F.col("text").alias("correct_evidence"))
    rows = ranked.join(texts, "evidence_id").join(correct, ["claim_id", "style"], "left").select(
        "evidence_id", "kind", "style", "hop", "question", F.col("hypothesis").alias("statement"),
        F.col("description").alias("about"),
        F.when(F.col("kind") == "correct", F.lit(NOT_APPLICABLE)).otherwise(F.col("correct_evidence"))
        .alias("correct_evidence"), "text", order.alias("_order"),
    )
    numbered = rows.withColumn("sample_id", F.format_string(
        "S%04d", F.row_number().over(Window.orderBy(*STRATUM, "_order", "evidence_id"))))
    return numbered.select(*SHEET_FRONT)


def blank_sheet(sample: pd.DataFrame, annotators: int) -> pd.DataFrame:
    """The sample with empty rating columns; the conflict rubric is marked n/a for correct texts."""
    sheet = sample[SHEET_FRONT].copy()
    for column in rating_columns(annotators):
        rubric = column.rsplit("_", 1)[0]
        sheet[column] = [NOT_APPLICABLE if rubric == "conflict" and kind == "correct" else ""
                         for kind in sheet["kind"]]
    sheet["notes"] = ""
    return sheet


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    text = str(value).strip()
    return text[:-2] if text.endswith(".0") and text[:-2].isdigit() else text  # Excel gives 2.0


def merge_sheets(sheets: Sequence[pd.DataFrame], annotators: int) -> pd.DataFrame:
    """One sheet from several filled copies (e.g. one per annotator): each rating cell takes the
    copy that filled it; two copies filling one cell differently is an error."""
    columns = rating_columns(annotators)
    for index, sheet in enumerate(sheets):
        missing = [c for c in ["evidence_id", "kind", *columns] if c not in sheet.columns]
        if missing:
            raise ValueError(f"sheet {index + 1} lacks columns {missing}")
    merged = sheets[0].copy()
    merged[columns] = merged[columns].map(_cell)
    position = {evidence_id: i for i, evidence_id in enumerate(merged["evidence_id"])}
    clashes = []
    for sheet in sheets[1:]:
        for _, row in sheet.iterrows():
            if row["evidence_id"] not in position:
                raise ValueError(f"evidence_id {row['evidence_id']} is not in the first sheet's sample")
            at = position[row["evidence_id"]]
            for column in columns:
                value, current = _cell(row[column]), merged.at[at, column]
                if not value or value == current:
                    continue
                if current and current != NOT_APPLICABLE:
                    clashes.append(f"{row['evidence_id']} {column}: {current!r} vs {value!r}")
                else:
                    merged.at[at, column] = value
    if clashes:
        raise ValueError("filled sheets disagree on the same cells: " + "; ".join(clashes[:10]))
    return merged


def parse_ratings(sheet: pd.DataFrame, annotators: int) -> pd.DataFrame:
    """Long ratings: evidence_id, kind, annotator, rubric, rating (0-2). Empty and n/a cells
    are not ratings; anything else that is not 0, 1 or 2 is an error naming the cell."""
    rows, bad = [], []
    for position, record in enumerate(sheet.to_dict("records")):
        for column in rating_columns(annotators):
            rubric, annotator = column.rsplit("_", 1)
            value = _cell(record.get(column))
            if value == "" or value.lower() == NOT_APPLICABLE:
                continue
            if value not in {str(r) for r in RATINGS}:
                bad.append(f"row {position + 2} ({record.get('sample_id', record['evidence_id'])}) "
                           f"{column}: {value!r}")
                continue
            rows.append({"sample_id": record.get("sample_id"), "evidence_id": record["evidence_id"],
                         "kind": record["kind"], "annotator": int(annotator), "rubric": rubric,
                         "rating": int(value)})
    if bad:
        raise ValueError(f"{len(bad)} rating cell(s) are not 0, 1, 2, empty or n/a: " + "; ".join(bad[:10]))
    return pd.DataFrame(rows, columns=["sample_id", "evidence_id", "kind", "annotator", "rubric", "rating"])


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa of items x categories rating counts, the same number of raters per item.
    None where it is undefined (no items, or every rating in one category)."""
    items = [list(row) for row in counts if sum(row) > 0]
    if not items:
        return None
    raters = sum(items[0])
    if raters < 2 or any(sum(row) != raters for row in items):
        raise ValueError("Fleiss' kappa needs the same number (>= 2) of ratings per item")
    n_items = len(items)
    agreement = sum((sum(c * c for c in row) - raters) / (raters * (raters - 1)) for row in items) / n_items
    shares = [sum(row[j] for row in items) / (n_items * raters) for j in range(len(items[0]))]
    chance = sum(p * p for p in shares)
    if chance >= 1.0:
        return None
    return (agreement - chance) / (1.0 - chance)


def _majority(ratings: Sequence[int]) -> int | None:
    top = statistics.multimode(ratings)
    return top[0] if len(top) == 1 and ratings.count(top[0]) * 2 > len(ratings) else None


def _confusion(pairs: list[tuple[bool, bool]]) -> dict[str, int]:
    return {
        "true_positive": sum(a and h for a, h in pairs), "false_positive": sum(a and not h for a, h in pairs),
        "false_negative": sum(h and not a for a, h in pairs), "true_negative": sum(not a and not h for a, h in pairs),
    }


def agreement_report(ratings: pd.DataFrame, qc: pd.DataFrame, annotators: int,
                     entails_at: int, conflicts_at: int) -> pd.DataFrame:
    """metric, rubric, annotator, value, items. ``qc``: evidence_qc rows of the sample
    (evidence_id, kind, entailed, passed)."""
    out: list[dict] = []

    def add(metric, rubric, annotator, value, items):
        out.append({"metric": metric, "rubric": rubric, "annotator": annotator,
                    "value": None if value is None else float(value), "items": int(items)})

    labels: dict[str, dict[str, int]] = {}
    for rubric in RUBRICS:
        part = ratings[ratings["rubric"] == rubric]
        by_item = part.groupby("evidence_id")["rating"].apply(list).to_dict()
        by_pair = {(r.evidence_id, r.annotator): r.rating for r in part.itertuples()}
        majorities = {item: _majority(values) for item, values in by_item.items()}
        for annotator in range(1, annotators + 1):
            judged = [(item, m) for item, m in majorities.items()
                      if m is not None and (item, annotator) in by_pair]
            agreeing = sum(by_pair[(item, annotator)] == m for item, m in judged)
            add("agreement_with_majority", rubric, annotator, agreeing / len(judged) if judged else None, len(judged))
        complete = [values for values in by_item.values() if len(values) == annotators]
        kappa = fleiss_kappa([[values.count(r) for r in RATINGS] for values in complete]) if complete else None
        add("fleiss_kappa", rubric, None, kappa, len(complete))
        labels[rubric] = {item: statistics.median_low(values) for item, values in by_item.items()}

    verdicts = qc.set_index("evidence_id")
    entail_pairs, accept_pairs = [], []
    for item, rating in labels["entailment"].items():
        if item not in verdicts.index:
            continue
        row = verdicts.loc[item]
        human_entails = rating >= entails_at
        if row["entailed"] is not None and not pd.isna(row["entailed"]):
            entail_pairs.append((bool(row["entailed"]), human_entails))
        conflict = labels["conflict"].get(item)
        if row["kind"] == "correct" or conflict is not None:
            accepted = human_entails and (row["kind"] == "correct" or conflict >= conflicts_at)
            accept_pairs.append((bool(row["passed"]), accepted))
    for name, pairs in (("entailment_filter", entail_pairs), ("all_filters", accept_pairs)):
        add("accuracy", name, None, sum(a == h for a, h in pairs) / len(pairs) if pairs else None, len(pairs))
        for metric, count in _confusion(pairs).items():
            add(metric, name, None, count, len(pairs))
    return pd.DataFrame(out, columns=["metric", "rubric", "annotator", "value", "items"])
