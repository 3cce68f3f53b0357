"""A Spark Connect URL's token never reaches a stage's command line (ps and /proc show every
argument to any user): the stage client reads the URL from its environment instead."""

from __future__ import annotations

import subprocess
import sys

from minikafka.pipelines import load_pipeline
from minikafka.pipelines.launch.call import StageCall
from minikafka.pipelines.launch.client import client_command
from minikafka.spark.engine import ENGINE_URL_ENV
from tests.pipelines.helpers import ROOT, homelab_copy

TOKEN = "s3cr3t-token-value"


def test_a_url_with_a_token_goes_through_the_environment_not_the_command_line(tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path), suites=False)
    url = f"sc://127.0.0.1:15002/;user_id=bob;token={TOKEN}"
    cmd = client_command(defn, defn.stage("keep_articles"), url, "run-1")
    assert TOKEN not in " ".join(cmd) and "--remote-env" in cmd and "--remote" not in cmd
    call = StageCall.of(defn, defn.stage("keep_articles"), "run-1", remote=url)
    assert call.env()[ENGINE_URL_ENV] == url


def test_a_url_without_a_secret_stays_on_the_command_line_as_plan_prints_it(tmp_path):
    defn = load_pipeline(homelab_copy(tmp_path), suites=False)
    cmd = client_command(defn, defn.stage("keep_articles"), "sc://127.0.0.1:15002", "run-1")
    assert cmd[cmd.index("--remote") + 1] == "sc://127.0.0.1:15002" and "--remote-env" not in cmd


def test_a_job_told_to_read_the_url_from_an_unset_variable_says_so_in_one_line(tmp_path):
    pipeline = homelab_copy(tmp_path)
    env = {k: v for k, v in StageCall("job", "p", "s").env().items() if k != ENGINE_URL_ENV}
    done = subprocess.run([sys.executable, str(ROOT / "jobs" / "keep_articles.py"), "--pipeline", str(pipeline),
                           "--stage", "keep_articles", "--remote-env"], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)
    assert done.returncode == 2 and f"${ENGINE_URL_ENV} is not set" in done.stderr
    assert "Traceback" not in done.stderr
