"""The first page after the server starts, against the pages after it (issue 24 part 7).

    .venv/bin/python bench/cold_start.py [--sessions 3]

Starts the app's server as `make run` does (`python -m explorer.serve`: the default model and
its compiled loops prepared while it starts, explorer.warm) and, in the same run, as it would
start without the warm start (EXPLORER_WARM=0). For each, it waits until the server answers,
then opens the home page in fresh Chromium contexts one after the other (each a new
Streamlit session and an empty browser cache: no session state, the server's caches as they
are) and prints the seconds
from the request to the translation on the page. The ratio first / median of the later ones
is the goal: <= 1.2 with the warm start (the first page is as fast as later ones).

With the warm start the first session may arrive before the warm-up has finished (a user who
opens the browser at once); the script waits for the server's "Warm start: ... ready" line, as
`make run` prints it, and also reports how long after `healthy` that was.

First, as `make run` is met (issue 38, item 13: a first page within 3 s): a server started with
its warm start and a browser that opens the home page the moment the server answers (as
Streamlit opens one), timed from the command: when the server answers, when the browser shows
a page (the start's progress, or the page itself: its title), and when the home page is usable
(the translation on it). Median of --starts fresh servers.
"""

import argparse
import contextlib
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from testkit.browser import free_port, launch_options, start_server, wait_healthy  # noqa: E402

READY = "Warm start:"


def first_translation_seconds(browser, url: str) -> float:
    """A new browser context each time (its own HTTP cache: every session downloads the
    frontend alike, so what differs is the server's work)."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    t0 = time.perf_counter()
    page.goto(url)
    metric = page.locator('[data-testid="stMetric"]').filter(has_text="Translation of the sentence")
    metric.locator('[data-testid="stMetricValue"]').wait_for(timeout=300_000)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]',
                           timeout=300_000)
    seconds = time.perf_counter() - t0
    context.close()
    return seconds


@contextlib.contextmanager
def opened_at_start(browser, args: tuple[str, ...] = (), timeout_s: float = 300,
                    stages: list | None = None):
    """The server started as `make run` starts it (explorer.serve's `args`: --model DIR ...)
    and a browser opened at its health answer, as Streamlit opens one: yields ({"healthy",
    "drawn", "usable"}: seconds from the command to the server's answer, the first page drawn (a
    title in the main area) and the home page's translation; the open page; the server log's
    path), the server running and the page open until the block ends. stages: a list to append
    (seconds, text) to whenever the start's progress text changes (polled every 50 ms)."""
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as log:
        port = free_port()
        t0 = time.perf_counter()
        proc = start_server(port, log, watch_files=False, warm=True, args=args)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, proc, timeout=timeout_s, poll=0.02)
            healthy = time.perf_counter() - t0
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            try:
                page = context.new_page()
                page.goto(url)
                page.locator('[data-testid="stMain"] h1').first.wait_for(timeout=timeout_s * 1e3)
                drawn = time.perf_counter() - t0
                metric = page.locator('[data-testid="stMetric"]').filter(
                    has_text="Translation of the sentence").locator('[data-testid="stMetricValue"]')
                if stages is not None:
                    _follow_progress(page, metric, t0, timeout_s, stages)
                metric.wait_for(timeout=timeout_s * 1e3)
                usable = time.perf_counter() - t0
                yield {"healthy": healthy, "drawn": drawn, "usable": usable}, page, log.name
            finally:
                context.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _follow_progress(page, metric, t0: float, timeout_s: float, stages: list) -> None:
    """Until `metric` shows (or timeout_s), each new text of the start's progress bar."""
    bar = page.locator('[data-testid="stProgress"]')
    while metric.count() == 0 and time.perf_counter() - t0 < timeout_s:
        try:
            text = bar.first.inner_text(timeout=200).strip() if bar.count() else ""
        except Exception:  # noqa: BLE001 - the bar went between count() and its text
            text = ""
        if text and (not stages or stages[-1][1] != text):
            stages.append((time.perf_counter() - t0, text))
        page.wait_for_timeout(50)


def from_the_command(browser) -> dict:
    """Seconds from starting the server to: its health answer, the first page drawn (a title
    in the main area), the home page's translation, for a browser opened at the answer."""
    with opened_at_start(browser) as (times, _page, _log):
        return times


def run(warm: bool, sessions: int, browser) -> dict:
    with tempfile.NamedTemporaryFile("w+", suffix=".log") as log:
        port = free_port()
        proc = start_server(port, log, watch_files=False, warm=warm)
        url = f"http://127.0.0.1:{port}"
        try:
            healthy = wait_healthy(url, proc)
            t0, ready_after = time.perf_counter(), None
            while warm and time.perf_counter() - t0 < 300:
                log.seek(0)
                if READY in log.read():
                    ready_after = time.perf_counter() - t0
                    break
                time.sleep(0.1)
            times = [first_translation_seconds(browser, url) for _ in range(sessions)]
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return {"healthy": healthy, "ready_after": ready_after, "times": times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(**launch_options())
        starts = [from_the_command(browser) for _ in range(args.starts)]
        for key, what in (("healthy", "the server answers"), ("drawn", "a page is drawn"),
                          ("usable", "the home page shows the translation")):
            print(f"from the command, median of {args.starts}: {what} after "
                  f"{statistics.median(s[key] for s in starts):.2f} s "
                  f"({', '.join(f'{s[key]:.2f}' for s in starts)})", flush=True)
        for warm in (True, False):
            r = run(warm, args.sessions, browser)
            first, later = r["times"][0], statistics.median(r["times"][1:])
            ready = (f", warm-up ready {r['ready_after']:.1f} s after healthy"
                     if r["ready_after"] is not None else "")
            print(f"{'warm start' if warm else 'cold start'}: server healthy in "
                  f"{r['healthy']:.1f} s{ready}; first page {first:.2f} s, later pages "
                  f"{', '.join(f'{t:.2f}' for t in r['times'][1:])} s; first / later "
                  f"{first / later:.2f}x", flush=True)
        browser.close()


if __name__ == "__main__":
    main()
