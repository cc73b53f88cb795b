"""Where a stage's Spark plan may be computed early: the job decides, the stage only marks.

Stage functions are pure: they build a plan and run nothing. A long stage (hoax) marks the
frames that several later steps read (``keep``) and the branches that only matter when a frame
has rows (``has_rows``). ``Lazy``, their default, leaves the plan whole; a job passes
``LocalCheckpoints``, which computes each marked frame once (``localCheckpoint``: its rows stay
on the executors, its plan is cut) and skips empty branches, so the plan Spark analyses stays
small and shared parts are not computed twice.
"""
from __future__ import annotations

from pyspark.sql import DataFrame


class Lazy:
    """Nothing computed before the result is read: the stage function stays a pure plan."""

    def keep(self, frame: DataFrame) -> DataFrame:
        return frame

    def has_rows(self, frame: DataFrame) -> bool:
        return True  # the branch is planned; with no rows it adds none


class LocalCheckpoints(Lazy):
    """The jobs' choice: each marked frame computed once, empty branches skipped."""

    def keep(self, frame: DataFrame) -> DataFrame:
        return frame.localCheckpoint()

    def has_rows(self, frame: DataFrame) -> bool:
        return not frame.isEmpty()


LAZY = Lazy()  # the stage functions' default
