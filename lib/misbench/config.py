"""Configuration: YAML profiles under conf/, merged base <- profile <- command-line overrides.

A profile is a name (``local`` -> ``conf/local.yaml``) or a path to a YAML file. Settings are
read with dotted keys (``cfg.get("ingest.max_reject_rate")``); code never embeds locations,
thresholds or templates that a user may want to change.
"""
from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, Iterable

import yaml

_MISSING = object()


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message names the culprit."""


def conf_dir() -> Path:
    """Where the YAML files live: $MISBENCH_CONF_DIR, ./conf, or the project's own conf/."""
    candidates = []
    if os.environ.get("MISBENCH_CONF_DIR"):
        candidates.append(Path(os.environ["MISBENCH_CONF_DIR"]))
    candidates.append(Path.cwd() / "conf")
    candidates.append(Path(__file__).resolve().parents[2] / "conf")
    for candidate in candidates:
        if (candidate / "base.yaml").is_file():
            return candidate
    raise ConfigError(
        "cannot find conf/base.yaml; run from the project folder or set MISBENCH_CONF_DIR"
    )


def project_dir() -> Path:
    """The project root (parent of conf/): relative defaults such as the demo dump resolve here."""
    return conf_dir().parent


def load_yaml(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def deep_merge(base: dict, override: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


# Sections whose keys are names with dots in them (Spark's settings), not nested sections.
DOTTED_NAME_SECTIONS = (("spark", "conf"),)


class Config:
    """Nested settings with dotted-key access."""

    def __init__(self, data: dict, profile: str = "custom"):
        self.data = data
        self.profile = profile

    def get(self, key: str, default: Any = _MISSING) -> Any:
        node: Any = self.data
        for part in key.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif default is _MISSING:
                raise ConfigError(f"missing setting '{key}' (profile {self.profile})")
            else:
                return default
        return node

    def with_overrides(self, assignments: Iterable[str]) -> "Config":
        """Apply ``key.path=value`` strings; values are parsed as YAML (numbers, lists, null).
        Below a section whose keys are dotted names (``spark.conf``), the rest of the key is
        one name: ``spark.conf.spark.sql.shuffle.partitions=4`` sets Spark's setting."""
        data = copy.deepcopy(self.data)
        for assignment in assignments:
            if "=" not in assignment:
                raise ConfigError(f"override '{assignment}' is not of the form key.path=value")
            key, raw = assignment.split("=", 1)
            parts = key.strip().split(".")
            if not all(parts):
                raise ConfigError(f"override '{assignment}' has an empty key part")
            for section in DOTTED_NAME_SECTIONS:
                if tuple(parts[:len(section)]) == section and len(parts) > len(section) + 1:
                    parts = [*section, ".".join(parts[len(section):])]
            node = data
            for part in parts[:-1]:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    raise ConfigError(f"override '{assignment}': '{part}' is not a section")
            node[parts[-1]] = yaml.safe_load(raw)
        return Config(data, self.profile)


def _profile_layer(directory: Path, profile: str) -> tuple[dict, str]:
    path = Path(profile)
    if not path.suffix:
        path = directory / f"{profile}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in directory.glob("*.yaml") if p.stem != "base")
        raise ConfigError(f"unknown profile '{profile}' (known: {', '.join(known)})")
    return load_yaml(path), path.stem


def load_config(profile: str = "local", overrides: Iterable[str] = ()) -> Config:
    """base.yaml, then each profile of ``profile`` (a name, a YAML path, or several separated
    by commas, merged left to right), then the overrides. A profile named alone brings the
    one it ``extends`` beneath it (``paper`` extends ``local``); in a list the first profile
    sets the environment, so ``databricks,paper`` keeps the cluster's settings."""
    directory = conf_dir()
    data = load_yaml(directory / "base.yaml")
    names = [name.strip() for name in str(profile).split(",") if name.strip()]
    if not names:
        raise ConfigError("--profile names no profile")
    layers = []
    for name in names:
        layer, stem = _profile_layer(directory, name)
        layers.append((stem, layer))
    if len(names) == 1:
        seen = {layers[0][0]}
        while layers[0][1].get("extends"):
            parent = str(layers[0][1]["extends"])
            layer, stem = _profile_layer(directory, parent)
            if stem in seen:
                raise ConfigError(f"profile '{names[0]}': 'extends' goes round in a circle through '{stem}'")
            seen.add(stem)
            layers.insert(0, (stem, layer))
    for _, layer in layers:
        data = deep_merge(data, {k: v for k, v in layer.items() if k != "extends"})
    return Config(data, ",".join(stem for stem, _ in layers)).with_overrides(overrides)
