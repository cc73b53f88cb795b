# Databricks notebook source
# MAGIC %md
# MAGIC # Setup shared by the analyst notebooks
# MAGIC Run by the others (`%run ./00_setup`): points the session at the pipeline's catalog and
# MAGIC schema (widgets `catalog`, `schema`; the job's defaults are `main` and `misbench`) and
# MAGIC defines `show(fig)`. Outside Databricks (`misbench sql`, tests) the tables are already
# MAGIC registered by name and the widgets are skipped.

# COMMAND ----------
if "dbutils" in globals():
    dbutils.widgets.text("catalog", "main", "Catalog")
    dbutils.widgets.text("schema", "misbench", "Schema")
    _catalog, _schema = dbutils.widgets.get("catalog").strip(), dbutils.widgets.get("schema").strip()
    if _catalog:
        spark.sql(f"USE CATALOG `{_catalog}`")
    if _schema:
        spark.sql(f"USE SCHEMA `{_schema}`")


def show(fig):
    """Lay out a matplotlib figure and display it where a notebook can."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    if "display" in globals():
        display(fig)  # noqa: F821 - Databricks' display
        plt.close(fig)
