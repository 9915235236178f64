"""Load and isolation under many concurrent browser sessions, and memory under many uploads.

    .venv/bin/python bench/load.py [--sessions 8] [--uploads 12] [--pages 3]

Starts `streamlit run app.py` (headless, a free port, its log in
test-artifacts/bench-load-streamlit.log) and drives it with Debian's Chromium (Playwright, async:
one browser, one context per session, all sessions at once):

1. Every session picks its own bundled model in the sidebar's "Active model" selectbox (through
   the selectbox UI) and types its own sentence, then reads the home page's "Translation of the
   sentence" metric and checks it is the translation *its* (model, sentence) gives - computed here
   beforehand with transformer.load_checkpoint(path).translate(sentence).text. The sentences are
   ones the bundled checkpoints translate differently, so a wrong model shows too. Then it visits
   other pages through the sidebar navigation (which keeps the Streamlit session), checks its
   sentence and model are still in the sidebar on each, and goes back home to read the metric
   again, after every other session has been busy too.
2. One session uploads --uploads distinct tiny checkpoints (same tokenizers, different weight
   seeds, so different sha256s), recording the server's RSS after each: models are cached with
   st.cache_resource(max_entries=MAX_MODELS), so it should level off. Then it picks the oldest
   upload the session still lists again.

Latency of each action is from the click or key press until the server has reported a finished
run (its script_finished message on the session's websocket) and the app's script state is
notRunning with the page's content (and its Plotly figures) present. (The DOM state alone is not
enough: React may batch a quick run's running -> notRunning into no change at all.)
The server's VmRSS is polled from /proc every 0.2 s; VmHWM is read at the end. Exit status 0 when
every check passed. Exception boxes' full texts go to test-artifacts/bench-load-exceptions.txt.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("STREAMLIT_LOGGER_LEVEL", "error")  # no "No runtime found" warnings here
ROOT = Path(__file__).resolve().parent.parent

from playwright.async_api import TimeoutError as PlaywrightTimeout  # noqa: E402
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: E402

from testkit import browser as kit  # noqa: E402

ARTIFACTS = ROOT / "test-artifacts"
LOG = ARTIFACTS / "bench-load-streamlit.log"
EXCEPTIONS_FILE = ARTIFACTS / "bench-load-exceptions.txt"
EXCEPTIONS: list[str] = []  # every exception box's full text, written to EXCEPTIONS_FILE
ACTION_TIMEOUT_MS = 240_000  # one action, with every session competing for two cores

# Sentences every bundled checkpoint translates differently (out-of-distribution formats), so a
# session shown another model's result fails too; past these, ordinary distinct dates.
SENTENCES = ["12/25/1999", "2012-06-30", "2 fevrier 1968", "3/14/1987", "9 agosto 1976",
             "1987-03-03", "14 juillet 2003", "March 3 87", "1 Jan 50", "2003.07.14",
             "14/07/2003"]
# (sidebar link text, url path, text the page shows, draws Plotly figures)
NAV_PAGES = [("Attention maps", "Attention_Maps", "Attention maps", True),
             ("Step-by-step decoding", "Decoding", "Step-by-step decoding", True),
             ("Tokenization", "Tokenization", "Tokenization", True),
             ("Model", "Model", "Model: ", True)]
HOME = ("Home", "", "Translation of the sentence", False)

# Counts the app root's changes to script state notRunning, in every page load: for diagnostics
# only, as React may batch running -> notRunning of a quick run into no change at all.
INIT_JS = """
(() => {
  window.__runs = 0;
  const obs = new MutationObserver(records => {
    const recs = records.filter(r => r.target.getAttribute &&
                                     r.target.getAttribute('data-testid') === 'stApp');
    for (let i = 0; i < recs.length; i++) {
      const now = i + 1 < recs.length ? recs[i + 1].oldValue
                                      : recs[i].target.getAttribute('data-test-script-state');
      if (now === 'notRunning' && recs[i].oldValue !== 'notRunning') window.__runs++;
    }
  });
  obs.observe(document, {subtree: true, attributes: true, attributeOldValue: true,
                         attributeFilter: ['data-test-script-state']});
})();
"""
# True once the app is idle and shows the page it should (or shows an exception: the caller
# reports it). Asked only after the server has said that a run started by the action finished.
READY_JS = """
(spec) => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const main = document.querySelector('[data-testid="stMain"]') || document.body;
  if (main.querySelector('[data-testid="stException"]')) return true;
  if (spec.path !== null) {
    const here = location.pathname.replace(/\\/+$/, '').split('/').pop();
    if (here !== spec.path) return false;
  }
  if (spec.text && !main.innerText.includes(spec.text)) return false;
  if (spec.plots && main.querySelectorAll('.js-plotly-plot').length < 1) return false;
  return true;
}
"""
STATE_JS = """
(spec) => {
  const app = document.querySelector('[data-testid="stApp"]');
  const main = document.querySelector('[data-testid="stMain"]') || document.body;
  return {runs: window.__runs, state: app && app.getAttribute('data-test-script-state'),
          path: location.pathname, has_text: !!spec.text && main.innerText.includes(spec.text),
          plots: main.querySelectorAll('.js-plotly-plot').length};
}
"""
METRICS_JS = """
() => Object.fromEntries([...document.querySelectorAll('[data-testid="stMetric"]')].map(m => [
  (m.querySelector('[data-testid="stMetricLabel"]') || m).innerText.trim(),
  (m.querySelector('[data-testid="stMetricValue"]') || m).innerText.trim()]))
"""


def squash(text: str) -> str:
    return " ".join(text.split())


def proc_status(pid: int, field: str) -> int | None:
    """A /proc/<pid>/status field in kB (VmRSS, VmHWM), None once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class RssMonitor(threading.Thread):
    """Polls the server's VmRSS every `interval` seconds; keeps the peak and the latest."""

    def __init__(self, pid: int, interval: float = 0.2):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_kb = self.last_kb = 0
        self.phase_peak_kb: dict[str, int] = {}
        self.phase = "start-up"
        self.stopped = threading.Event()
        self.cpu: dict[str, float] = {}  # CPU seconds of each part during the sessions phase

    def run(self):
        while not self.stopped.is_set():
            kb = proc_status(self.pid, "VmRSS")
            if kb is not None:
                self.last_kb = kb
                self.peak_kb = max(self.peak_kb, kb)
                self.phase_peak_kb[self.phase] = max(self.phase_peak_kb.get(self.phase, 0), kb)
            self.stopped.wait(self.interval)

    def now_mb(self) -> float:
        kb = proc_status(self.pid, "VmRSS")
        return (kb if kb is not None else self.last_kb) / 1024


def start_server(port: int) -> tuple[subprocess.Popen, object]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = open(LOG, "w")  # noqa: SIM115 - open as long as the server runs; closed in main
    return kit.start_server(port, log, watch_files=False), log


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 180) -> float:
    try:
        return kit.wait_healthy(url, proc, timeout)
    except RuntimeError as err:
        raise SystemExit(f"{err}; see {LOG}") from None


def expected_translations(pairs: list[tuple[str, str]], paths: dict) -> tuple[dict, dict]:
    """{(model label, sentence): translation} computed in this process, off the server."""
    from transformer import load_checkpoint

    out, loaded = {}, {}
    for label, sentence in pairs:
        if label not in loaded:
            loaded[label] = load_checkpoint(paths[label])
        out[label, sentence] = loaded[label].translate(sentence).text
    # What every model says for each sentence: shows whether a session's check can tell models
    # apart (a sentence all models translate alike only checks the sentence).
    by_sentence = {s: {m.translate(s).text for m in loaded.values()} for _, s in pairs}
    return out, by_sentence


def tiny_checkpoints(n: int, folder: Path) -> list[tuple[Path, str, str]]:
    """n tiny untrained checkpoints like tests/conftest.py's, one weight seed each:
    [(path, name, sha256)]."""
    import hashlib

    from testkit.tiny import tiny_checkpoint_bytes

    out = []
    for i in range(n):
        name = f"tiny-upload-{i + 1:02d}"
        data = tiny_checkpoint_bytes(name, weight_seed=1000 + i)
        path = folder / f"{name}.ckpt"
        path.write_bytes(data)
        out.append((path, name, hashlib.sha256(data).hexdigest()))
    assert len({sha for _, _, sha in out}) == n, "tiny checkpoints are not distinct"
    return out


# A run that ended (its page is complete), not one cut short for a rerun.
RUN_ENDS = (ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_WITH_COMPILE_ERROR)


class AppShowsException(RuntimeError):
    """The app showed an exception box instead of the page (already recorded as a problem)."""


class Session:
    """One browser context = one Streamlit session, with its latencies and findings."""

    def __init__(self, index: int, context, url: str):
        self.index, self.context, self.url = index, context, url
        self.page = None
        self.latencies: list[tuple[str, float]] = []
        self.served: list[tuple[str, float]] = []  # until the server's run finished (no drawing)
        self.problems: list[str] = []
        self.websockets_opened = 0
        self.websockets_closed = 0
        self.done = False
        self.runs_finished = 0  # script_finished messages the server sent this session
        self.run_finished = asyncio.Event()

    async def open(self):
        self.page = await self.context.new_page()
        self.page.on("websocket", self._on_websocket)
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        await self.act("initial load", lambda: self.page.goto(self.url + "/"), HOME)

    def _on_websocket(self, ws):
        self.websockets_opened += 1
        ws.on("close", lambda _: setattr(self, "websockets_closed", self.websockets_closed + 1))
        ws.on("framereceived", self._on_frame)

    def _on_frame(self, payload):
        """Counts the server's script_finished messages (ForwardMsg) for this session's runs."""
        if not isinstance(payload, bytes) or len(payload) > 4096:  # deltas, not run ends
            return
        try:
            msg = ForwardMsg.FromString(payload)
        except Exception:  # noqa: BLE001 - not a ForwardMsg we need
            return
        if msg.WhichOneof("type") == "script_finished" and msg.script_finished in RUN_ENDS:
            self.runs_finished += 1
            self.run_finished.set()

    async def act(self, kind: str, action, page_spec, text: str | None = None) -> float:
        """Do `action`; wait until the server has finished a run started after it and the page
        is idle showing what it should; record the latency."""
        _, path, page_text, plots = page_spec
        n0 = self.runs_finished
        spec = {"path": path, "text": text or page_text, "plots": plots}
        t0 = time.perf_counter()
        await action()
        try:
            while self.runs_finished <= n0:
                self.run_finished.clear()
                left = ACTION_TIMEOUT_MS / 1000 - (time.perf_counter() - t0)
                await asyncio.wait_for(self.run_finished.wait(), timeout=max(left, 0.001))
            self.served.append((kind, time.perf_counter() - t0))
            left_ms = ACTION_TIMEOUT_MS - (time.perf_counter() - t0) * 1000
            await self.page.wait_for_function(READY_JS, arg=spec, timeout=max(left_ms, 1),
                                              polling=100)
        except (PlaywrightTimeout, TimeoutError):
            state = await self.page.evaluate(STATE_JS, spec)
            raise PlaywrightTimeout(
                f"{kind}: not ready after {ACTION_TIMEOUT_MS / 1000:.0f} s; waited for {spec} "
                f"and a run to finish on the server ({self.runs_finished - n0} did); page: "
                f"{state}") from None
        seconds = time.perf_counter() - t0
        self.latencies.append((kind, seconds))
        exc = self.page.locator('[data-testid="stException"]')
        if await exc.count():
            text = await exc.first.inner_text()
            EXCEPTIONS.append(f"session {self.index}, {kind}:\n{text}\n")
            lines = [line for line in text.splitlines() if line.strip()]
            where = [line.strip() for line in lines if line.strip().startswith("File ")]
            self.problems.append(f"{kind}: exception box: {lines[0][:200]} (innermost: "
                                 f"{where[-1] if where else '?'}; full text in "
                                 f"{EXCEPTIONS_FILE.relative_to(ROOT)})")
            raise AppShowsException(kind)
        return seconds

    async def metrics(self) -> dict[str, str]:
        return await self.page.evaluate(METRICS_JS)

    def model_box(self):
        """The sidebar's "Active model" selectbox (a combobox input showing the label)."""
        return self.page.get_by_role("combobox", name="Active model")

    async def sidebar_model(self) -> str:
        return await self.model_box().input_value()

    async def choose_model(self, label: str):
        """Through the selectbox UI: click it, then click the option's text."""

        async def pick():
            await self.model_box().click()
            await self.page.get_by_role("option", name=label, exact=True).click()

        if await self.sidebar_model() == label:  # the default: picking it again runs nothing
            await pick()
            await asyncio.sleep(0.5)
            return
        await self.act("model switch", pick, HOME)

    async def type_sentence(self, sentence: str):
        box = self.page.get_by_label("Source sentence")

        async def type_it():
            await box.fill(sentence)
            await box.press("Enter")

        await self.act("sentence", type_it, HOME, text=f"Source: {sentence!r}")

    async def navigate(self, page_spec):
        link_text = page_spec[0]
        nav = self.page.locator('[data-testid="stSidebarNav"]')
        link = nav.locator("a").filter(has_text=link_text)
        if not await link.count() or not await link.first.is_visible():
            more = self.page.locator('[data-testid="stSidebarNavViewButton"]')
            if await more.count():
                await more.first.click()
        await self.act(f"page {page_spec[1] or 'Home'}", lambda: link.first.click(), page_spec)


async def drive_session(s: Session, label: str, sentence: str, expected: str, pages: list,
                        barrier: asyncio.Barrier) -> dict:
    """Open, [all open], pick model, type sentence, visit pages, [all done], home again.
    A failure is recorded and the session still meets the others at each barrier."""
    seen = {}

    async def step(name, work):
        try:
            await work()
        except AppShowsException:
            s.problems.append(f"{name}: stopped there (the app showed the exception above)")
            return False
        except Exception as err:  # noqa: BLE001 - reported per session
            s.problems.append(f"{name} aborted: {type(err).__name__}: "
                              f"{str(err).splitlines()[0][:300]}")
            return False
        return True

    async def work():
        await s.choose_model(label)
        if await s.sidebar_model() != label:
            s.problems.append(f"selectbox shows {await s.sidebar_model()!r}, not {label!r}")
        await s.type_sentence(sentence)
        seen["first"] = (await s.metrics()).get("Translation of the sentence")
        for spec in pages:
            await s.navigate(spec)
            value = await s.page.get_by_label("Source sentence").input_value()
            if value != sentence:
                s.problems.append(f"on {spec[1]}: sidebar sentence is {value!r}, not {sentence!r}")
            model = await s.sidebar_model()
            if model != label:
                s.problems.append(f"on {spec[1]}: sidebar model is {model!r}, not {label!r}")

    async def again():
        await s.navigate(HOME)
        seen["again"] = (await s.metrics()).get("Translation of the sentence")

    opened = await step("open", s.open)
    await barrier.wait()  # every session open before any starts work: all held at once
    worked = opened and await step("work", work)
    await barrier.wait()  # every session has been busy before anyone re-reads home
    if worked and await step("home again", again):
        for when in ("first", "again"):
            if seen.get(when) != expected:
                s.problems.append(f"translation ({when}) is {seen.get(when)!r}, "
                                  f"expected {expected!r}")
    s.done = worked and "again" in seen
    return seen


def cpu_seconds(server_pid: int) -> dict[str, float]:
    """CPU seconds (user + system) used so far by the server, by Chromium's processes (the
    browser, its renderers and GPU process) and by this bench (its Python and Playwright's
    driver), from /proc: where the two cores went."""
    tick = os.sysconf("SC_CLK_TCK")
    used = {"server": 0.0, "Chromium": 0.0, "bench": 0.0}
    mine = {os.getpid()}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        seconds = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        ppid, pid = int(fields[1]), int(entry.name)
        if pid == server_pid:
            used["server"] += seconds
        elif b"chromium" in cmdline:
            used["Chromium"] += seconds
        elif pid in mine or ppid in mine or b"playwright" in cmdline:
            used["bench"] += seconds
    return used


async def load_phase(browser, url, n_sessions, labels, expected, n_pages, monitor):
    sessions = []
    for i in range(n_sessions):
        context = await browser.new_context(viewport={"width": 1400, "height": 1000})
        await context.add_init_script(INIT_JS)
        context.set_default_timeout(60_000)  # a click or fill, on two busy cores
        sessions.append(Session(i, context, url))
    barrier = asyncio.Barrier(n_sessions)
    plan = [(labels[i % len(labels)], sentence_for(i)) for i in range(n_sessions)]
    monitor.phase = "sessions"
    cpu_before = cpu_seconds(monitor.pid)
    t0 = time.perf_counter()
    results = await asyncio.gather(
        *(drive_session(s, label, sentence, expected[label, sentence], NAV_PAGES[:n_pages],
                        barrier) for s, (label, sentence) in zip(sessions, plan)),
        return_exceptions=True)
    wall = time.perf_counter() - t0
    cpu_after = cpu_seconds(monitor.pid)
    monitor.cpu = {name: cpu_after[name] - cpu_before[name] for name in cpu_after}
    for s, r in zip(sessions, results):
        if isinstance(r, BaseException):
            s.problems.append(f"aborted: {type(r).__name__}: {str(r).splitlines()[0][:300]}")
    shots = ARTIFACTS / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    for s in sessions:
        try:
            await s.page.screenshot(path=str(shots / f"bench-load-session{s.index}.png"))
        except Exception:  # noqa: BLE001, S110 - a screenshot is a courtesy
            pass
    for s in sessions:
        await s.context.close()
    return sessions, plan, results, wall


async def upload_phase(browser, url, checkpoints, expected_upload, monitor):
    """Upload every checkpoint in one session; RSS after each. Then open the model picker: it
    lists the uploads the session kept; pick the oldest of them again (the newest is active)."""
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    await context.add_init_script(INIT_JS)
    context.set_default_timeout(60_000)
    s = Session(-1, context, url)
    monitor.phase = "uploads"
    rows, listed, reselect = [], [], None

    def shown_right(metrics, name):
        return metrics.get("Model") == name and squash(
            metrics.get("Translation of the sentence", "")) == squash(
                expected_upload[name] or "(empty)")

    try:
        await s.open()
        file_input = s.page.locator('[data-testid="stFileUploader"] input[type="file"]')
        for k, (path, name, sha) in enumerate(checkpoints, 1):
            seconds = await s.act("upload", lambda p=path: file_input.set_input_files(str(p)),
                                  HOME, text=name)
            metrics = await s.metrics()
            if not shown_right(metrics, name):
                s.problems.append(f"upload {k}: home shows {metrics}, expected model {name!r} "
                                  f"translating to {expected_upload[name]!r}")
            await asyncio.sleep(1.0)  # let the run's garbage go
            rows.append((k, name, sha[:8], seconds, monitor.now_mb(), shown_right(metrics, name)))
        await s.model_box().click()
        listed = [o for o in await s.page.get_by_role("option").all_inner_texts()
                  if "(uploaded," in o]
        await s.page.keyboard.press("Escape")
        if len(listed) > 1:
            oldest = listed[0]
            name = oldest.split(".ckpt")[0]

            async def pick_oldest():
                await s.model_box().click()
                await s.page.get_by_role("option", name=oldest, exact=True).click()

            seconds = await s.act("re-pick an upload", pick_oldest, HOME, text=name)
            reselect = (name, seconds, shown_right(await s.metrics(), name))
        await s.page.screenshot(path=str(ARTIFACTS / "screenshots" / "bench-load-uploads.png"))
    except Exception as err:  # noqa: BLE001 - reported with the rest
        s.problems.append(f"aborted: {type(err).__name__}: {str(err).splitlines()[0][:300]}")
    await context.close()
    return s, rows, listed, reselect


def sentence_for(i: int) -> str:
    if i < len(SENTENCES):
        return SENTENCES[i]
    day = 1 + (i * 7) % 28
    return f"{day} {['March', 'July', 'October', 'May'][i % 4]} {1950 + i}"


def models_module():
    import explorer.models

    return explorer.models


def _against(seconds: float, goal: float) -> str:
    """A latency and its goal: met, or how far off."""
    verdict = "met" if seconds <= goal else f"NOT met, {seconds - goal:.2f} s over"
    return f"{seconds:.2f} s (goal <= {goal:g} s: {verdict})"


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    rank = q / 100 * (len(values) - 1)
    lo, hi = int(rank), min(int(rank) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (rank - lo)


async def main_async(args):
    from playwright.async_api import async_playwright

    from explorer.models import MAX_MODELS, bundled_checkpoints
    from explorer.state import DEFAULT_SOURCE
    from transformer import load_checkpoint

    t_start = time.perf_counter()
    port = kit.free_port()
    url = f"http://127.0.0.1:{port}"
    proc, log = start_server(port)
    t_popen = time.perf_counter()
    monitor = RssMonitor(proc.pid)
    monitor.start()
    try:
        # While the server starts: the expected answers and the uploads, in this process.
        paths = bundled_checkpoints()
        labels = list(paths)
        plan = [(labels[i % len(labels)], sentence_for(i)) for i in range(args.sessions)]
        t0 = time.perf_counter()
        expected, by_sentence = expected_translations(plan, paths)
        tmp = tempfile.TemporaryDirectory(prefix="bench-load-")
        checkpoints = tiny_checkpoints(args.uploads, Path(tmp.name))
        expected_upload = {name: load_checkpoint(p).translate(DEFAULT_SOURCE).text
                           for p, name, _ in checkpoints}
        prep = time.perf_counter() - t0
        wait_healthy(url, proc)
        startup = time.perf_counter() - t_popen
        rss_idle = monitor.now_mb()
        print(f"server pid {proc.pid} on {url}; healthy {startup:.1f} s after start "
              f"(meanwhile: expected answers and {args.uploads} tiny checkpoints built in {prep:.1f} s)")
        print(f"server RSS idle: {rss_idle:.0f} MB; models cached at most: {MAX_MODELS}; "
              f"log: {LOG.relative_to(ROOT)}")
        distinct = len({expected[p] for p in plan}) == len(plan)
        print(f"plan: {args.sessions} sessions over {len(labels)} bundled models; expected "
              f"translations all distinct: {distinct}")

        async with async_playwright() as p:
            browser = await p.chromium.launch(**kit.launch_options())
            sessions, plan, results, wall = await load_phase(
                browser, url, args.sessions, labels, expected, args.pages, monitor)
            rss_after_sessions = monitor.now_mb()
            upload_session, upload_rows, listed, reselect = await upload_phase(
                browser, url, checkpoints, expected_upload, monitor)
            await browser.close()
        hwm_mb = (proc_status(proc.pid, "VmHWM") or 0) / 1024
        rss_end = monitor.now_mb()
    finally:
        monitor.stopped.set()
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()

    # ---- report -------------------------------------------------------------------------
    EXCEPTIONS_FILE.write_text("\n".join(EXCEPTIONS) or "no exception box was shown\n")
    print()
    print("=" * 100)
    print(f"PHASE 1: {args.sessions} concurrent sessions ({wall:.1f} s wall)")
    print("-" * 100)
    print(f"{'#':>2}  {'model':<28} {'sentence':<16} {'expected':<12} {'seen':<12} "
          f"{'again':<12} {'ws':>5}  result")
    held = 0
    for s, (label, sentence), r in zip(sessions, plan, results):
        seen = r if isinstance(r, dict) else {}
        ws = f"{s.websockets_opened}/{s.websockets_closed}"
        ok = not s.problems and isinstance(r, dict)
        held += s.websockets_opened == 1 and s.websockets_closed == 0 and isinstance(r, dict)
        print(f"{s.index:>2}  {label:<28} {sentence:<16} {expected[label, sentence]:<12} "
              f"{seen.get('first')!s:<12} {seen.get('again')!s:<12} {ws:>5}  "
              f"{'ok' if ok else 'FAIL'}")
        for problem in s.problems:
            print(f"      ! {problem}")
    model_specific = sum(len(by_sentence[sentence]) > 1 for _, sentence in plan)
    print(f"(ws = websockets opened/closed while the session ran: 1/0 = one Streamlit session "
          f"kept through every page; {model_specific}/{len(plan)} sentences are translated "
          f"differently by the bundled models, so their check also catches a wrong model)")
    isolation = all(not s.problems for s in sessions) and \
        all(isinstance(r, dict) for r in results)

    cores = os.cpu_count() or 1
    spent = ", ".join(f"{name} {sec:.1f} s ({sec / (wall * cores):.0%})"
                      for name, sec in monitor.cpu.items())
    print(f"where the CPU went in this phase ({wall:.1f} s x {cores} cores = "
          f"{wall * cores:.0f} core-seconds): {spent}")

    served = [sec for s in sessions for _, sec in s.served]
    print(f"until the server's run finished (before the browser draws): p50 "
          f"{percentile(served, 50):.2f} s, p95 {percentile(served, 95):.2f} s "
          f"({len(served)} actions)")

    lat = [sec for s in sessions for _, sec in s.latencies]
    kinds: dict[str, list[float]] = {}
    for s in sessions:
        for kind, sec in s.latencies:
            kinds.setdefault(kind, []).append(sec)
    print()
    print(f"{'render latency (s)':<24} {'n':>4} {'p50':>7} {'p95':>7} {'max':>7}")
    for kind, values in kinds.items():
        print(f"  {kind:<22} {len(values):>4} {percentile(values, 50):>7.2f} "
              f"{percentile(values, 95):>7.2f} {max(values):>7.2f}")
    print(f"  {'all actions':<22} {len(lat):>4} {percentile(lat, 50):>7.2f} "
          f"{percentile(lat, 95):>7.2f} {max(lat, default=float('nan')):>7.2f}")

    print()
    print("=" * 100)
    print(f"PHASE 2: one session uploads {len(upload_rows)} distinct tiny checkpoints "
          f"(cache holds {MAX_MODELS} models; the {len(labels)} bundled ones were loaded above)")
    print("-" * 100)
    print(f"{'k':>3}  {'checkpoint':<16} {'sha256':<9} {'latency s':>9} {'RSS MB':>8} "
          f"{'vs prev':>8}  shown right")
    prev = rss_after_sessions
    for k, name, sha, sec, mb, ok in upload_rows:
        print(f"{k:>3}  {name:<16} {sha:<9} {sec:>9.2f} {mb:>8.1f} {mb - prev:>+8.1f}  "
              f"{'yes' if ok else 'NO'}")
        prev = mb
    for problem in upload_session.problems:
        print(f"      ! {problem}")
    kept = getattr(models_module(), "MAX_UPLOADS_PER_SESSION", None)
    print(f"the model picker lists {len(listed)} of this session's uploads"
          + (f" (it keeps at most MAX_UPLOADS_PER_SESSION = {kept})" if kept else "")
          + (f": {', '.join(o.split(' (')[0] for o in listed)}" if listed else ""))
    if reselect:
        print(f"picking {reselect[0]} again (the oldest upload kept): "
              f"{'shown right' if reselect[2] else 'WRONG'} after {reselect[1]:.2f} s")
    plateau_text, plateau = "n/a", None
    if len(upload_rows) >= 4:
        mbs = [r[4] for r in upload_rows]
        half = len(mbs) // 2
        first_half = mbs[half - 1] - rss_after_sessions  # growth over uploads 1..half
        second_half = mbs[-1] - mbs[half - 1]  # growth over uploads half+1..last
        plateau = second_half <= max(20.0, 0.05 * mbs[-1]) and second_half <= max(first_half, 20)
        plateau_text = (f"{'yes' if plateau else 'NO'}: {first_half:+.1f} MB over uploads "
                        f"1-{half}, {second_half:+.1f} MB over uploads {half + 1}-{len(mbs)} "
                        f"(RSS after upload {half}: {mbs[half - 1]:.1f} MB, after the last: "
                        f"{mbs[-1]:.1f} MB)")

    print()
    print("=" * 100)
    print("SUMMARY")
    print("-" * 100)
    rows = [
        ("sessions held concurrently", (f"{held}/{args.sessions} (all open at once, one "
                                        f"websocket each from first load to the end)")),
        ("isolation check passed", "yes" if isolation else "NO"),
        ("page render latency p50", _against(percentile(lat, 50), 1.0)),
        ("page render latency p95", _against(percentile(lat, 95), 3.0)),
        ("page render latency max", (f"{max(lat, default=float('nan')):.2f} s "
                                     f"({len(lat)} actions)")),
        ("server RSS idle", f"{rss_idle:.0f} MB"),
        ("server peak RSS, sessions phase",
         (f"{monitor.phase_peak_kb.get('sessions', 0) / 1024:.0f} MB (after: "
          f"{rss_after_sessions:.0f} MB)")),
        ("server peak RSS, uploads phase", f"{monitor.phase_peak_kb.get('uploads', 0) / 1024:.0f} MB"),
        ("server peak RSS (polled / VmHWM)", f"{monitor.peak_kb / 1024:.0f} MB / {hwm_mb:.0f} MB"),
        ("RSS after each upload (MB)", " ".join(f"{r[4]:.0f}" for r in upload_rows)),
        ("RSS plateaus over uploads", plateau_text),
        ("uploads shown right", f"{sum(r[5] for r in upload_rows)}/{len(upload_rows)}" + (
            f"; oldest kept upload re-picked: {'ok' if reselect[2] else 'WRONG'}"
            if reselect else "")),
        ("server RSS at the end", f"{rss_end:.0f} MB"),
        ("total wall time", f"{time.perf_counter() - t_start:.0f} s"),
    ]
    for name, value in rows:
        print(f"{name:<34} {value}")
    ok = isolation and held == args.sessions and plateau is not False and \
        not upload_session.problems and all(r[5] for r in upload_rows) and \
        (reselect is None or reselect[2])
    print(f"RESULT: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=8, help="concurrent browser sessions")
    parser.add_argument("--uploads", type=int, default=12, help="distinct checkpoints uploaded")
    parser.add_argument("--pages", type=int, default=3, choices=range(len(NAV_PAGES) + 1),
                        help="pages each session visits after home (Attention maps, "
                             "Step-by-step decoding, Tokenization, Model)")
    args = parser.parse_args()
    sys.exit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
