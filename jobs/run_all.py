"""Entry point for schedulers: misbench run-all (every stage in one task, on one cluster)."""
import sys

from misbench.cli import main

if __name__ == "__main__":
    sys.exit(main(["run-all", *sys.argv[1:]]))
