"""llama.cpp's extra buffer types (weight repacking) on and off, same build, same run.

    python benchmarks/llama_cpu.py [--model qwen2.5-coder-1.5b-instruct-q4km] [--rounds 3]

Serves the packaged model with misbench's llama.cpp server (misbench.llm.servers) with
``llm.llama_cpp.extra_buffer_types`` false and true, alternating over ``--rounds`` rounds
(this machine is noisy), and measures prompt processing (a ~600-token prompt, one token out)
and generation (greedy, 128 tokens) with 2 threads. Prints the llama.cpp build's CPU
features, tokens/s per setting, and last ``extra_bufts_off_vs_on r`` with r = generation
tokens/s off / on (and the same for prompts on the line before).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4km")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(PROJECT / "lib"))
    import llama_cpp

    from misbench.config import load_config
    import tempfile

    from misbench.llm import SamplingParams
    from misbench.llm.client import model_client
    from misbench.llm.servers import stop_servers

    print("llama.cpp build:", llama_cpp.llama_print_system_info().decode().strip(), flush=True)
    long_prompt = [{"role": "user", "content": "Summarise in one word: " + " ".join(
        f"The river number {i} flows north through the valley and feeds the lake." for i in range(45))}]
    story = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]
    results: dict[bool, dict[str, list[float]]] = {False: {"prompt": [], "gen": []},
                                                   True: {"prompt": [], "gen": []}}
    for _ in range(args.rounds):
        for setting in (False, True):
            llm = load_config("local", [
                f"llm.llama_cpp.model={args.model}", "llm.llama_cpp.n_ctx=2048",
                f"llm.llama_cpp.n_threads={args.threads}", "llm.llama_cpp.n_batch=512",
                f"llm.llama_cpp.extra_buffer_types={str(setting).lower()}",
                f"llm.server.dir={tempfile.mkdtemp(prefix='misbench-bench-servers-')}"]).get("llm")
            engine = model_client(llm, "benchmark")
            engine.generate([story], SamplingParams(temperature=0.0, max_tokens=8))  # warm-up
            started = time.perf_counter()
            prompt = engine.generate([long_prompt], SamplingParams(temperature=0.0, max_tokens=1))[0]
            results[setting]["prompt"].append(prompt.tokens_in / (time.perf_counter() - started))
            started = time.perf_counter()
            out = engine.generate([story], SamplingParams(temperature=0.0, max_tokens=128))[0]
            results[setting]["gen"].append(out.tokens_out / (time.perf_counter() - started))
            stop_servers(llm)
    for setting in (False, True):
        print(f"extra_buffer_types={str(setting).lower():5}  prompt {statistics.median(results[setting]['prompt']):7.1f} "
              f"tokens/s  generation {statistics.median(results[setting]['gen']):6.1f} tokens/s")
    prompt_ratio = statistics.median(results[False]["prompt"]) / statistics.median(results[True]["prompt"])
    gen_ratio = statistics.median(results[False]["gen"]) / statistics.median(results[True]["gen"])
    print(f"extra_bufts_off_vs_on_prompt {prompt_ratio:.3f}")
    print(f"extra_bufts_off_vs_on {gen_ratio:.3f}")


if __name__ == "__main__":
    main()
