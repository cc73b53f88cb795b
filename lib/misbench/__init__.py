"""misbench: misinformation benchmarks for LLMs, built from Wikidata on Spark and Delta."""

__version__ = "0.1.0"
