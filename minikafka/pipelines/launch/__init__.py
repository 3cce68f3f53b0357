"""How one stage starts: one launcher per mode behind one small interface.

The scheduler (``pipelines.runner``) decides what runs next and never knows how a stage
starts; it asks the launcher ``open_launcher`` gives it (dagster's step launchers):

- ``InProcessLauncher``: in this process, on one Spark session (``run --in-process``, ``watch``);
- ``SubmitLauncher``: one spark-submit per stage (``--engine submit``);
- ``ClientLauncher``: a small client process of the warm engine (``auto``, ``connect``);
- ``ChildLauncher``: what both process launchers share (start, wait, read the run's row back).

Each takes ``launch(sd, run_id, procs, *, pending) -> StageOutcome`` and has a ``width``
(stages side by side at most) and ``starting(sd)`` (a stage is about to launch). Every
process gets its arguments from one ``StageCall`` (``call``), which the job parses back.
The engine (``engine``), the stage host, the per-row sessions and the test cluster live
here too: this room sits below the scheduler (tests/test_layers.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..definition import StageDefinition
from ..results import StageOutcome

if TYPE_CHECKING:
    from .call import StageCall
    from .child import ChildLauncher, Children
    from .client import ClientLauncher
    from .inprocess import InProcessLauncher, run_in_process, watch_session
    from .modes import open_launcher
    from .staging_sweep import sweep_staging
    from .submit import SubmitLauncher

# imported when first used: ``run`` starts the stage host (``stagehost``) before anything here
# imports pyspark (0.2 s), so the host's own imports start that much sooner
_LAZY = {"StageCall": "call", "ChildLauncher": "child", "Children": "child", "ClientLauncher": "client",
         "InProcessLauncher": "inprocess", "run_in_process": "inprocess", "watch_session": "inprocess",
         "open_launcher": "modes", "sweep_staging": "staging_sweep", "SubmitLauncher": "submit"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


class Launcher(Protocol):
    """What the scheduler calls to run one stage."""

    width: int

    def starting(self, sd: StageDefinition) -> None: ...

    def launch(self, sd: StageDefinition, run_id: str, procs: Children, *,
               pending: int | None = None) -> StageOutcome: ...


__all__ = ["ChildLauncher", "Children", "ClientLauncher", "InProcessLauncher", "Launcher", "StageCall", "SubmitLauncher",
           "open_launcher", "run_in_process", "sweep_staging",
           "watch_session"]
