"""Analyst views: one SQL file each in ``conf/views/``, over the product tables by their bare
names. ``misbench views`` stores them in the lake (catalog views on Databricks; on a folder
lake their definitions, in an internal table, registered wherever ``misbench sql`` runs)."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from misbench.config import Config, ConfigError, conf_dir
from misbench.hoax.spec import load_spec
from misbench.lake import Lake

log = logging.getLogger(__name__)


@dataclass
class ViewsReport:
    stored: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)  # view -> why not yet (a table missing)


_PARAMETER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def query_parameters(cfg: Config, sql: str) -> dict[str, str | Column]:
    """The settings ``sql`` names as parameter markers, for ``spark.sql(sql, args=...)``:
    ``:reference_date`` (claims.reference_date, the day a fact must hold) and
    ``:functional_premises`` (the relations of conf/hoax.yaml that hold one value at a time).
    The checks in ``notebooks/*.sql`` name them instead of repeating the settings, so they test
    a lake by the settings its stages ran with. Markers ``sql`` does not name are left out:
    statements without markers (SHOW TABLES) then run as they always did."""
    named = set(_PARAMETER.findall(sql))
    parameters: dict[str, str | Column] = {}
    if "reference_date" in named:
        parameters["reference_date"] = str(cfg.get("claims.reference_date"))
    if "functional_premises" in named:
        parameters["functional_premises"] = F.array(*[F.lit(p) for p in sorted(load_spec().functional_premises)])
    return parameters


def view_definitions() -> dict[str, str]:
    """view name -> its SELECT, from ``conf/views/*.sql`` (comments kept, no trailing ';')."""
    folder = conf_dir() / "views"
    definitions = {path.stem: path.read_text(encoding="utf-8").strip().rstrip(";")
                   for path in sorted(folder.glob("*.sql"))}
    if not definitions:
        raise ConfigError(f"no view definitions in {folder}")
    return definitions


def run_views(spark: SparkSession, lake: Lake, cfg: Config) -> ViewsReport:
    """Store every analyst view whose tables exist; list the others with the reason."""
    from pyspark.errors import AnalysisException

    report = ViewsReport()
    lake.register_views_of_tables()  # once for all views: their SQL names tables
    for name, sql in view_definitions().items():
        try:
            lake.store_view(name, sql)
            report.stored.append(name)
        except AnalysisException as exc:
            if "TABLE_OR_VIEW_NOT_FOUND" not in str(exc):
                raise  # a wrong column, a permission: an error, not a wait
            # A view over stages not run yet (no evaluation yet, say): stored by a later run.
            report.waiting[name] = (str(exc).strip().splitlines() or [""])[0][:200]
            log.info("view %s not stored yet: %s", name, report.waiting[name])
    return report
