"""A killed server comes back: `streamlit run app.py` is SIGKILLed, a new one starts on the same
port, and reloading the open page gets the whole app again with the bundled model loaded.

Screenshots: test-artifacts/screenshots/restart-before.png and restart-after.png.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import ARTIFACTS, ROOT

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
TRANSLATION = "2021-03-05"  # the bundled model's translation of "Friday, March 5, 2021"
# Until a completed run shows the home page's translation (or an exception). The first
# notRunning after a page load can come before the content, so the content is waited for too.
HOME_READY_JS = """
() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector('[data-testid="stException"]')) return true;
  return [...document.querySelectorAll('[data-testid="stMetric"]')].some(m =>
    m.innerText.includes('Translation of the sentence') &&
    (m.querySelector('[data-testid="stMetricValue"]') || m).innerText.trim().length > 0);
}
"""
METRICS_JS = """
() => Object.fromEntries([...document.querySelectorAll('[data-testid="stMetric"]')].map(m => [
  (m.querySelector('[data-testid="stMetricLabel"]') || m).innerText.trim(),
  (m.querySelector('[data-testid="stMetricValue"]') || m).innerText.trim()]))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(port: int, log_path):
    log = open(log_path, "w")  # noqa: SIM115 - closed by the caller with the server
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true",
         "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    return proc, log


def _wait_healthy(url: str, proc, log_path, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"streamlit exited with {proc.returncode}; see {log_path}")
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                return
        except OSError:
            time.sleep(0.25)
    pytest.fail(f"streamlit did not answer /_stcore/health in {timeout} s; see {log_path}")


def _check_home(page, shot) -> dict:
    """Wait for the home page's run; screenshot it; no exception box; return its metrics."""
    page.wait_for_function(HOME_READY_JS, timeout=120_000, polling=100)
    page.screenshot(path=str(shot), full_page=True)
    exc = page.locator('[data-testid="stException"]')
    assert exc.count() == 0, exc.first.inner_text()
    return page.evaluate(METRICS_JS)


def test_app_comes_back_after_the_server_is_killed_and_restarted_on_the_same_port():
    from playwright.sync_api import sync_playwright

    assert os.path.exists(CHROMIUM), "Debian's chromium is not installed (make chromium)"
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    servers = []
    try:
        logs = [ARTIFACTS / "streamlit-restart-1.log", ARTIFACTS / "streamlit-restart-2.log"]
        servers.append(_start_server(port, logs[0]))
        _wait_healthy(url, servers[0][0], logs[0])
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS,
                                        headless=True)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url + "/")
            before = _check_home(page, shots / "restart-before.png")
            assert before.get("Translation of the sentence") == TRANSLATION, before

            first = servers[0][0]
            first.send_signal(signal.SIGKILL)
            assert first.wait(timeout=30) == -signal.SIGKILL
            servers.append(_start_server(port, logs[1]))  # same port: the page's address
            _wait_healthy(url, servers[1][0], logs[1])

            page.reload()
            after = _check_home(page, shots / "restart-after.png")
            assert after.get("Translation of the sentence") == TRANSLATION, after
            assert after.get("Model") == before.get("Model"), (before, after)
            assert page.get_by_label("Source sentence").input_value() == "Friday, March 5, 2021"
            browser.close()
    finally:
        for proc, log in servers:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=30)
            log.close()
