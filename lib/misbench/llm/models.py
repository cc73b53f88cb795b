"""The embedded default's model files: GGUF models shipped inside PyPI packages (raw byte
chunks, one package each) are assembled once into a cache folder; any local GGUF also works."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Sequence


def _package_chunks(package: str) -> list[Path]:
    # Located without importing: some model packages import heavy optional dependencies.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"model package '{package}' is not installed (pip install {package.replace('_', '-')})"
        )
    folder = Path(list(spec.submodule_search_locations)[0]) / "data"
    chunks = sorted(folder.glob("*.bin"))
    if not chunks:
        raise FileNotFoundError(f"model package '{package}' holds no data/*.bin chunks")
    return chunks


def assemble_gguf(name: str, packages: Sequence[str], cache_dir: str) -> Path:
    """Concatenate the packages' chunks, in package order, into <cache_dir>/<name>.gguf once.
    Written to a temporary name and renamed, so concurrent workers never read half a file."""
    target = Path(os.path.expanduser(cache_dir)) / f"{name}.gguf"
    chunks = [chunk for package in packages for chunk in _package_chunks(package)]
    size = sum(chunk.stat().st_size for chunk in chunks)
    if target.is_file() and target.stat().st_size == size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.partial")
    with open(partial, "wb") as out:
        for chunk in chunks:
            with open(chunk, "rb") as source:
                while data := source.read(16 * 1024 * 1024):
                    out.write(data)
    with open(partial, "rb") as check:
        if check.read(4) != b"GGUF":
            partial.unlink()
            raise ValueError(f"model '{name}': assembled file is not GGUF")
    os.replace(partial, target)
    return target


def model_path(config: dict, llm_settings: dict) -> tuple[str, Path]:
    model = config["model"]
    if str(model).endswith(".gguf"):
        return Path(model).stem, Path(os.path.expanduser(model))
    catalog = llm_settings.get("models", {})
    if model not in catalog:
        raise ValueError(f"llm.llama_cpp.model '{model}' is neither a .gguf path nor in llm.models")
    return model, assemble_gguf(model, catalog[model]["packages"], llm_settings["cache_dir"])


def use_extra_buffer_types(setting, system_info: str) -> bool:
    """Whether llama.cpp may place weights in its "extra buffer types" (weights repacked for
    AMX or wider SIMD kernels). ``auto``: yes, unless this llama.cpp was compiled with AMX
    kernels: their repacking crashes the first decode of some quantised models (an upstream
    bug seen with Qwen2.5 Q4_K_M on Intel Xeon with AMX)."""
    if isinstance(setting, bool):
        return setting
    if str(setting).lower() != "auto":
        raise ValueError(f"llm.llama_cpp.extra_buffer_types must be auto, true or false, not {setting!r}")
    return "AMX_INT8 = 1" not in system_info


def chat_template(path: Path) -> str:
    """The chat template inside a GGUF file (read with its vocabulary only, in a second)."""
    from llama_cpp import Llama

    model = Llama(model_path=str(path), vocab_only=True, verbose=False)
    template = model.metadata.get("tokenizer.chat_template")
    if not template:
        raise ValueError(f"{path.name} holds no chat template (tokenizer.chat_template)")
    return template
