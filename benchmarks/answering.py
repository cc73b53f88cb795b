"""Answering by option log-probabilities against generate-then-parse, on the same items.

    python benchmarks/answering.py [--model MODEL] [--questions 8]

Builds questions from the real Wikidata slice with hand-written texts (as the tests do), then
runs ``misbench evaluate`` twice on the same items (probe, single, pair and detection) with the
same model: (a) ``answer_mode=logprobs``: one forward pass per item, the letters'
log-probabilities; (b) ``answer_mode=generate``: a greedy reply of up to 16 tokens read by the
strict parse. Engine time per item (``latency_s`` of the answers: the model's work, without the
engine load, which only the first pass pays, and without Spark and MLflow overhead, the
same for both) and agreement per item. The last line is ``logprobs_vs_generate r`` with
r = (a items per engine-second) / (b items per engine-second).

``--save-answers FILE`` writes (a)'s answers (setting, item, letter, option log-probs) as JSON;
``--compare-answers FILE`` prints how many of them match an earlier run's file
(``logprob_answers_agree n/N``: the same model served another way must answer the same).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
SLICE = PROJECT / "tests" / "data" / "wikidata-dump-slice-49.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4km")
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--save-answers", help="write the log-prob answers to this JSON file")
    parser.add_argument("--compare-answers", help="an earlier run's --save-answers file")
    args = parser.parse_args()
    sys.path.insert(0, str(PROJECT / "lib"))
    sys.path.insert(0, str(PROJECT))
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    from misbench.config import load_config
    from misbench.evaluate.job import run_evaluate
    from misbench.lake import open_lake
    from misbench.spark import get_spark
    from tests.bench.handmade import bench_lake_from_dump

    lake_root = tempfile.mkdtemp(prefix="misbench-bench-answering-")
    base = ["spark.master=local[2]", f"lake.root={lake_root}", f"llm.llama_cpp.model={args.model}",
            f"evaluate.limit={args.questions}", "evaluate.commit_rows=1000", "evaluate.tasks=2"]
    cfg = load_config("local", base)
    spark = get_spark(cfg)
    lake = open_lake(spark, cfg)
    bench_lake_from_dump(spark, lake, cfg, str(SLICE))
    settings = ["probe", "single", "pair", "detection"]

    timings, answers = {}, {}
    for mode in ("logprobs", "generate"):
        run_cfg = cfg.with_overrides([f"evaluate.answer_mode={mode}"])
        started = time.perf_counter()
        (report,) = run_evaluate(spark, lake, run_cfg, settings=settings)
        rows = lake.read("eval_responses").where(f"answer_mode = '{mode}'").collect()
        answers[mode] = {(r.setting, r.item_id): r for r in rows}
        engine = sum(r.latency_s for r in rows)
        timings[mode] = (engine, len(rows))
        print(f"{mode}: {report.items} items, engine {engine:.1f} s ({engine / len(rows):.2f} s per item), "
              f"wall {time.perf_counter() - started:.1f} s with the evaluation around it, {report.unparsed} unparsed")
    if args.save_answers or args.compare_answers:
        import json

        mine = {f"{setting}/{item}": {"letter": r.chosen_letter, "logprobs": list(r.option_logprobs or [])}
                for (setting, item), r in answers["logprobs"].items()}
        if args.save_answers:
            Path(args.save_answers).write_text(json.dumps(mine, indent=1, sort_keys=True))
        if args.compare_answers:
            earlier = json.loads(Path(args.compare_answers).read_text())
            shared = sorted(set(earlier) & set(mine))
            agree = [k for k in shared if earlier[k]["letter"] == mine[k]["letter"]]
            gaps = [abs(a - b) for k in shared for a, b in zip(earlier[k]["logprobs"], mine[k]["logprobs"])
                    if a is not None and b is not None]
            print(f"log-prob answers: {len(mine)} now, {len(earlier)} before, largest log-prob difference "
                  f"{max(gaps, default=0):.4f}; differing: {sorted(set(shared) - set(agree))}")
            print(f"logprob_answers_agree {len(agree)}/{len(shared)}")
    common = set(answers["logprobs"]) & set(answers["generate"])
    read = [k for k in common if not answers["generate"][k].unparsed]
    same = [k for k in read if answers["generate"][k].chosen_letter == answers["logprobs"][k].chosen_letter]
    for setting in settings:
        keys = [k for k in read if k[0] == setting]
        agree = [k for k in keys if k in same]
        print(f"agreement {setting}: {len(agree)}/{len(keys)} items where the generated reply could be read")
    print(f"generate unparsed: {len(common) - len(read)}/{len(common)}")
    print(f"agreement overall: {len(same)}/{len(read)} ({len(same) / max(1, len(read)):.3f})")
    rate = {mode: items / seconds for mode, (seconds, items) in timings.items()}
    print(f"logprobs_vs_generate {rate['logprobs'] / rate['generate']:.3f}")


if __name__ == "__main__":
    main()
