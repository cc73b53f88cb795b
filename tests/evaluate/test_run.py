"""What evaluate and hoax-evaluate share (misbench.evaluate.run): the headline of a setting,
read through the one definition analysts query (the headline_metrics view), and MLflow metric
names for every breakdown."""
import datetime as dt

from misbench.evaluate.metrics import METRICS_SCHEMA
from misbench.evaluate.run import headline_metrics, metric_id, metric_key, replace_metrics


def metric_row(evaluation, setting, metric, value, n, **breakdown):
    row = {"evaluation_id": evaluation, "model": "m", "answer_mode": "logprobs", "source": "wikidata",
           "setting": setting, "metric": metric, "value": value, "n": n, "items": n, "kind": None, "hop": None,
           "style": None, "topic": None, "memory": None, "mlflow_run_id": "r",
           "computed_at": dt.datetime(2026, 12, 6, tzinfo=dt.timezone.utc), "country": None, "category": None,
           "reasoning_type": None, "answer_type": None, "false_premise_type": None, "runs": 1, "value_spread": None}
    row.update(breakdown)
    return row


def test_the_headline_of_each_setting_is_the_views_row_of_that_evaluation(spark, lake):
    rows = [metric_row("e1", "probe", "accuracy", 0.5, 4),
            metric_row("e1", "probe", "accuracy", 1.0, 2, kind="factual"),  # a breakdown
            metric_row("e1", "pair", "tendcm", 0.25, 3, memory="memory"),
            metric_row("e1", "pair", "tendcm", 0.75, 3),  # not the pair's headline
            metric_row("e1", "detection", "false_alarm_rate", 0.1, 9),
            metric_row("e1", "hoax_choice", "accuracy", 0.333, 3),
            metric_row("e1", "hoax_choice", "accuracy", 1.0, 1, country="People's Republic of China"),
            metric_row("e2", "probe", "accuracy", 0.9, 10)]  # another evaluation
    frame = spark.createDataFrame(rows, METRICS_SCHEMA).withColumn("metric_id", metric_id())
    hoax = frame.setting.startswith("hoax_")
    replace_metrics(lake, frame.where(~hoax), "m", None, "wikidata")
    replace_metrics(lake, frame.where(hoax), "m", None, "wikidata", hoax=True)
    assert headline_metrics(lake, "e1") == {"probe": ("accuracy", 0.5, 4), "pair": ("tendcm", 0.25, 3),
                                            "hoax_choice": ("accuracy", 0.333, 3)}
    assert "eval_metrics_e1" not in {table.name for table in spark.catalog.listTables()}


def test_metric_names_carry_every_breakdown_in_words_mlflow_takes():
    assert metric_key(metric_row("e", "pair", "tendcm", 0.2, 3, memory="memory", kind="factual")) == \
        "tendcm/kind_factual/memory_memory"
    assert metric_key(metric_row("e", "hoax_choice", "accuracy", 1.0, 1, country="People's Republic of China",
                                 category="Arts & Culture")) == \
        "accuracy/country_People_s_Republic_of_China/category_Arts_and_Culture"
