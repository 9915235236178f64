"""The app on a model named at start (issue 40, goal 6): `python -m explorer.serve --model DIR`
usable (its first translation shown) within 1.2x transformers' files to first translation, and
every page's first visit on it within 3 s.

    .venv/bin/python bench/app_named.py DIR [DIR ...] [--tokens 24 | --as-saved] [--repeats N]
                                        [--torch-threads N] [--no-wait]

DIR: Hugging Face model folders (bench/real_models.py builds random-weight ones of the real
sizes in /work/models: opus-mt-en-de, t5-small, bart-base, nllb-200-distilled-600M, ...). For
each, in one run, with the folder's files read into the page cache before each side
(bench.real_models.in_page_cache, as a model used before):

1. transformers (HF_PYTHON, by default /work/hfenv/bin/python; bench.real_models.hf_python and
   run: a fresh process): AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=float32) and
   AutoTokenizer.from_pretrained(folder), then model.generate(**tok(SENTENCE)) with nothing
   overridden, so the folder's generation_config.json decides the search (beam or greedy,
   max_length, forced and bad ids, no_repeat_ngram_size, ...), then tok.decode(ids,
   skip_special_tokens=True). Timed from the command (the process started) to the decoded text,
   which is what the ratio uses; the child's own import + load + generate (what
   bench/real_models.py calls files to first translation) is printed beside it.
2. the app: the server as `make run MODEL=DIR` starts it (testkit.browser.start_server with
   `--model DIR`: explorer.serve, its warm start), Debian's Chromium (headless, launch_options)
   opened at the server's health answer, timed from the command to the home page's
   "Translation of the sentence" metric (bench.cold_start.opened_at_start, which
   bench/cold_start.py's from_the_command uses for the bundled model). The named model is the
   active one (explorer.state.default_model_choice: the first --model), checked on the page: the
   sidebar's "Active model" picker must name the folder (the "Model" metric shows its name).
   The home page translates SENTENCE, the sidebar's default (explorer.state.DEFAULT_SOURCE, the
   same for every model), with the model's generation config (explorer.results.translation, the
   sidebar's Search at "As its generation config says": OpenedModel.generate with the settings
   our reader makes of the same generation_config.json, transformers' greedy or beam search,
   max_length capped to the model's step budget where it is beyond it). The two texts are
   compared, whitespace runs as one space (the page trims the ends; Home.py shows an empty one
   as "(empty)").
3. in the same browser session (no reload: a user's clicks in the top bar, a section and then
   the page's link), every page of explorer.pages.PAGES but Home (whose first visit is step 2's),
   in menu order, each timed from the click on its link until the script's run after it ended
   (`[data-testid="stApp"]` seen leaving "notRunning" and back), with no exception box
   (`stException`) shown; goal 3 s. By default the pages are visited after the warm start's
   "Warm start: ... ready" line in the server log (the named model's other compiled functions
   prepared in the background while the user reads the first page, explorer.warm); --no-wait
   visits them at once.

The folders hold random weights: such a model seldom ends its translation, so the generation
config's max_length decides its length (opus-mt-en-de: 511 tokens of a 4-beam search, 143 s in
transformers on this machine). So that both sides decode what a real translation costs, by
default each side reads a copy of the folder (hard links to its files, in a temporary folder
beside it) whose generation_config.json has min_new_tokens and max_new_tokens set to --tokens
(24, as bench/real_models.py decodes) and every other setting as saved; both sides then decode
exactly that many tokens with the search the config says (without min_new_tokens the random
nllb-200-distilled-600M ended at its first token). --as-saved: the folder as it is.

--repeats N: N starts of each side, alternating (transformers, then the app), the ratio that of
the medians, the pages visited on the app's last start. On this 2-core machine shared with
other work, transformers' generate is the noisiest figure: torch's two threads (its default
here) wait on each other while other processes hold the cores, and its first generate in a
process took 16 to 20 s for bart-base's 24 tokens of 4 beams at load average 3 where one thread
took 1.15 s (two took 1.07 s in a run at load average 2.2). --torch-threads N: OMP_NUM_THREADS for
transformers' process (1: the figure a loaded machine does not inflate, and the stricter ratio).

Prints per model: the app's seconds (server answering, first page drawn, usable) and the start's
progress as the page showed it, transformers' seconds, the ratio against 1.2 ("met" / "NOT
met"), each page's first visit against 3 s, what the server logged; a summary; then a JSON line.
Not part of `make bench`: minutes per model, GBs for the large ones.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.cold_start import opened_at_start
from bench.real_models import COMMON, hf_python, in_page_cache, run
from explorer.pages import DEFAULT, SECTIONS
from explorer.state import DEFAULT_SOURCE
from testkit.browser import launch_options

SENTENCE = DEFAULT_SOURCE  # what the home page translates first, for every model
USABLE_GOAL, PAGE_GOAL = 1.2, 3.0  # x transformers' files to first translation; seconds
NEW_TOKENS = 24
READY = "Warm start:"  # explorer.warm's line when the model's compiled functions are prepared
TIMEOUT_S = 600  # the most one step (the start, a page) may take before it is called failed

THEIRS = COMMON + r"""
t = now(); import torch; from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
r["import"] = now() - t
torch.set_grad_enabled(False)
t = now()
model = AutoModelForSeq2SeqLM.from_pretrained(%(folder)r, dtype=torch.float32).eval()
tok = AutoTokenizer.from_pretrained(%(folder)r)
r["load"] = now() - t
t = now()
ids = model.generate(**tok(%(source)r, return_tensors="pt"))[0].tolist()
r["text"] = tok.decode(ids, skip_special_tokens=True)
r["first"] = now() - t
r["end"] = time.time()  # the clock the parent started the process on
r["new_tokens"], r["num_beams"] = len(ids) - 1, model.generation_config.num_beams or 1
r["threads"] = torch.get_num_threads()
done()
"""

# Marks [data-testid="stApp"] once its script state leaves "notRunning" (RAN reads it):
# a record's old value catches a run that began and ended between two observer calls.
WATCH_RUN = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  window.__ran = false;
  if (window.__runWatch) window.__runWatch.disconnect();
  window.__runWatch = new MutationObserver(records => {
    for (const r of records) {
      if (r.oldValue !== 'notRunning' || app.getAttribute('data-test-script-state') !== 'notRunning')
        window.__ran = true;
    }
  });
  window.__runWatch.observe(app, {attributes: true, attributeOldValue: true,
                                  attributeFilter: ['data-test-script-state']});
}"""
RAN = """() => window.__ran === true && document.querySelector('[data-testid="stApp"]')
  .getAttribute('data-test-script-state') === 'notRunning'"""


def capped_copy(folder: Path, where: Path, tokens: int) -> Path:
    """where/<folder's name>: hard links to folder's files (copies where a link cannot be made),
    its generation_config.json with min_new_tokens = max_new_tokens = tokens and every other
    setting as saved."""
    out = where / folder.name
    out.mkdir()
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name != "generation_config.json":
            try:
                os.link(path, out / path.name)
            except OSError:
                shutil.copy2(path, out / path.name)
    config_path = folder / "generation_config.json"
    config = json.loads(config_path.read_text()) if config_path.exists() else {}
    config["max_new_tokens"] = config["min_new_tokens"] = tokens
    (out / "generation_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return out


def transformers_side(python: str, folder: Path, threads: int | None = None) -> dict:
    """THEIRS on folder in a fresh process (threads: its OMP_NUM_THREADS, torch's threads;
    None: torch's default); "from_command": seconds from its start to the text."""
    in_page_cache(str(folder))
    start = time.time()
    found = run(python, THEIRS, {"OMP_NUM_THREADS": str(threads)} if threads else None,
                folder=str(folder), source=SENTENCE)
    if "end" in found:
        found["from_command"] = found["end"] - start
    return found


def metric_value(page, label: str) -> str:
    """The text of the home page's st.metric labelled `label`."""
    metric = page.locator('[data-testid="stMetric"]').filter(
        has=page.locator('[data-testid="stMetricLabel"]').get_by_text(label, exact=True))
    return metric.locator('[data-testid="stMetricValue"]').first.inner_text().strip()


def picked(page) -> str:
    """The sidebar's "Active model" picker as shown (its text and its input's value)."""
    box = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(
        has_text="Active model")
    field = box.locator("input")
    return " ".join([box.first.inner_text(), field.first.input_value() if field.count() else ""])


def wait_ready(log: str, timeout_s: float) -> float | None:
    """Seconds until the server log holds the warm start's ready line (None: not in timeout_s)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout_s:
        if READY in Path(log).read_text(errors="replace"):
            return time.perf_counter() - t0
        time.sleep(0.1)
    return None


def visit(page, section: str, title: str) -> tuple[float, str]:
    """(Seconds from the click on the page's link in the top bar to the end of the run it
    started; "" or what went wrong: the exception boxes' first lines, a timeout)."""
    page.evaluate(WATCH_RUN)
    page.locator('[data-testid="stTopNavSection"]').filter(
        has=page.get_by_text(section, exact=True)).first.click()
    link = page.locator('[data-testid="stTopNavDropdownLink"]').filter(
        has=page.get_by_text(title, exact=True)).first
    link.wait_for(timeout=10_000)
    t0 = time.perf_counter()
    link.click()
    try:
        page.wait_for_function(RAN, timeout=TIMEOUT_S * 1e3, polling=20)
    except Exception as err:  # noqa: BLE001 - a bench reports, it does not stop
        return time.perf_counter() - t0, f"{type(err).__name__}: {str(err)[:120]}"
    seconds = time.perf_counter() - t0
    boxes = page.locator('[data-testid="stException"]')
    failed = "; ".join(boxes.nth(i).inner_text().strip().splitlines()[0][:120]
                       for i in range(boxes.count()))
    return seconds, failed


def server_lines(log: str) -> list[str]:
    """What the server printed besides Streamlit's lines with the URL."""
    skip = ("You can now view", "URL:", "Local URL", "Network URL", "External URL")
    return [line for line in Path(log).read_text(errors="replace").splitlines()
            if line.strip() and not any(s in line for s in skip)]


def app_side(browser, folder: Path, wait: bool, pages: bool = True) -> dict:
    """The server started with --model folder, the home page until usable, then (pages) every
    page."""
    in_page_cache(str(folder))
    stages: list = []
    found = {"pages": []}
    with opened_at_start(browser, ("--model", str(folder)), TIMEOUT_S, stages) as (
            times, page, log):
        found.update(times)
        found["stages"] = [(round(t, 2), text) for t, text in stages]
        found["model_shown"] = f"{metric_value(page, 'Model')}; picker: {picked(page)}"
        text = metric_value(page, "Translation of the sentence")
        found["text"] = "" if text == "(empty)" else text  # Home.py's word for an empty one
        page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]',
                               timeout=TIMEOUT_S * 1e3)
        if not pages:
            return found
        found["ready_after_usable"] = wait_ready(log, TIMEOUT_S) if wait else None
        for section, listed in SECTIONS.items():
            for p in listed:
                if p.url_path == DEFAULT:
                    continue
                seconds, failed = visit(page, section, p.title)
                found["pages"].append({"page": p.url_path, "seconds": round(seconds, 2),
                                       "error": failed})
                print(f"    {p.title:28s} {seconds:6.2f} s  "
                      f"{'over 3 s by %.2f s' % (seconds - PAGE_GOAL) if seconds > PAGE_GOAL else 'ok'}"
                      f"{'  FAILED: ' + failed if failed else ''}", flush=True)
        found["log"] = server_lines(log)
    return found


def report(name: str, folder: Path, app: dict, theirs: dict, load: list[str]) -> dict:
    line = {"model": name, "folder": str(folder), "load_average": load}
    line["app"] = {k: round(app[k], 2) for k in ("healthy", "drawn", "usable") if k in app}
    line["transformers"] = {k: round(theirs[k], 2) for k in
                            ("from_command", "import", "load", "first") if k in theirs}
    for side, d, key in (("app", app, "usable_runs"), ("transformers", theirs,
                                                       "from_command_runs")):
        if len(d.get(key, ())) > 1:
            line[side]["runs"] = [round(x, 2) for x in d[key]]
    line["new_tokens"], line["num_beams"] = theirs.get("new_tokens"), theirs.get("num_beams")
    line["torch_threads"] = theirs.get("threads")
    if "usable" in app and "from_command" in theirs:
        line["ratio"] = round(app["usable"] / theirs["from_command"], 2)
        line["usable_met"] = line["ratio"] <= USABLE_GOAL
    line["same_text"] = " ".join(app.get("text", "").split()) == " ".join(
        theirs.get("text", "").split())  # the page trims the text's ends
    line["pages"] = app.get("pages", [])
    line["pages_over"] = [p["page"] for p in line["pages"] if p["seconds"] > PAGE_GOAL]
    line["pages_failed"] = [p["page"] for p in line["pages"] if p["error"]]
    if "ratio" in line:
        t = theirs
        if "runs" in line["app"]:
            print(f"  medians of {len(line['app']['runs'])} starts: the app {line['app']['runs']} "
                  f"s, transformers {line['transformers']['runs']} s")
        print(f"  usable after {app['last_usable']:.2f} s (server answering {app['healthy']:.2f} "
              f"s, a page drawn {app['drawn']:.2f} s); transformers {t['last_from_command']:.2f} "
              f"s from the command (import {t['import']:.2f} + load {t['load']:.2f} + generate "
              f"{t['first']:.2f} s, {t['new_tokens']} tokens, {t['num_beams']} beam(s), "
              f"{t['threads']} torch thread(s))"
              + ("  [the last start of each]" if "runs" in line["app"] else ""))
        print(f"  usable / transformers' files to first translation: {app['usable']:.2f} / "
              f"{t['from_command']:.2f} s = {line['ratio']:.2f} (goal <= {USABLE_GOAL}: "
              f"{'met' if line['usable_met'] else 'NOT met'})")
    print(f"  the same translation on both sides: {line['same_text']}"
          + ("" if line["same_text"] else
             f" (app {app.get('text', '')[:80]!r}, transformers {theirs.get('text', '')[:80]!r})"))
    if line["pages"]:
        over = ", ".join(f"{p['page']} {p['seconds']:.2f} s" for p in line["pages"]
                         if p["seconds"] > PAGE_GOAL)
        print(f"  pages' first visits (goal <= {PAGE_GOAL:.0f} s): "
              f"{len(line['pages']) - len(line['pages_over'])} of {len(line['pages'])} met"
              + (f"; over: {over}" if over else "")
              + (f"; failed: {', '.join(line['pages_failed'])}" if line["pages_failed"] else ""))
    return line


def measure(browser, python: str, folder: Path, wait: bool, repeats: int,
            threads: int | None = None) -> tuple[dict, dict]:
    """(transformers' side, the app's side): `repeats` runs of each, alternating, the pages
    visited on the app's last start; each side's last run, its timed figure the median of the
    runs ("from_command", "usable"), every run's in "..._runs"."""
    runs = {"from_command": [], "usable": []}
    for i in range(repeats):
        last = i == repeats - 1
        theirs = transformers_side(python, folder, threads)
        if "from_command" not in theirs:
            print(f"  transformers failed: {theirs.get('failed')}\n{theirs.get('stderr', '')[-1500:]}")
            return theirs, {}
        runs["from_command"].append(theirs["from_command"])
        print(f"  transformers: {theirs['from_command']:.2f} s from the command", flush=True)
        try:
            app = app_side(browser, folder, wait, pages=last)
        except Exception as err:  # noqa: BLE001 - reported, the next model goes on
            app = {"failed": f"{type(err).__name__}: {str(err)[:300]}"}
            print(f"  the app failed: {app['failed']}")
            return theirs, app
        runs["usable"].append(app["usable"])
        if not last:
            print(f"  the app: usable after {app['usable']:.2f} s", flush=True)
    theirs["last_from_command"], app["last_usable"] = theirs["from_command"], app["usable"]
    theirs["from_command"] = statistics.median(runs["from_command"])
    app["usable"] = statistics.median(runs["usable"])
    theirs["from_command_runs"], app["usable_runs"] = runs["from_command"], runs["usable"]
    return theirs, app


def bench(folders: list[Path], tokens: int | None, wait: bool, python: str,
          repeats: int = 1, threads: int | None = None) -> None:
    from playwright.sync_api import sync_playwright

    print(f"sentence {SENTENCE!r}; transformers' side: {python}; "
          + (f"each folder's generation config with min_new_tokens = max_new_tokens = {tokens}"
             if tokens else "each folder as saved")
          + (f"; medians of {repeats} starts of each side, alternating" if repeats > 1 else "")
          + f"; torch's threads: {threads or 'its default'}")
    lines = []
    with sync_playwright() as p:
        browser = p.chromium.launch(**launch_options())
        for folder in folders:
            name = folder.name
            with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".app-named-") as tmp:
                used = capped_copy(folder, Path(tmp), tokens) if tokens else folder
                load = [Path("/proc/loadavg").read_text().split()[:3]]
                print(f"\n== {name} ({used}); load average {' '.join(load[0])}", flush=True)
                theirs, app = measure(browser, python, used, wait, repeats, threads)
                load.append(Path("/proc/loadavg").read_text().split()[:3])
                for at, text in app.get("stages", []):
                    print(f"  start's progress at {at:6.2f} s: {text}")
                if app.get("model_shown") and str(used) not in app["model_shown"]:
                    print(f"  WRONG MODEL on the page: {app['model_shown']!r}")
                elif app.get("model_shown"):
                    print(f"  the page's model: {app['model_shown']}")
                if app.get("ready_after_usable") is not None:
                    print(f"  warm start's ready line {app['ready_after_usable']:.1f} s after "
                          "usable (the pages were visited after it)")
                line = report(name, used, app, theirs, load)
                line["model_shown"] = app.get("model_shown")
                line["stages"] = app.get("stages")
                line["failed"] = app.get("failed")
                for text in app.get("log", [])[-15:]:
                    print(f"  server: {text[:200]}")
                lines.append(line)
        browser.close()
    print(f"\nsummary (goals: usable <= {USABLE_GOAL}x transformers' files to first "
          f"translation; every page's first visit <= {PAGE_GOAL:.0f} s)")
    for line in lines:
        ratio = (f"{line['app']['usable']:6.2f} s / {line['transformers']['from_command']:5.2f} s"
                 f" = {line['ratio']:.2f} {'met' if line['usable_met'] else 'NOT met'}"
                 if "ratio" in line else f"failed: {line.get('failed')}")
        slowest = max(line["pages"], key=lambda p: p["seconds"], default=None)
        pages = (f"pages {len(line['pages']) - len(line['pages_over'])}/{len(line['pages'])} "
                 f"within 3 s (slowest {slowest['page']} {slowest['seconds']:.2f} s)"
                 if slowest else "no pages")
        print(f"{line['model']:26s} usable {ratio}; {pages}")
    print(f"load average {Path('/proc/loadavg').read_text().split()[0]}")
    print("JSON " + json.dumps(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--tokens", type=int, default=NEW_TOKENS,
                        help="min_new_tokens = max_new_tokens written into each side's generation config")
    parser.add_argument("--as-saved", action="store_true",
                        help="the folders as they are (a random model decodes to max_length)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="starts of each side, alternating (medians; the pages on the last)")
    parser.add_argument("--torch-threads", type=int,
                        help="OMP_NUM_THREADS of transformers' process (default: torch's own)")
    parser.add_argument("--no-wait", action="store_true",
                        help="visit the pages at once, not after the warm start's ready line")
    args = parser.parse_args()
    python, why = hf_python()
    if python is None:
        return print(f"skipped: {why}")
    folders = [f.resolve() for f in args.folders]
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        parser.error(f"not folders: {', '.join(missing)}")
    bench(folders, None if args.as_saved else args.tokens, not args.no_wait, python,
          max(1, args.repeats), args.torch_threads)


if __name__ == "__main__":
    main()
