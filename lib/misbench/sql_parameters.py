"""The settings that SQL run by ``misbench sql`` may name as parameter markers. The checks in
``notebooks/*.sql`` name them instead of repeating the settings, which would go stale the day
a setting changes."""
from __future__ import annotations

import re

from pyspark.sql import DataFrame, SparkSession

from misbench.config import Config
from misbench.hoax.spec import load_spec

# Comments and string literals first: a marker's name there is no marker.
_NOT_CODE = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^'\\]|\\.|'')*'", re.DOTALL)
_MARKER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def query_parameters(cfg: Config, sql: str) -> dict[str, str]:
    """The markers ``sql`` names, filled in from ``cfg``, for ``spark.sql(sql, args=...)``:

    - ``:reference_date``: claims.reference_date, the day a fact must hold;
    - ``:functional_premises``: the relations of conf/hoax.yaml's functional_premises,
      comma-separated (``split(:functional_premises, ',')`` is the array): a string, so a
      Databricks editor's text parameter can take it too;
    - ``:disjoint_premises``: conf/hoax.yaml's disjoint_premises as relation:via pairs,
      comma-separated ("P184:lifespan,P26:lifespan,P47:P30"), likewise a string.

    Markers ``sql`` does not name are left out, so a statement without any (SHOW TABLES) runs
    as it would without parameters."""
    named = set(_MARKER.findall(_NOT_CODE.sub(" ", sql)))
    parameters = {}
    if "reference_date" in named:
        parameters["reference_date"] = str(cfg.get("claims.reference_date"))
    if "functional_premises" in named:
        parameters["functional_premises"] = ",".join(sorted(load_spec().functional_premises))
    if "disjoint_premises" in named:
        parameters["disjoint_premises"] = ",".join(
            f"{relation}:{d.via}" for relation, d in sorted(load_spec().disjoint_premises.items()))
    return parameters


def run_sql(spark: SparkSession, cfg: Config, sql: str, **parameters: str) -> DataFrame:
    """``sql`` with the markers it names filled in from ``cfg`` (``parameters`` override them)."""
    return spark.sql(sql, args={**query_parameters(cfg, sql), **parameters} or None)
