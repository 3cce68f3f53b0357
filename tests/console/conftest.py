"""Fixtures of the console tests: the example ledger after a real run (built once per session),
a console server started as a user starts it, and one headless Chromium for the session."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .ledgers import add_modes, copy_ledger, ingest_example, scratch_example

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1280,900")


@pytest.fixture(scope="session")
def example_dir(tmp_path_factory, request) -> Path:
    """The shipped example after ``minikafka ingest`` and one in-process run of its pipeline (the
    session's SparkSession), plus a queue, a schedule, a group and a failed run (``add_modes``).
    Read it only: copy it (``ledger_copy``) to write."""
    from minikafka.pipelines.definition import load_pipeline
    from minikafka.pipelines.runner import run_pipeline

    request.getfixturevalue("spark")
    base = scratch_example(tmp_path_factory.mktemp("console-example"))
    ingest_example(base)
    cwd = os.getcwd()
    sys.path.insert(0, str(base))  # the example's schemas/ and jobs/, as the CLI finds them from its directory
    os.chdir(base)
    try:
        result = run_pipeline(load_pipeline(base / "conf" / "homelab.toml"), in_process=True, echo=lambda *_: None)
    finally:
        os.chdir(cwd)
        sys.path.remove(str(base))
        for name, module in list(sys.modules.items()):  # the scratch copy's schemas/ and jobs/ leave with it
            if str(getattr(module, "__file__", None) or "").startswith(str(base)):
                del sys.modules[name]
    assert not result.failed, [o.error for o in result.outcomes]
    add_modes(base / "data" / "homelab.sqlite")
    return base


@pytest.fixture
def ledger_copy(example_dir, tmp_path) -> Path:
    """A copy of the example's ledger (a test that acts writes here)."""
    work = tmp_path / "example"
    for name in ("conf", "schemas", "jobs", "examples"):
        shutil.copytree(example_dir / name, work / name)
    return copy_ledger(example_dir / "data", work / "data")


class Console:
    """A ``minikafka ui`` process on 127.0.0.1 and a free port."""

    def __init__(self, ledger: Path, *args: str):
        env = {k: v for k, v in os.environ.items() if not k.startswith("MINIKAFKA_") or k == "MINIKAFKA_ENGINE_DIR"}
        self.ledger = ledger
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "minikafka.cli", "ui", "--source", str(ledger), "--port", "0", *args],
            cwd=ledger.parent.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.before = []  # what it printed before its address (warnings)
        line = self.proc.stdout.readline()
        while line and "http://" not in line:
            self.before.append(line)
            line = self.proc.stdout.readline()
        if "http://" not in line:
            self.stop()
            raise AssertionError(f"minikafka ui did not start: {''.join(self.before)}{self.proc.stdout.read()}")
        self.url = line.split(" on ", 1)[1].split()[0].rstrip("/").replace("://0.0.0.0:", "://127.0.0.1:")

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.stdout.read()


@pytest.fixture
def start_console():
    """``start_console(ledger, *options)``: a console process, stopped (SIGTERM) after the test."""
    started: list[Console] = []

    def start(ledger: Path, *args: str) -> Console:
        console = Console(ledger, *args)
        started.append(console)
        return console

    yield start
    for console in started:
        console.stop()


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    """One headless Debian Chromium for the session, driven through Debian's chromedriver."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("chromium and chromium-driver are not installed (scripts/setup.sh installs them)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_AVOID_STATS", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    driver.implicitly_wait(5)  # a lookup right after a click waits for the next page's element
    yield driver
    driver.quit()
