"""Where a command's full log goes, apart from what the user reads in the terminal.

On the embedded default (a lake in a local folder) Spark's own log and misbench's detailed
log (tracebacks, worker crash reports) go to ``<lake.root>/_logs/misbench.log``; the terminal
gets progress lines and short errors. On a cluster (``log.dir`` unset and a remote lake)
there is no file: stderr is the driver log there.
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from misbench.config import Config

FORMAT = "%(asctime)s %(name)s %(message)s"
# Tracebacks and worker crash reports: to the log file, never to the terminal when a file exists.
detail = logging.getLogger("misbench.detail")
detail.propagate = False

_file: Path | None = None


def duration(seconds: float) -> str:
    """A duration as the terminal writes it: 8.1s, 3m05s, 2h05m."""
    if round(seconds, 1) < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def log_file(cfg: Config) -> Path | None:
    """``log.dir`` or, on the embedded default (local Spark, a delta-rs lake in a local
    folder), ``<lake.root>/_logs``; the file in it. None on clusters."""
    folder = cfg.get("log.dir", None)
    if not folder:
        root = cfg.get("lake.root", None)
        local = (cfg.get("lake.backend", None) == "delta_rs" and not cfg.get("spark.remote", None)
                 and str(cfg.get("spark.master", None) or "").startswith("local"))
        if not root or not local or ":" in str(root).split("/", 1)[0]:
            return None
        folder = Path(root) / "_logs"
    return Path(os.path.expanduser(str(folder))).absolute() / "misbench.log"


def setup_terminal() -> None:
    logging.basicConfig(level=logging.INFO, format=FORMAT, stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.WARNING)


def attach_file(cfg: Config) -> Path | None:
    """Send misbench's log, and its detailed log, to the command's log file as well."""
    global _file
    path = log_file(cfg)
    if path is None or path == _file:
        return _file
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "misbench_log_file", False)]:
        root.removeHandler(old)  # an earlier command in this process wrote to another lake
        old.close()
    handler.misbench_log_file = True
    root.addHandler(handler)
    detail.handlers = [handler]
    _file = path
    return path


def current_file() -> Path | None:
    return _file


def record_detail(message: str, error: BaseException) -> None:
    """The whole story of ``error`` (Python traceback, Spark's message with the Java trace) for
    the log file; on a cluster without a file it goes to stderr, which is the driver log."""
    if not detail.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(FORMAT))
        detail.handlers = [handler]
    detail.error(message, exc_info=error)
