"""MLflow tracking of evaluation runs: where the store is, and what a run records.

Tracking URI from the profile (``mlflow.tracking_uri``): null on the embedded default means a
sqlite store with local artifacts inside the lake folder (``<lake>/_mlflow``), so one folder
holds a run's tables and its runs; ``databricks`` on Databricks (the workspace). Open the
local store with ``mlflow ui --backend-store-uri sqlite:///<lake>/_mlflow/mlflow.db``.
"""
from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from pathlib import Path

import psutil
from filelock import FileLock

from misbench.config import Config, ConfigError
from misbench.lake import Lake

log = logging.getLogger(__name__)


def store_location(cfg: Config) -> tuple[str, str | None]:
    """(tracking URI, artifact location for a new experiment or None for the server's)."""
    configured = cfg.get("mlflow.tracking_uri", None)
    if configured:
        return str(configured), cfg.get("mlflow.artifact_location", None)
    root = str(cfg.get("lake.root", "") or "")
    if cfg.get("lake.backend") != "delta_rs" or not root or "://" in root:
        raise ConfigError("mlflow.tracking_uri is not set, and the lake is not a local folder to hold a "
                          "sqlite store: set mlflow.tracking_uri (e.g. databricks)")
    folder = Path(root).expanduser().resolve() / "_mlflow"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}", (folder / "artifacts").as_uri()


def open_experiment(cfg: Config) -> str:
    """Point MLflow at the profile's store; the experiment's id (created on first use)."""
    import mlflow

    uri, artifacts = store_location(cfg)
    mlflow.set_tracking_uri(uri)
    name = cfg.get("mlflow.experiment")
    # Two commands opening a new local store at once would both create its tables (sqlite:
    # "table _alembic_tmp_experiments already exists"): one at a time, under a lock beside it.
    local = uri.startswith("sqlite:///")
    with FileLock(uri[len("sqlite:///"):] + ".lock") if local else contextlib.nullcontext():
        found = mlflow.get_experiment_by_name(name)
        if found is None:
            try:
                mlflow.create_experiment(name, artifact_location=artifacts)
            except mlflow.exceptions.MlflowException as error:  # another command created it first
                if "RESOURCE_ALREADY_EXISTS" not in str(error.error_code):
                    raise
            found = mlflow.get_experiment_by_name(name)
    mlflow.set_experiment(experiment_id=found.experiment_id)
    return found.experiment_id


OWNER_TAG = "misbench.owner"
# A run still RUNNING whose command ran on another machine (a job cluster since gone) is left
# to that machine's next evaluation this long, then counted abandoned.
ELSEWHERE_ABANDONED_AFTER_S = 24 * 3600


def owner_tags() -> dict[str, str]:
    """The tag that names the command a run belongs to (host and process), so that another
    command on the same experiment can tell a live run from one a kill left RUNNING."""
    return {OWNER_TAG: f"{socket.gethostname()}:{os.getpid()}"}


def _owner_alive(owner: str, started_ms: int) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname():
        return time.time() - started_ms / 1000 < ELSEWHERE_ABANDONED_AFTER_S
    try:  # the same process, not a later one that was given its id
        return psutil.Process(int(pid)).create_time() <= started_ms / 1000 + 1
    except (psutil.NoSuchProcess, ValueError):
        return False


def close_abandoned_runs(experiment_id: str) -> int:
    """Runs of the experiment still RUNNING, left by a killed evaluation, are marked FAILED;
    runs of a command still running (another model evaluated on the same lake at the same
    time) are left alone. A nested run goes with its parent's owner; a run without an owner
    (an older misbench) counts as abandoned."""
    import mlflow

    client = mlflow.MlflowClient()
    running = client.search_runs([experiment_id], "attributes.status = 'RUNNING'")
    by_id = {run.info.run_id: run for run in running}

    def abandoned(run) -> bool:
        parent = run.data.tags.get("mlflow.parentRunId")
        if OWNER_TAG not in run.data.tags and parent:
            return abandoned(by_id.get(parent) or client.get_run(parent))
        owner = run.data.tags.get(OWNER_TAG)
        return not (owner and _owner_alive(owner, run.info.start_time))

    stale = [run for run in running if abandoned(run)]
    for run in stale:
        client.set_terminated(run.info.run_id, status="FAILED")
    return len(stale)


def log_tables_as_inputs(lake: Lake, names: list[str]) -> None:
    """Each input Delta table as an MLflow dataset with its location and version."""
    import mlflow
    from mlflow.data.delta_dataset_source import DeltaDatasetSource
    from mlflow.data.meta_dataset import MetaDataset

    for name in names:
        if not lake.exists(name):
            continue
        version = lake.version(name)
        location = lake.location(name)
        source = DeltaDatasetSource(path=location, delta_table_version=version) if "/" in location \
            else DeltaDatasetSource(delta_table_name=location, delta_table_version=version)
        mlflow.log_input(MetaDataset(source, name=name, digest=f"v{version}"), context="evaluation")


def log_parquet(frame, artifact_file: str) -> None:
    """A pandas frame as a parquet artifact."""
    import mlflow
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / artifact_file
        frame.to_parquet(path, index=False)
        mlflow.log_artifact(str(path))
