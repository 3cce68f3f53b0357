"""One spark-submit per stage (``run --engine submit``): each stage its own Spark application."""

from __future__ import annotations

from pathlib import Path

from ..definition import PipelineDefinition, StageDefinition
from .call import StageCall
from .child import ChildLauncher, Children


def spark_submit() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


def submit_command(defn: PipelineDefinition, sd: StageDefinition, *, master: str, run_id: str,
                   dry_run: bool = False, staging: str | None = None, py_files: str | None = None,
                   consumer_ids: dict[str, int] | None = None, java_options: str | None = None,
                   call: StageCall | None = None) -> list[str]:
    """The exact spark-submit command for one stage.

    ``py_files``: a zip of the project's code for executors on other hosts
    (``code_zip``); ``staging``: the staging URI handed to the job; ``consumer_ids``:
    {input: id} of the stage's consumer, which the runner registered (the job then
    registers nothing and opens only the stage's topics); ``java_options``: the driver's
    (``spark.driver.extraJavaOptions``, see ``spark.stages.driver_jvm``; the pipeline's own wins).
    ``call``: the stage's call as its launcher made it (instead of the three before).
    """
    from ...spark.session import jdbc_jar

    jar = jdbc_jar()
    settings = {"spark.executor.extraClassPath": jar, "spark.sql.session.timeZone": "UTC",
                "spark.ui.showConsoleProgress": "false",
                **({"spark.driver.extraJavaOptions": java_options} if java_options else {}), **defn.spark, **sd.spark}
    cmd = [spark_submit(), "--master", master, "--name", f"minikafka:{defn.name}:{sd.name}",
           "--jars", jar, "--driver-class-path", jar]
    if py_files:
        cmd += ["--py-files", py_files]
    for key, value in settings.items():
        cmd += ["--conf", f"{key}={value}"]
    call = call or StageCall.of(defn, sd, run_id, dry_run=dry_run, staging=staging, consumer_ids=consumer_ids or {})
    return cmd + call.to_argv()


class SubmitLauncher(ChildLauncher):
    """Each stage under its own spark-submit, its driver's JVM started with the class-data
    archive of ``spark.stages.driver_jvm`` (written by the stage's first run, kept if it ran well)."""

    label = "spark-submit"
    needs_java = True

    def __init__(self, defn: PipelineDefinition, *, master: str, py_files: str | None, **common):
        super().__init__(defn, **common)
        self.master, self.py_files = master, py_files
        self._archives: dict[str, object] = {}

    def command(self, sd: StageDefinition, run_id: str, pending: int | None) -> tuple[list[str], StageCall]:
        from ...spark.session import session_conf
        from ...spark.stages.driver_jvm import driver_options

        java, self._archives[run_id] = driver_options(session_conf(jar="")["spark.driver.extraJavaOptions"], pending)
        call = self.call(sd, run_id)
        return submit_command(self.defn, sd, master=self.master, run_id=run_id, py_files=self.py_files,
                              java_options=java, call=call), call

    def launch(self, sd: StageDefinition, run_id: str, procs: Children, *, pending: int | None = None):
        outcome = None
        try:
            outcome = super().launch(sd, run_id, procs, pending=pending)
        finally:
            archive = self._archives.pop(run_id, None)
            if archive is not None:
                from ...spark.stages.driver_jvm import keep_archive

                keep_archive(archive, ok=outcome is not None and not procs.interrupted.is_set()
                             and outcome.status in ("succeeded", "partial"))
        return outcome
