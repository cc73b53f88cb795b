"""Runs a killed evaluation left RUNNING are closed; runs of a command still running are not."""
from __future__ import annotations

import subprocess
import sys
import time

import mlflow

from misbench.evaluate import tracking


def test_only_runs_whose_command_has_ended_are_closed(tmp_path):
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    client = mlflow.MlflowClient()
    experiment = client.create_experiment("runs", artifact_location=str(tmp_path / "artifacts"))
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    host = tracking.owner_tags()[tracking.OWNER_TAG].rpartition(":")[0]

    def running(tags):
        return client.create_run(experiment, tags=tags).info.run_id

    live = running(tracking.owner_tags())  # this process: another evaluation still at work
    live_child = running({"mlflow.parentRunId": live})
    killed = running({tracking.OWNER_TAG: f"{host}:{ended.stdout.strip()}"})
    killed_child = running({"mlflow.parentRunId": killed})
    older = running({})  # an older misbench tagged no owner
    elsewhere = running({tracking.OWNER_TAG: "another-machine:123"})  # started just now

    assert tracking.close_abandoned_runs(experiment) == 3
    status = {run: client.get_run(run).info.status for run in (live, live_child, killed, killed_child, older, elsewhere)}
    assert status == {live: "RUNNING", live_child: "RUNNING", killed: "FAILED", killed_child: "FAILED",
                      older: "FAILED", elsewhere: "RUNNING"}
    # a run started before its owner's process did: the id was given to a later process
    assert not tracking._owner_alive(tracking.owner_tags()[tracking.OWNER_TAG], int(time.time() * 1000) - 10**9)
