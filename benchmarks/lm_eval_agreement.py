"""The exported lm-evaluation-harness task against `misbench evaluate`'s knowledge probe.

    pip install -e '.[lmeval]'
    python benchmarks/lm_eval_agreement.py [--model qwen2.5-coder-0.5b-instruct-q4km] [--questions 0]

Builds questions from the real Wikidata slice with hand-written texts (as the tests do), runs
the probe with ``misbench evaluate`` (llama.cpp, the GGUF model, letters' log-probabilities),
exports the questions with ``misbench export --format lm-eval``, and runs the exported
``misbench_probe`` task in lm-evaluation-harness on the same model in its transformers form
(transformers reads the same GGUF file and dequantises it), with the chat template and the
task's system prompt. Prints both accuracies and the agreement per question; the answers
differ only where quantised and dequantised weights rank two letters differently.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
SLICE = PROJECT / "tests" / "data" / "wikidata-dump-slice-49.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct-q4km")
    parser.add_argument("--questions", type=int, default=0, help="0: all")
    args = parser.parse_args()
    sys.path.insert(0, str(PROJECT / "lib"))
    sys.path.insert(0, str(PROJECT))
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    from misbench.evaluate.job import run_export
    from misbench.config import load_config
    from misbench.evaluate.job import run_evaluate
    from misbench.lake import open_lake
    from misbench.llm.models import model_path
    from misbench.spark import get_spark
    from tests.bench.handmade import bench_lake_from_dump

    work = Path(tempfile.mkdtemp(prefix="misbench-bench-lm-eval-"))
    overrides = ["spark.master=local[2]", f"lake.root={work / 'lake'}", f"llm.llama_cpp.model={args.model}"]
    if args.questions:
        overrides.append(f"evaluate.limit={args.questions}")
    cfg = load_config("local", overrides)
    spark = get_spark(cfg)
    lake = open_lake(spark, cfg)
    bench_lake_from_dump(spark, lake, cfg, str(SLICE))
    (report,) = run_evaluate(spark, lake, cfg, settings=["probe"])
    ours = {r.question_id: r for r in lake.read("eval_responses").where("setting = 'probe'").collect()}
    print(f"misbench evaluate probe: accuracy {report.headline['probe'][1]:.3f} (n={report.headline['probe'][2]})")

    run_export(spark, lake, cfg, "lm-eval", work / "tasks", "wikidata")
    import lm_eval
    from lm_eval.tasks import TaskManager

    _, gguf = model_path(cfg.get("llm.llama_cpp"), cfg.get("llm"))
    system = (work / "tasks" / "misbench_probe.system.txt").read_text()
    results = lm_eval.simple_evaluate(
        model="hf", model_args={"pretrained": str(gguf.parent), "gguf_file": gguf.name, "dtype": "float32"},
        tasks=["misbench_probe"], task_manager=TaskManager(include_path=str(work / "tasks")),
        apply_chat_template=True, system_instruction=system, log_samples=True, device="cpu", batch_size=1)
    samples = results["samples"]["misbench_probe"]
    accuracy = results["results"]["misbench_probe"]["acc,none"]
    letters = ["A", "B", "C", "D", "E"]
    agree, total = 0, 0
    for sample in samples:
        doc = sample["doc"]
        scores = [resp[0] for resp in sample["filtered_resps"]]
        theirs = letters[max(range(len(scores)), key=scores.__getitem__)]
        mine = ours.get(doc["question_id"])
        if mine is None:
            continue
        total += 1
        agree += int(mine.chosen_letter == theirs)
        if mine.chosen_letter != theirs:
            print(f"differs: {doc['question_id']} misbench {mine.chosen_letter} lm-eval {theirs}")
    print(f"lm-eval misbench_probe: accuracy {accuracy:.3f} (n={len(samples)})")
    print(f"agreement per question: {agree}/{total}")
    print(f"lm_eval_agreement {agree / max(1, total):.3f}")


if __name__ == "__main__":
    main()
