"""Entry point for schedulers (Databricks spark_python_task, spark-submit): misbench quality."""
import sys

from misbench.cli import main

if __name__ == "__main__":
    sys.exit(main(["quality", *sys.argv[1:]]))
