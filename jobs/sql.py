"""Entry point for schedulers: misbench sql "<SQL>" (e.g. a report step after a job)."""
import sys

from misbench.cli import main

if __name__ == "__main__":
    sys.exit(main(["sql", *sys.argv[1:]]))
