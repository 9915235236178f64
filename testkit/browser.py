"""The real server and the real browser, as tests and benchmarks drive them: the app's server
as `make run` starts it (`python -m explorer.serve`) on a free port, waited for until healthy,
and Debian's Chromium with the flags this machine needs (never a downloaded browser)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
# A phone as a page sees it (browser.new_context(**PHONE)): issue 38's 390 x 844 window with an
# Android phone's User-Agent (Playwright's "Pixel 7" descriptor), touch and a mobile viewport.
# The User-Agent is what tells a phone (explorer.screen.on_a_phone; Streamlit's own mobile
# behaviour, such as closing the sidebar when a page is picked, keys on it too).
PHONE = dict(viewport={"width": 390, "height": 844}, device_scale_factor=2.625, is_mobile=True,
             has_touch=True,
             user_agent="Mozilla/5.0 (Linux; Android 14; Pixel 7) AppleWebKit/537.36 (KHTML, "
                        "like Gecko) Chrome/131.0.6778.33 Mobile Safari/537.36")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, log, *, watch_files: bool = True, warm: bool = True,
                 args: tuple[str, ...] = ()) -> subprocess.Popen:
    """The app's server as `make run` starts it (`python -m explorer.serve`: `streamlit run
    app.py` with a warm start) headless on 127.0.0.1:port, its output into `log` (an open file).
    watch_files=False: no rerun when files under the tree change (benchmarks, while other work
    edits the tree). warm=False: no warm start (explorer.warm.SWITCH), to measure a cold one.
    args: explorer.serve's own (--model NAME_OR_DIR, --no-open-by-name)."""
    env = {**os.environ, "EXPLORER_WARM": "1" if warm else "0"}
    for name in ("STREAMLIT_LOGGER_LEVEL", "TF_CPP_MIN_LOG_LEVEL"):  # as `make run` starts it
        env.pop(name, None)
    command = [sys.executable, "-m", "explorer.serve", "--server.port", str(port),
               "--server.address", "127.0.0.1", "--server.headless", "true",
               "--browser.gatherUsageStats", "false", *args]
    if not watch_files:
        command += ["--server.fileWatcherType", "none", "--server.runOnSave", "false"]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


@contextlib.contextmanager
def served(log_path, *, args: tuple[str, ...] = (), timeout: float = 120):
    """The app's server (start_server with explorer.serve's `args`) on a free port, its output
    in log_path, healthy: yields its URL, and stops it after. RuntimeError when it never
    answers (it is killed)."""
    with open(log_path, "w") as log:
        port = free_port()
        proc = start_server(port, log, args=args)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, proc, timeout=timeout)
        except RuntimeError:
            proc.kill()
            raise
        try:
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 180,
                 poll: float = 0.3) -> float:
    """Seconds until the server answers /_stcore/health (asked every `poll` s); RuntimeError
    if it exits or never answers."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}")
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                return time.perf_counter() - t0
        except OSError:
            time.sleep(poll)
    raise RuntimeError(f"streamlit did not answer /_stcore/health in {timeout} s")


def launch_options() -> dict:
    """Keyword arguments for playwright's chromium.launch: Debian's Chromium, headless."""
    return {"executable_path": CHROMIUM, "args": CHROMIUM_FLAGS, "headless": True}


# Titles, subtitles, subplot titles, legends and axis titles inside every Plotly figure of the
# page whose boxes intersect (by more than 2 px each way), or that reach past their figure's
# edge (clipped): [{"plot": i, "a": text, "b": text} or {"plot": i, "clipped": text}].
_OVERLAPS_JS = """() => {
  const out = [];
  const sel = '.gtitle, .g-gtitle text, .annotation-text, .legend .bg, .g-xtitle text, '
            + '.g-ytitle text';
  document.querySelectorAll('.js-plotly-plot').forEach((plot, p) => {
    const edge = plot.getBoundingClientRect();
    const boxes = Array.from(plot.querySelectorAll(sel)).filter(e => {
      const cls = e.getAttribute('class') || '';
      return e.getBoundingClientRect().width > 0
        && ((e.textContent || '').trim() !== '' || cls.includes('bg'));
    }).map(e => {
      const r = e.getBoundingClientRect();
      return {text: (e.textContent || 'legend').slice(0, 60), x0: r.left, y0: r.top,
              x1: r.right, y1: r.bottom};
    });
    boxes.forEach((a, i) => {
      if (a.x0 < edge.left - 1 || a.x1 > edge.right + 1) out.push({plot: p, clipped: a.text});
      boxes.slice(i + 1).forEach(b => {
        const ix = Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0);
        const iy = Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0);
        if (ix > 2 && iy > 2) out.push({plot: p, a: a.text, b: b.text});
      });
    });
  });
  return out;
}"""


def figure_overlaps(page) -> list[dict]:
    """What overlaps or is clipped among the texts of the page's Plotly figures (see
    _OVERLAPS_JS): checked on the boxes the browser laid out, not on the figure's JSON."""
    return page.evaluate(_OVERLAPS_JS)
