"""Entry point for schedulers (Databricks spark_python_task, spark-submit): misbench views."""
import sys

from misbench.cli import main

if __name__ == "__main__":
    sys.exit(main(["views", *sys.argv[1:]]))
