"""misbench: misinformation benchmarks for LLMs, built from Wikidata with Spark and Delta."""
from setuptools import find_packages, setup

setup(
    name="misbench",
    version="0.1.0",
    description="Spark pipeline that builds MisBench/MultiHoax-style misinformation benchmarks from Wikidata",
    python_requires=">=3.11,<3.12",
    package_dir={"": "lib"},
    packages=find_packages("lib"),
    install_requires=[
        # delta-spark 4.4.x caps pyspark at 4.2.0; [connect] brings the Spark Connect client
        # (Databricks serverless / shared clusters, and pysail in tests).
        "pyspark[connect]==4.2.0",
        "delta-spark==4.4.1",
        "deltalake==1.6.6",
        "pandas>=2.2,<3",
        "pyarrow>=15",
        "orjson>=3.10",
        "PyYAML>=6",
        "SPARQLWrapper==2.0.0",
    ],
    extras_require={
        "dev": [
            "pytest>=8",
            "pysail==0.7.2",  # Spark Connect server with Delta support: tests the Spark-native lake
            "oxigraph==0.5.13",  # local SPARQL endpoint for enrichment tests
            "qwikidata==0.4.2",  # baseline in benchmarks/ingest.py
        ],
    },
    entry_points={"console_scripts": ["misbench=misbench.cli:main"]},
)
