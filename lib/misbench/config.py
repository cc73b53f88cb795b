"""Configuration: YAML profiles under conf/, merged base <- profile <- command-line overrides.

A profile is a name (``local`` -> ``conf/local.yaml``) or a path to a YAML file. Settings are
read with dotted keys (``cfg.get("ingest.max_reject_rate")``); code never embeds locations,
thresholds or templates that a user may want to change.
"""
from __future__ import annotations

import copy
import datetime as dt
import difflib
import functools
import os
from pathlib import Path
from typing import Any, Iterable

import jsonschema
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
# Sections whose keys are names, not settings: they take any key (every other key must be one
# that base.yaml names).
OPEN_SECTIONS = ("spark.conf", "llm.models", "llm.fake.replies", "llm.vllm.server_options", "evaluate.prompts")
# Of those, the ones whose values are texts (a reply, a prompt's name).
TEXT_SECTIONS = ("llm.fake.replies", "evaluate.prompts")
# A judge's LLM section: overrides of the top-level ``llm`` section, checked against it (any
# subset of its keys).
LLM_OVERRIDES = ("quality.entailment.llm_judge.llm", "hoax.evaluate.judge.llm")
# Settings named for a quantity (durations, sizes, GPU shares): a number even where the default
# is a whole one (split_mb=0.5, gpus_per_task=0.5, progress_seconds=2.5).
QUANTITY_SUFFIXES = ("seconds", "seconds_per_request", "_mb", "gpus_per_task")
# What a setting whose default is null takes beside null (a null says nothing of its type).
NULL_DEFAULT_TYPES = {
    "spark.master": "string", "spark.remote": "string", "lake.root": "string", "lake.catalog": "string",
    "lake.schema": "string", "lake.internal_schema": "string", "log.dir": "string", "llm.server.dir": "string",
    "llm.server.omp_threads": "integer", "llm.client.max_concurrency": "integer", "llm.llama_cpp.n_threads": "integer", "llm.vllm.served_name": "string",
    "llm.endpoint": "string", "llm.endpoint_key_env": "string", "llm.openai.model": "string",
    "generate.sampling.max_tokens": "integer", "quality.threads": "integer", "evaluate.limit": "integer",
    "hoax.countries": ("array", "string"), "hoax.evaluate.limit": "integer", "mlflow.tracking_uri": "string",
    "mlflow.artifact_location": "string",
}
# Settings that take another type beside their default's ("auto", or true / false; a package
# name, or null for a model folder).
ALSO_ACCEPTS = {"llm.llama_cpp.extra_buffer_types": ("boolean",), "quality.similarity.model_package": ("null",),
                # a median of ratings may fall between two (2.5)
                "quality.human_eval.entails_at": ("number",), "quality.human_eval.conflicts_at": ("number",)}
_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"),
               (dict, "object"))
_TYPE_WORDS = {"boolean": "true or false", "integer": "a whole number", "number": "a number", "string": "a text",
               "array": "a list", "object": "a section of settings", "null": "null"}


def _json_type(value: Any, key: str) -> str:
    kind = next(name for python, name in _JSON_TYPES if isinstance(value, python))
    # Quantities may be fractional whatever their default: durations, sizes, GPU shares.
    if kind == "integer" and key.rsplit(".", 1)[-1].endswith(QUANTITY_SUFFIXES):
        return "number"
    return kind


def settings_schema(defaults: dict, path: str = "", complete: bool = True, base: dict | None = None) -> dict:
    """The JSON Schema of the settings, read off their defaults (base.yaml): every key named
    there and no other (except in OPEN_SECTIONS), each value of its default's type (a null
    default's: NULL_DEFAULT_TYPES). ``complete``: every key present (a section set whole with
    --set must keep them all); a judge's LLM overrides name only what they change. ``base``:
    the whole of base.yaml (``defaults`` at the top)."""
    base = defaults if base is None else base
    properties = {}
    for key, value in defaults.items():
        key_path = f"{path}.{key}" if path else str(key)
        if key_path in OPEN_SECTIONS:
            properties[str(key)] = {"type": "object"}
            if key_path in TEXT_SECTIONS:
                properties[str(key)]["additionalProperties"] = {"type": "string"}
        elif key_path in LLM_OVERRIDES:
            properties[str(key)] = settings_schema(base["llm"], "llm", complete=False, base=base)
        elif isinstance(value, dict):
            properties[str(key)] = settings_schema(value, key_path, complete, base)
        else:
            properties[str(key)] = _value_schema(value, key_path)
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if complete:
        schema["required"] = list(properties)
    return schema


def _value_schema(value: Any, key_path: str) -> dict:
    """One setting's schema: its default's type (a null default's from NULL_DEFAULT_TYPES), the
    types ALSO_ACCEPTS adds, and for a list its items' type: a list of texts takes texts only
    ([en, no] would read "no" as false)."""
    if value is None:
        if key_path not in NULL_DEFAULT_TYPES:
            raise ConfigError(f"base.yaml: '{key_path}' has a null default; name its type in "
                              "misbench.config.NULL_DEFAULT_TYPES")
        named = NULL_DEFAULT_TYPES[key_path]  # a type, or (array, its items' type)
        kind, item = named if isinstance(named, tuple) else (named, None)
        kinds, items = [kind, "null"], {item} - {None}
    else:
        kinds = [_json_type(value, key_path), *ALSO_ACCEPTS.get(key_path, ())]
        items = {_json_type(item, key_path) for item in value} if isinstance(value, list) else set()
    schema = {"type": kinds if len(kinds) > 1 else kinds[0]}
    if len(items) == 1:
        schema["items"] = {"type": items.pop()}
    return schema


# A whole number is a Python int: JSON Schema's "integer" also takes 2.0, which would reach
# code that counts with it.
_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)))


@functools.lru_cache(maxsize=4)
def _validator(base_path: Path, modified: float) -> jsonschema.protocols.Validator:
    return _Validator(settings_schema(load_yaml(base_path)))


def expected_types(path: list[str]) -> list[str]:
    """The JSON types the setting at ``path`` takes ([] where it is not one base.yaml names)."""
    base_path = conf_dir() / "base.yaml"
    node = _validator(base_path, base_path.stat().st_mtime).schema
    for part in path:
        inner = node.get("properties", {}).get(part)
        if inner is None and isinstance(node.get("additionalProperties"), dict):
            inner = node["additionalProperties"]  # a value of a section of names
        node = inner
        if node is None:
            return []
    kinds = node.get("type", [])
    return kinds if isinstance(kinds, list) else [kinds]


def _leaves(value: Any, path: str) -> list[str]:
    """The full keys under ``path`` (a section set by --set a.b.c=1 is named a.b.c)."""
    if isinstance(value, dict) and value:
        return [leaf for key, inner in value.items() for leaf in _leaves(inner, f"{path}.{key}")]
    return [path]


# Settings an earlier misbench had under another name: the check names where each went.
MOVED_SETTINGS = {
    "evaluate.yes_option": "llm.answer_words.yes_word",
    "evaluate.no_option": "llm.answer_words.no_word",
    # 2026-12-06: models are called through standard OpenAI-compatible servers (misbench.llm).
    "llm.engine_server.dir": "llm.server.dir",
    "llm.engine_server.idle_seconds": "llm.server.idle_seconds",
    "llm.engine_server.start_timeout_seconds": "llm.server.start_timeout_seconds",
    "llm.engine_server.omp_threads": "llm.server.omp_threads",
    "llm.openai.max_concurrency": "llm.client.max_concurrency",
    "llm.openai.timeout_seconds": "llm.client.timeout_seconds",
    "llm.openai.retries": "llm.client.retries",
    "llm.vllm.engine_options": "llm.vllm.server_options (vllm serve options)",
    "llm.engine_host": "nowhere: every model runs in its server (llm.backend)",
    "llm.llama_cpp.workers": "nowhere: one llama.cpp server per machine serves every task",
    "llm.vllm.engine_in_process": "nowhere: vLLM runs as vllm serve",
    "llm.openai.backoff_seconds": "nowhere: the openai library's backoff",
}


def check_settings(data: dict, origin: str) -> None:
    """Refuse a key that base.yaml does not name, or a value not of its default's type,
    naming the key's full path and where it came from (``origin``: the profiles, --set)."""
    base_path = conf_dir() / "base.yaml"
    problems, missing = [], {}
    for error in _validator(base_path, base_path.stat().st_mtime).iter_errors(data):
        where = ".".join(str(part) for part in error.absolute_path)
        if error.validator == "additionalProperties":
            section = error.schema.get("properties", {})
            for key in sorted(set(error.instance) - set(section), key=str):
                name = f"{where}.{key}" if where else str(key)
                close = difflib.get_close_matches(str(key), list(section), n=1)
                leaves = _leaves(error.instance[key], name)
                hint = f" (did you mean '{where + '.' if where else ''}{close[0]}'?)" if close and len(leaves) == 1 else ""
                problems += [f"unknown setting '{leaf}'" + (f" (moved to '{MOVED_SETTINGS[leaf]}')"
                                                            if leaf in MOVED_SETTINGS else hint) for leaf in leaves]
        elif error.validator == "required":
            missing.setdefault(where, set()).update(key for key in error.validator_value if key not in error.instance)
        elif error.validator == "type":
            wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
            quote = (" (YAML reads yes, no, on and off as true and false: quote the text)"
                     if isinstance(error.instance, bool) and "string" in wanted else "")
            problems.append(f"setting '{where}' is {_shown(error.instance)}; expected "
                            + " or ".join(_TYPE_WORDS[kind] for kind in wanted) + quote)
        else:  # not produced by settings_schema, kept so that nothing passes unreported
            problems.append(f"setting '{where}': {error.message}")
    problems += [f"section '{where}' lacks {', '.join(sorted(keys))} (a section set whole keeps every key)"
                 for where, keys in missing.items()]
    if problems:
        problems = sorted(problems)
        more = f"; and {len(problems) - 12} more" if len(problems) > 12 else ""
        raise ConfigError(f"{origin}: " + "; ".join(problems[:12]) + more)


def _shown(value: Any) -> str:
    """A value as the user wrote it ('a text', null, true, [1, 2]), not as Python prints it."""
    if isinstance(value, str):
        return repr(value)
    return yaml.safe_dump(value, default_flow_style=True, width=200).strip().removesuffix("...").strip()


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
        assignments = list(assignments)
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
            node[parts[-1]] = _parsed(raw, expected_types(parts))
        if assignments:
            check_settings(data, f"profile {self.profile} with its overrides")
        if isinstance(data.get("llm"), dict):
            data["llm"] = pointed_at_endpoint(data["llm"])
        return Config(data, self.profile)


def pointed_at_endpoint(llm: dict, own: dict | None = None) -> dict:
    """``llm`` with a judge's ``own`` section merged over it, and ``llm.endpoint`` read: the one
    setting for a server misbench did not start, it reads as backend openai with that base_url,
    the model the one it serves (unless ``llm.openai.model`` is set alongside), its key only from
    ``llm.endpoint_key_env`` (never another API's key sent to it). It is then spent, so that a
    judge's own section may still name another backend. Applied at load and to a judge's
    section."""
    if own:
        if own.get("endpoint") and "model" not in (own.get("openai") or {}):
            llm = deep_merge(llm, {"openai": {"model": None}})  # the judge's endpoint's own model
        llm = deep_merge(llm, own)
    if not llm.get("endpoint"):
        return llm
    llm = copy.deepcopy(llm)
    llm["openai"] = {**llm.get("openai", {}), "base_url": str(llm["endpoint"]),
                     "api_key_env": str(llm.get("endpoint_key_env") or "")}
    llm["backend"], llm["endpoint"] = "openai", None
    return llm


def _parsed(raw: str, kinds: list[str]) -> Any:
    """A --set value as YAML (numbers, lists, null), except where the setting takes a text:
    a setting that takes only a text gets the text as written (quotes removed; ``null`` where
    it takes null), and one that takes a text among other types gets it where YAML reads
    something it does not take (``claims.reference_date=2025-01-01``, ``lake.root=2026``,
    ``llm.answer_words.yes_word=Yes``, ``claims.enrich.user_agent=bot #2 (contact)``)."""
    text = raw.strip()
    quoted = len(text) > 1 and text[0] == text[-1] and text[0] in "'\""
    if "string" in kinds and set(kinds) <= {"string", "null"} and not quoted:
        return None if text in ("null", "~") and "null" in kinds else text
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        if "string" in kinds:
            return text
        raise ConfigError(f"override value {raw!r} is not valid YAML ({exc.problem})") from exc
    if "string" not in kinds or isinstance(value, str):
        return value
    if value is None:  # null, an empty value or a comment: kept as written where a text is
        return None if "null" in kinds or not text or text in ("null", "~") else text
    kind = "date" if isinstance(value, (dt.date, dt.datetime)) else _json_type(value, "")
    fits = kind in kinds or (kind == "integer" and "number" in kinds)
    return value if fits else text


def _dates_as_text(node: Any) -> Any:
    """A profile file's dates as the text they were written as: every date setting is a text."""
    if isinstance(node, dict):
        return {key: _dates_as_text(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_dates_as_text(value) for value in node]
    return node.isoformat() if isinstance(node, (dt.date, dt.datetime)) else node


def _profile_layer(directory: Path, profile: str) -> tuple[dict, str]:
    path = Path(profile)
    if not path.suffix:
        path = directory / f"{profile}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in directory.glob("*.yaml") if p.stem != "base")
        raise ConfigError(f"unknown profile '{profile}' (known: {', '.join(known)})")
    return _dates_as_text(load_yaml(path)), path.stem


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
    stems = ",".join(stem for stem, _ in layers)
    check_settings(data, f"profile {stems}")
    return Config(data, stems).with_overrides(overrides)
