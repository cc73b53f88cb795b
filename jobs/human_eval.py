"""Entry point for schedulers: misbench human-eval export|import ..."""
import sys

from misbench.cli import main

if __name__ == "__main__":
    sys.exit(main(["human-eval", *sys.argv[1:]]))
