"""Entry point for schedulers (Databricks spark_python_task, spark-submit): misbench import-hoax."""
import sys

from misbench.cli import main

if __name__ == "__main__":
    sys.exit(main(["import-hoax", *sys.argv[1:]]))
