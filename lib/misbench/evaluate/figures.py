"""Figures of an evaluation run, in the spirit of the paper's Table 3 / 4 and Figures 4-6.

Each function takes the run's eval_metrics rows (pandas) and returns a matplotlib figure, or
None when the run has nothing to draw for it.
"""
from __future__ import annotations

import pandas as pd

from misbench.styles import ENTRY_STYLE, style_order

KINDS = ("factual", "temporal", "semantic")


def _pick(metrics: pd.DataFrame, setting: str, metric: str, **dims) -> pd.DataFrame:
    rows = metrics[(metrics["setting"] == setting) & (metrics["metric"] == metric)]
    for dim in ("kind", "hop", "style", "topic", "memory"):
        wanted = dims.get(dim)
        if wanted == "*":
            rows = rows[rows[dim].notna()]
        elif wanted is None:
            rows = rows[rows[dim].isna()]
        else:
            rows = rows[rows[dim] == wanted]
    return rows


def _bars(title: str, ylabel: str, groups: list[str], series: dict[str, list], ylim=(0, 1)):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.5, 3.6))
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        positions = [g + i * width for g in range(len(groups))]
        heights = [0.0 if v is None or pd.isna(v) else v for v in values]
        bars = axes.bar(positions, heights, width, label=label)
        for bar, value in zip(bars, values):
            if value is None or pd.isna(value):  # an empty denominator: no bar, say so
                axes.annotate("n=0", (bar.get_x() + bar.get_width() / 2, 0), ha="center", va="bottom", fontsize=7)
    axes.set_xticks([g + width * (len(series) - 1) / 2 for g in range(len(groups))], groups)
    axes.set_ylabel(ylabel)
    axes.set_ylim(*ylim)
    axes.set_title(title, fontsize=10)
    axes.axhline(0, color="black", linewidth=0.5)
    axes.legend(fontsize=8)
    figure.tight_layout()
    plt.close(figure)
    return figure


def _values(rows: pd.DataFrame, column: str, keys) -> list:
    by_key = {row[column]: row["value"] for _, row in rows.iterrows()}
    return [by_key.get(key) for key in keys]


def detection_by_kind(metrics: pd.DataFrame, model: str):
    """Table 3: detection Success Rate by kind, for Memory and Unknown questions."""
    rows = {label: _values(_pick(metrics, "detection", "success_rate", kind="*", memory=label), "kind", KINDS)
            for label in ("memory", "unknown")}
    if all(v is None for values in rows.values() for v in values):
        return None
    return _bars(f"{model}: misinformation detection (success rate)", "success rate", list(KINDS), rows)


def memorization_by_kind(metrics: pd.DataFrame, model: str):
    """Figure 4: memorization ratio with one misinformation entry, by kind."""
    values = _values(_pick(metrics, "single", "memorization_ratio", kind="*"), "kind", KINDS)
    if all(v is None for v in values):
        return None
    return _bars(f"{model}: memorization ratio, one misinformation text", "MR", list(KINDS), {"MR": values})


def tendcm_by_kind(metrics: pd.DataFrame, model: str):
    """Figure 5: TendCM with correct evidence and misinformation together, by kind."""
    rows = {label: _values(_pick(metrics, "pair", "tendcm", kind="*", memory=label), "kind", KINDS)
            for label in ("memory", "unknown")}
    if all(v is None for values in rows.values() for v in values):
        return None
    return _bars(f"{model}: evidence tendency TendCM", "TendCM", list(KINDS), rows, ylim=(-1, 1))


def memorization_by_style(metrics: pd.DataFrame, model: str):
    """Figure 6: memorization ratio by style of the misinformation text."""
    ratios = _pick(metrics, "style", "memorization_ratio", style="*")
    probabilities = _pick(metrics, "style", "memory_option_probability", style="*")
    styles = style_order([*ratios["style"], *probabilities["style"]])
    values = _values(ratios, "style", styles)
    probability = _values(probabilities, "style", styles)
    if all(v is None for v in values + probability):
        return None
    return _bars(f"{model}: memorization ratio by style", "value", styles,
                 {"MR (Memory questions)": values, "P(memory option)": probability})


def rtd_by_kind(metrics: pd.DataFrame, model: str):
    """Table 4: detection Success Rate of the base prompt, +Desc and +RtD on the same entries."""
    series = {
        "base": _values(_pick(metrics, "detection", "success_rate", kind="*", style=ENTRY_STYLE), "kind", KINDS),
        "+Desc": _values(_pick(metrics, "desc", "success_rate", kind="*"), "kind", KINDS),
        "+RtD": _values(_pick(metrics, "rtd", "success_rate", kind="*"), "kind", KINDS),
    }
    if all(v is None for v in series["+Desc"] + series["+RtD"]):
        return None
    return _bars(f"{model}: detection with RtD (encyclopedia entries)", "success rate", list(KINDS), series)


def memory_logprob_by_style(responses: pd.DataFrame, model: str):
    """Figure 7, one-hop and multi-hop apart as the paper's Figures 16 and 17: the
    distribution of the right option's log-probability, by style, over the style setting's
    answers that chose it (log-prob answering only)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = responses[(responses["setting"] == "style") & (responses["chosen_role"] == "memory")]
    values: dict[int, dict[str, list]] = {}
    for _, row in rows.iterrows():
        logprobs, roles = row["option_logprobs"], list(row["roles"])
        if logprobs is None or "memory" not in roles:
            continue
        value = logprobs[roles.index("memory")]
        if value is not None and value == value:
            values.setdefault(int(row["hop"]), {}).setdefault(row["style"], []).append(value)
    if not values:
        return None
    hops = sorted(values)
    figure, panels = plt.subplots(1, len(hops), figsize=(6.5 * len(hops), 3.6), squeeze=False)
    for axes, hop in zip(panels[0], hops):
        styles = style_order(values[hop])
        axes.boxplot([values[hop][s] for s in styles])
        axes.set_xticks(range(1, len(styles) + 1), [f"{s}\n(n={len(values[hop][s])})" for s in styles], fontsize=8)
        axes.set_ylabel("log P(right option)")
        axes.set_title(f"{model}, {'one-hop' if hop == 1 else f'{hop}-hop'}: right option's log-probability "
                       "when chosen, by style", fontsize=9)
    figure.tight_layout()
    plt.close(figure)
    return figure


FIGURES = {
    "detection_by_kind.png": detection_by_kind,
    "memorization_ratio_by_kind.png": memorization_by_kind,
    "tendcm_by_kind.png": tendcm_by_kind,
    "memorization_ratio_by_style.png": memorization_by_style,
    "rtd_by_kind.png": rtd_by_kind,
}
