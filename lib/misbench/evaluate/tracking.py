"""MLflow tracking of evaluation runs: where the store is, and what a run records.

Tracking URI from the profile (``mlflow.tracking_uri``): null on the embedded default means a
sqlite store with local artifacts inside the lake folder (``<lake>/_mlflow``), so one folder
holds a run's tables and its runs; ``databricks`` on Databricks (the workspace). Open the
local store with ``mlflow ui --backend-store-uri sqlite:///<lake>/_mlflow/mlflow.db``.
"""
from __future__ import annotations

import logging
from pathlib import Path

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
    found = mlflow.get_experiment_by_name(name)
    experiment_id = found.experiment_id if found else mlflow.create_experiment(name, artifact_location=artifacts)
    mlflow.set_experiment(experiment_id=experiment_id)
    return experiment_id


def close_abandoned_runs(experiment_id: str) -> int:
    """Runs of the experiment still RUNNING, left by a killed evaluation, are marked FAILED
    (evaluations of one lake run one at a time)."""
    import mlflow

    client = mlflow.MlflowClient()
    stale = client.search_runs([experiment_id], "attributes.status = 'RUNNING'")
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


def metric_key(metric: str, row: dict) -> str:
    """An MLflow metric name for a breakdown row: ``success_rate`` or
    ``success_rate/kind_factual/memory_memory``."""
    parts = [metric] + [f"{d}_{row[d]}" for d in ("kind", "hop", "style", "topic", "memory") if row.get(d) is not None]
    return "/".join(str(p).replace(" ", "_") for p in parts)

