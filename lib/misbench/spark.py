"""The Spark session, built from the profile's ``spark`` section.

- ``spark.remote``: a Spark Connect URL (Databricks Connect, pysail, a Connect server).
- ``spark.master``: a master URL for a session this process owns (``local[*]`` by default).
- neither: the session the platform already runs (Databricks jobs and notebooks).
"""
from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from misbench.config import Config


def get_spark(cfg: Config) -> SparkSession:
    remote = cfg.get("spark.remote", None)
    master = cfg.get("spark.master", None)
    extra_conf = cfg.get("spark.conf", {}) or {}
    if remote:
        return SparkSession.builder.remote(remote).getOrCreate()
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # Python workers must run the interpreter that has the project installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(cfg.get("spark.app_name", "misbench"))
    if master:
        builder = builder.master(master)
    for key, value in extra_conf.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    if master and master.startswith("local"):
        spark.sparkContext.setLogLevel("ERROR")
    return spark
