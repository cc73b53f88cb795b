"""The Spark session, built from the profile's ``spark`` section.

- ``spark.remote``: a Spark Connect URL (Databricks Connect, pysail, a Connect server).
- ``spark.master``: a master URL for a session this process owns (``local[*]`` by default).
- neither: the session the platform already runs (Databricks jobs and notebooks).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from misbench.config import Config, conf_dir
from misbench.logs import log_file

# The project's own log4j configuration, for a conf folder (MISBENCH_CONF_DIR) without one.
PACKAGE_LOG4J = Path(__file__).resolve().parents[2] / "conf" / "log4j2.properties"


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
    extra_conf = {
        # A Python worker that crashes (segfault, abort) dumps its Python traceback, which
        # Spark puts into the error the driver sees (and misbench into its log file).
        "spark.python.worker.faulthandler.enabled": "true",
        **{key: str(value) for key, value in extra_conf.items()},
    }
    if master:
        builder = builder.master(master)
    logfile = log_file(cfg) if master and master.startswith("local") else None
    log4j = next((path for path in (conf_dir() / "log4j2.properties", PACKAGE_LOG4J) if path.is_file()), None)
    if logfile is not None and log4j is not None:
        # Spark's log (and the Java stack traces of failed tasks) to the log file, not the terminal.
        logfile.parent.mkdir(parents=True, exist_ok=True)
        # Quoted: Spark splits these options on spaces, and honours quotes.
        options = f'"-Dlog4j2.configurationFile=file:{log4j}" "-Dmisbench.log.file={logfile}"'
        extra_conf["spark.driver.extraJavaOptions"] = " ".join(
            part for part in (extra_conf.get("spark.driver.extraJavaOptions"), options) if part)
    for key, value in extra_conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if master and master.startswith("local") and (logfile is None or log4j is None):
        spark.sparkContext.setLogLevel("ERROR")
    return spark
