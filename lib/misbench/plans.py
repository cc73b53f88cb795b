"""Where a stage's Spark plan may be computed early: the job decides, the stage only marks.

Stage functions are pure: they build a plan and run nothing. A long stage (hoax) marks the
frames that several later steps read (``keep``) and the branches that only matter when a frame
has rows (``has_rows``), and the small frames a large one joins that are worth sending to every
task whole (``broadcast_if_small``). ``Lazy``, their default, leaves the plan whole and the
join to Spark; a job passes ``LocalCheckpoints``, which computes each marked frame once
(``localCheckpoint``: its rows stay on the executors, its plan is cut), skips empty branches
and broadcasts a marked frame whose rows it counted under the limit, so the plan Spark analyses
stays small and shared parts are not computed twice. ``Counted`` (claims) only counts.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


class Lazy:
    """Nothing computed before the result is read: the stage function stays a pure plan."""

    def keep(self, frame: DataFrame) -> DataFrame:
        return frame

    def has_rows(self, frame: DataFrame) -> bool:
        return True  # the branch is planned; with no rows it adds none

    def broadcast_if_small(self, frame: DataFrame, max_rows: int) -> DataFrame:
        return frame  # Spark chooses the join (its estimate of a derived frame is often far off)


class Counted(Lazy):
    """Nothing computed early but the small frames' row counts, which decide their broadcast:
    for a job that stores what it reads twice as tables already (claims), and that runs on
    Spark Connect servers without a checkpoint store."""

    def broadcast_if_small(self, frame: DataFrame, max_rows: int) -> DataFrame:
        # Spark learns a derived frame is small only at run time (adaptive execution), when it
        # may have shuffled the large side to join it already; counted here, it never does.
        kept = self.keep(frame)
        return F.broadcast(kept) if kept.count() <= max_rows else kept


class LocalCheckpoints(Counted):
    """The jobs' choice: each marked frame computed once, empty branches skipped, small frames
    counted once computed and broadcast."""

    def keep(self, frame: DataFrame) -> DataFrame:
        return frame.localCheckpoint()

    def has_rows(self, frame: DataFrame) -> bool:
        return not frame.isEmpty()


LAZY = Lazy()  # the stage functions' default
