"""How a pipeline run goes: one ``RunOptions``, checked once when it is made.

The CLI's ``run`` and the library's ``run_pipeline`` share it, and so share one default
engine: ``auto`` (a warm engine: the one running, else one started for the run), or what
``$MINIKAFKA_ENGINE`` says.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Literal, get_args

from ..errors import InvalidSettingError
from ..util.clock import logical_date as logical_date_of
from ..util.strategy import Strategy, strategy_problem
from .definition import PipelineDefinition, PipelineDefinitionError

Engine = Literal["auto", "submit", "connect"]
ENGINES: tuple[Engine, ...] = get_args(Engine)
DEFAULT_ENGINE: Engine = "auto"
ENGINE_ENV = "MINIKAFKA_ENGINE"  # the default engine of 'run' and run_pipeline, when set


def default_engine() -> str:
    """``$MINIKAFKA_ENGINE`` when set, else ``auto``."""
    return os.environ.get(ENGINE_ENV) or DEFAULT_ENGINE


@dataclass(frozen=True)
class RunOptions:
    """Which stages run, where, and what a failure stops.

    ``stage``/``start``: only that stage, or it and everything downstream (not both);
    ``strategy``: strict (after a failure no further stage starts) or best_effort (every
    stage not downstream of a failure runs); ``dry_run``: commit nothing; ``in_process``:
    every stage in this process; ``engine``: auto, connect or submit (see ``run_pipeline``);
    ``remote``: the engine's URL; ``max_parallel``: stages side by side at most;
    ``idle_timeout``: seconds an engine this run starts stays up unused; ``master`` and
    ``staging``: default the pipeline's; ``backup_before``: a directory to snapshot the
    ledger into before the first stage; ``logical_date``: the night the run stands for (a
    date or ``YYYY-MM-DD``; None: the run's UTC start date), every stage's ``ctx.logical_date``.

    Raises:
        PipelineDefinitionError: a value no run takes (named, with what it takes).
    """

    master: str | None = None
    strategy: Strategy = "strict"
    stage: str | None = None
    start: str | None = None
    dry_run: bool = False
    in_process: bool = False
    staging: str | None = None
    engine: Engine = field(default_factory=default_engine)
    remote: str | None = None
    max_parallel: int | None = None
    idle_timeout: float | None = None
    backup_before: str | None = None
    logical_date: date | None = None

    def __post_init__(self):
        if self.logical_date is not None:
            try:
                object.__setattr__(self, "logical_date", logical_date_of(self.logical_date))
            except InvalidSettingError as exc:
                raise PipelineDefinitionError(str(exc)) from None
        if strategy_problem(self.strategy):
            raise PipelineDefinitionError(strategy_problem(self.strategy))
        if self.engine not in ENGINES:
            raise PipelineDefinitionError(f"engine must be one of {ENGINES}, got {self.engine!r}")
        if self.max_parallel is not None and self.max_parallel < 1:
            raise PipelineDefinitionError(f"max_parallel must be >= 1, got {self.max_parallel!r}")

    def of(self, defn: PipelineDefinition) -> RunOptions:
        """These options with the pipeline's master and staging where none was given, and the
        logical date fixed (today in UTC where none was given: every stage gets the same)."""
        return replace(self, master=self.master or defn.master, staging=self.staging or defn.staging,
                       logical_date=logical_date_of(self.logical_date))
