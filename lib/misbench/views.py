"""Analyst views: one SQL file each in ``conf/views/``, over the product tables by their bare
names. ``misbench views`` stores them in the lake (catalog views on Databricks; on a folder
lake their definitions, in an internal table, registered wherever ``misbench sql`` runs)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from misbench.config import Config, ConfigError, conf_dir
from misbench.lake import Lake

log = logging.getLogger(__name__)


@dataclass
class ViewsReport:
    stored: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)  # view -> why not yet (a table missing)


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
