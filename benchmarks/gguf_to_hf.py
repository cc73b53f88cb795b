"""Convert a GGUF model (e.g. one assembled from the packaged chunks) into a Hugging Face
model folder that vLLM loads, offline. Weights are dequantized (bfloat16 by default).

    python benchmarks/gguf_to_hf.py MODEL.gguf OUT_DIR [--dtype bfloat16]
"""
import argparse
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("gguf", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(args.gguf.parent), args.gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, torch_dtype=args.dtype)
    # The weights are dequantized already; drop the GGUF marker so they can be saved.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
