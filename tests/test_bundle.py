"""The Databricks bundle and the wheel it installs: every job loads into the official job model
(databricks-bundles), tasks point at real entry points in stage order, every variable and job
parameter used is declared, and the wheel installs on the runtime the bundle names without
replacing the runtime's own Spark, Delta or MLflow."""
import email
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml
from databricks.bundles.jobs import Job
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from misbench.cli import COMMANDS
from misbench.pipeline import STAGE_NAMES
from tests.conftest import PROJECT


def _bundle():
    root = yaml.safe_load((PROJECT / "databricks.yml").read_text())
    files = sorted(path for pattern in root["include"] for path in PROJECT.glob(pattern))
    jobs = {}
    for path in files:
        jobs.update({name: (path, job) for name, job in yaml.safe_load(path.read_text())["resources"]["jobs"].items()})
    return root, files, jobs


ROOT, FILES, JOBS = _bundle()
PIPELINE = JOBS["misbench_pipeline"][1]


@pytest.mark.parametrize("name", sorted(JOBS))
def test_every_job_loads_into_the_official_job_model(name):
    job = Job.from_dict(JOBS[name][1])
    assert job.tasks and all(task.task_key for task in job.tasks)


def test_a_misspelt_field_fails_the_official_model():
    task = dict(PIPELINE["tasks"][0])
    task["spark_pyhton_task"] = task.pop("spark_python_task")
    with pytest.raises(ValueError, match="spark_pyhton_task"):
        Job.from_dict({**PIPELINE, "tasks": [task]})


def test_every_task_runs_an_entry_point_of_an_existing_command():
    for path, job in JOBS.values():
        for task in job["tasks"]:
            entry = (path.parent / task["spark_python_task"]["python_file"]).resolve()
            assert entry.is_file() and entry.parent == PROJECT / "jobs", task["task_key"]
            command = re.search(r'main\(\["([a-z-]+)"', entry.read_text()).group(1)
            assert command in COMMANDS, entry.name


def _resolved(text: str) -> str:
    """A parameter with the bundle's variable and job parameter defaults filled in."""
    variables = {name: str(v["default"]) for name, v in ROOT["variables"].items()}
    defaults = {p["name"]: p["default"] for p in PIPELINE["parameters"]}
    text = re.sub(r"\{\{job\.parameters\.([A-Za-z0-9_]+)\}\}", lambda m: str(defaults[m.group(1)]), text)
    return re.sub(r"\$\{var\.([A-Za-z0-9_]+)\}", lambda m: variables[m.group(1)], text)


def test_every_task_passes_arguments_its_command_accepts():
    from misbench.cli import build_parser
    from misbench.config import ConfigError, load_config

    for path, job in JOBS.values():
        for task in job["tasks"]:
            entry = (path.parent / task["spark_python_task"]["python_file"]).resolve()
            command = re.search(r'main\(\["([a-z-]+)"', entry.read_text()).group(1)
            arguments = [_resolved(str(p)) for p in task["spark_python_task"].get("parameters", [])]
            try:
                parsed = build_parser().parse_args([command, *arguments])
            except SystemExit:
                pytest.fail(f"{task['task_key']}: misbench {command} rejects {arguments}")
            assert parsed.profile.split(",")[0] == "databricks", task["task_key"]
            # its profiles and --set lines are settings misbench accepts, of their types
            overrides = [*(parsed.overrides or []), *(getattr(parsed, "overrides_after", None) or [])]
            assert any(o.startswith("lake.catalog=") for o in overrides), task["task_key"]
            cfg = load_config(parsed.profile, overrides)
            if task.get("job_cluster_key") == "gpu":
                assert cfg.get("llm.backend") == "vllm" and parsed.profile == "databricks,databricks_gpu", task["task_key"]
    with pytest.raises(SystemExit):  # the check can fail: a misspelt option is refused
        build_parser().parse_args(["ingest", "--dumps", "x"])
    with pytest.raises(ConfigError, match="generate.gpus_per_tsk"):  # and so is a misspelt setting
        load_config("databricks,databricks_gpu", ["generate.gpus_per_tsk=1"])


def test_the_pipeline_has_a_task_per_stage_with_dependencies_in_stage_order():
    tasks = {task["task_key"]: task for task in PIPELINE["tasks"]}
    stage_of = {key: key.replace("_", "-") for key in tasks}
    assert sorted(stage_of.values()) == sorted(STAGE_NAMES)
    for key, task in tasks.items():
        for dependency in (d["task_key"] for d in task.get("depends_on", [])):
            assert dependency in tasks, f"{key} depends on unknown {dependency}"
            # stage order: what a task waits for comes earlier in the pipeline, so no cycle
            assert STAGE_NAMES.index(stage_of[dependency]) < STAGE_NAMES.index(stage_of[key])
    reached, frontier = set(), ["ingest"]
    while frontier:  # every task is reached from ingest
        current = frontier.pop()
        reached.add(current)
        frontier += [k for k, t in tasks.items() if current in {d["task_key"] for d in t.get("depends_on", [])}]
    assert reached == set(tasks)


def test_gpu_tasks_run_one_after_another():
    # Two model tasks at once on the GPU cluster would load two engines on the same GPUs.
    tasks = {task["task_key"]: task for task in PIPELINE["tasks"]}

    def ancestors(key):
        found, frontier = set(), [key]
        while frontier:
            for dependency in tasks[frontier.pop()].get("depends_on", []):
                if dependency["task_key"] not in found:
                    found.add(dependency["task_key"])
                    frontier.append(dependency["task_key"])
        return found

    gpu = sorted(k for k, t in tasks.items() if t.get("job_cluster_key") == "gpu")
    assert len(gpu) >= 4
    for i, first in enumerate(gpu):
        for second in gpu[i + 1:]:
            assert first in ancestors(second) or second in ancestors(first), (first, second)


def test_every_variable_and_job_parameter_used_is_declared():
    text = "\n".join(path.read_text() for path in [PROJECT / "databricks.yml", *FILES])
    declared = set(ROOT["variables"])
    used = set(re.findall(r"\$\{var\.([A-Za-z0-9_]+)\}", text))
    assert used and used <= declared, used - declared
    assert declared <= used, f"declared, never used: {declared - used}"
    for reference in re.findall(r"\$\{([^}]+)\}", text):
        assert reference.split(".")[0] in {"var", "workspace", "bundle", "resources"}, reference
    parameters = {p["name"] for p in PIPELINE["parameters"]}
    assert set(re.findall(r"\{\{job\.parameters\.([A-Za-z0-9_]+)\}\}", text)) == parameters


def test_schedule_starts_paused_and_api_keys_come_from_a_secret_scope():
    assert PIPELINE["schedule"]["pause_status"] == "PAUSED"
    for cluster in PIPELINE["job_clusters"]:
        for name, value in cluster["new_cluster"].get("spark_env_vars", {}).items():
            if "KEY" in name or "TOKEN" in name:
                assert re.fullmatch(r"\{\{secrets/\$\{var\.secret_scope\}/[a-z_]+\}\}", value), name
    targets = ROOT["targets"]
    assert {"dev", "prod"} <= set(targets) and targets["dev"]["mode"] == "development"
    # production mode is refused without one shared root path
    assert targets["prod"]["mode"] == "production" and targets["prod"]["workspace"]["root_path"]


@pytest.fixture(scope="module")
def wheel_metadata(tmp_path_factory):
    """Build the wheel from a copy of the project files it packages; read its METADATA."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    source.mkdir()
    shutil.copy(PROJECT / "setup.py", source)
    shutil.copytree(PROJECT / "lib", source / "lib", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(work / "dist"), str(source)], check=True, capture_output=True)
    (wheel,) = (work / "dist").glob("misbench-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(archive.read(name))


def _cluster_runtimes():
    variables = ROOT["variables"]
    known = yaml.safe_load((PROJECT / "conf" / "databricks_runtime.yaml").read_text())["runtimes"]
    versions = set()
    for cluster in PIPELINE["job_clusters"]:
        version = cluster["new_cluster"]["spark_version"]
        match = re.fullmatch(r"\$\{var\.([a-z_]+)\}", version)
        versions.add(str(variables[match.group(1)]["default"]) if match else version)
    return {version: known.get(version) for version in versions}


def test_the_wheel_installs_on_the_runtimes_the_bundle_names_without_replacing_their_packages(wheel_metadata):
    runtimes = _cluster_runtimes()
    assert all(runtimes.values()), f"runtime without facts in conf/databricks_runtime.yaml: {runtimes}"
    requires_python = SpecifierSet(wheel_metadata["Requires-Python"])
    requirements = [Requirement(r) for r in wheel_metadata.get_all("Requires-Dist")]
    base = [r for r in requirements if r.marker is None]
    local = [r for r in requirements if r.marker is not None and r.marker.evaluate({"extra": "local"})]
    for version, runtime in runtimes.items():
        assert requires_python.contains(f"{runtime['python']}.0"), (version, str(requires_python))
        packages = {_normal(name): str(v) for name, v in runtime["packages"].items()}
        for requirement in base:
            name = _normal(requirement.name)
            assert name not in {_normal(p) for p in runtime["provides"]}, f"{name} would replace the runtime's"
            if name in packages:
                assert requirement.specifier.contains(packages[name]), (version, str(requirement), packages[name])
        # the code is written against local Spark of the same major version as the runtime's
        pyspark = next(r for r in local if _normal(r.name) == "pyspark")
        assert next(iter(pyspark.specifier)).version.split(".")[0] == str(runtime["spark"]).split(".")[0]
    assert {"pyspark", "delta-spark", "deltalake", "mlflow"} <= {_normal(r.name) for r in local}
    assert requires_python.contains("3.11.0")  # where the tests run


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
