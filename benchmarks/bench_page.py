"""The page's cost while it stays open for a long live demo: headless Chromium on the real app while a model
trains on the same CPU.

    python benchmarks/bench_page.py [--minutes 30] [--quick] [--home DIR] [--live-tab Train]

1. It copies the lab home given with `--home` (a home with the demo zoo trained: `python -m lab_models zoo --home
   DIR`, so that every tab has something to draw) into a temporary folder, or starts from an empty one, launches
   `python app.py` on it as a user does, and starts a long GPT run at the tiny preset through the page's own endpoint
   (`/start_training`, the demo zoo's first family; it trains for the whole measurement).
2. **Headless**: the trainer's tokens/s and the app's CPU with no page open (`--baseline` seconds, default 120).
3. **Page**: headless Chromium (selenium) opens the page, visits every tab and nested tab once, then stays on the live
   tab (`--live-tab`, default the Train tab with the running run selected: its progress bar and curves redraw while it
   trains) for `--minutes` minutes. Each minute it prints the browser's CPU (every Chromium process, in cores), the
   app's (the server process alone, not its trainer), the trainer's tokens/s, the JS heap after a garbage collection
   (Chrome DevTools Protocol `Performance.getMetrics`), then clicks every top-level tab and back and uses the header's
   language switch both ways, timing each until the tab's content is drawn (shown, no status tracker busy, and no
   change in the page for 300 ms; the 300 ms are not counted). The CPU is measured over the minute's quiet part only
   (the clicks' cost is the latency figure).
4. **Headless** again, and a summary against the targets: the trainer keeps at least 90% of its headless tokens/s
   (the mean of both headless phases), the browser plus the app use under 0.15 of a core on average, every tab
   click and language switch answers in under 1 s, and the JS heap does not grow (its last minute within 10% of the
   first).

`--quick` is a short check of the script itself: 2 minutes of page, 40 s of each headless phase. The figures need a
quiet machine: on a shared one, other jobs take CPU from the trainer in one phase and not in the other. CPU comes from
/proc (`utime + stime`), so this runs on Linux. Exit status 0 when every target is met, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
THROUGHPUT_TARGET = 0.90
CPU_TARGET = 0.15
LATENCY_TARGET_S = 1.0
HEAP_GROWTH_TARGET = 0.10
QUIET_MS = 300
QUIET_S = 48.0  # each minute: this long on the live tab untouched (CPU and tokens/s), then the clicks (about 12 s)
RUN_STEPS = 5_000_000  # longer than any measurement: the run is stopped at the end
NO_SETTINGS = {"headers": ["setting", "value", "default", "what it does"], "data": []}


# ------------------------------------------------------------------------------------------------ processes
def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used (its threads included, not its children); 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(root: int) -> list[int]:
    """Every process below `root` (children, grandchildren, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


@dataclass
class CpuMeter:
    """CPU seconds of a set of processes between two reads; processes that appear in between count from 0."""

    pids: callable
    start: dict = field(default_factory=dict)
    started_at: float = 0.0

    def begin(self) -> None:
        self.start = {pid: cpu_seconds(pid) for pid in self.pids()}
        self.started_at = time.monotonic()

    def cores(self) -> float:
        used = sum(cpu_seconds(pid) - self.start.get(pid, 0.0) for pid in self.pids())
        return used / max(1e-9, time.monotonic() - self.started_at)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch_app(home: Path, port: int, log: Path) -> subprocess.Popen:
    import httpx

    process = subprocess.Popen([sys.executable, "app.py", "--port", str(port), "--home", str(home)], cwd=REPO,
                               env=dict(os.environ, PYTHONPATH=str(REPO)), stdout=log.open("wb"),
                               stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the app exited while starting; see {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.kill()
    raise SystemExit("the app did not answer within 180 s")


# ------------------------------------------------------------------------------------------------ the trainer
def start_run(url: str) -> str:
    """A long GPT run at the tiny preset, queued through the page's own endpoint; returns its run id."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    inputs = ["gpt", "tiny", "", "", RUN_STEPS, 0, "cpu", NO_SETTINGS, True, 1.0, False, 0, False, 0, False, 0]
    return client.predict(*inputs, api_name="/start_training")


def stop_run(url: str, run_id: str) -> None:
    from gradio_client import Client

    try:
        Client(url, verbose=False).predict(run_id, api_name="/stop_run")
    except Exception as error:  # noqa: BLE001 - the app is shut down next anyway
        print(f"  (stopping {run_id}: {error})")


def trained_tokens(run_dir: Path) -> tuple[float, int]:
    """(now, tokens trained so far) from the run's newest metrics row (steps x batch x sequence length)."""
    config = json.loads((run_dir / "config.json").read_text())
    per_step = int(config["batch_size"]) * int(config["seq_len"])
    step = 0
    path = run_dir / "metrics.jsonl"
    if path.is_file():
        for line in reversed(path.read_text().splitlines()):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line being written
            if row.get("split", "train") != "val" and isinstance(row.get("step"), int):
                step = row["step"]
                break
    return time.monotonic(), step * per_step


def wait_training(run_dir: Path, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (run_dir / "config.json").is_file() and trained_tokens(run_dir)[1] > 0:
            return
        time.sleep(1.0)
    raise SystemExit(f"the run in {run_dir} did not start training within {timeout:.0f} s")


def tokens_per_second(run_dir: Path, seconds: float, meter: CpuMeter | None = None) -> tuple[float, float]:
    """The trainer's tokens/s over the next `seconds` (and the meter's cores over the same time)."""
    if meter is not None:
        meter.begin()
    t0, n0 = trained_tokens(run_dir)
    time.sleep(seconds)
    t1, n1 = trained_tokens(run_dir)
    return (n1 - n0) / max(1e-9, t1 - t0), (meter.cores() if meter is not None else float("nan"))


# ------------------------------------------------------------------------------------------------ the browser
# After a click: the time until the page is drawn: the target shown, no status tracker busy, no DOM change for
# QUIET_MS (not counted). Runs in the page; calls back with the seconds (or -1 on timeout).
TIMED_CLICK_JS = """
const [element, readyExpression, quietMs, timeoutMs, done] = arguments;
const start = performance.now();
let last = start;
const observer = new MutationObserver(() => { last = performance.now(); });
observer.observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
element.click();
const busy = () => Array.from(document.querySelectorAll(".wrap.full:not(.hide), .wrap.minimal:not(.hide)"))
  .some((tracker) => tracker.getClientRects().length > 0);
const check = () => {
  const now = performance.now();
  let ready = false;
  try { ready = Boolean(eval(readyExpression)); } catch (error) { ready = false; }
  if (ready && !busy() && now - last >= quietMs) { observer.disconnect(); done((last - start) / 1000); return; }
  if (now - start > timeoutMs) { observer.disconnect(); done(-1); return; }
  setTimeout(check, 25);
};
setTimeout(check, 25);
"""


def chromium(profile: Path, width: int = 1400):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--window-size={width},1800", "--lang=en-US",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.add_experimental_option("prefs", {"intl.accept_languages": "en-US"})
    service = Service(CHROMEDRIVER)
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_script_timeout(120)
    driver.execute_cdp_cmd("Performance.enable", {})
    return driver, service


def tab_buttons(driver, nested: bool = False) -> list:
    """The shown tab buttons: the page's tab bar, or (nested) those of the tab bars inside the shown tab."""
    bars = [bar for bar in driver.find_elements("css selector", "[role=tablist]") if bar.is_displayed()]
    bars = bars[1:] if nested else bars[:1]
    return [button for bar in bars for button in bar.find_elements("css selector", "button[role=tab]")
            if button.is_displayed()]


def timed_click(driver, element, ready: str = "true", timeout_s: float = 60.0) -> float:
    """Click `element` and return the seconds until the page is drawn (`ready` true, no status tracker busy, quiet);
    inf past `timeout_s`, which stays below the script timeout and selenium's own 120 s read timeout."""
    seconds = driver.execute_async_script(TIMED_CLICK_JS, element, ready, QUIET_MS, timeout_s * 1000)
    return float("inf") if seconds < 0 else float(seconds)


def click_tab(driver, position: int) -> float:
    """Click the page's tab at `position` and time it until its panel is drawn."""
    button = tab_buttons(driver)[position]
    ready = ("Array.from(document.querySelectorAll('[role=tabpanel]')).some("
             "(panel) => panel.getClientRects().length > 0 && panel.children.length > 0)")
    return timed_click(driver, button, ready)


def switch_language(driver, to: str) -> float:
    """The header's switch to 中文 ("zh") or English ("en"), timed until the tab bar reads the new language."""
    label = "中文" if to == "zh" else "English"
    element = next(e for e in driver.find_elements("xpath", f"//label[normalize-space()='{label}']")
                   if e.is_displayed())
    first = "掩码浏览器" if to == "zh" else "Mask Explorer"
    ready = f"(document.querySelector('button[role=tab]') || {{}}).textContent === {json.dumps(first)}"
    return timed_click(driver, element, ready)


def js_heap_mb(driver) -> float:
    """The JS heap in use after a full garbage collection (Chrome DevTools Protocol), in MB."""
    driver.execute_cdp_cmd("HeapProfiler.collectGarbage", {})
    metrics = {m["name"]: m["value"] for m in driver.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]}
    return metrics.get("JSHeapUsedSize", float("nan")) / 2**20


def visit_everything(driver) -> float:
    """Every tab once, and inside each every nested tab; returns the slowest click (s)."""
    slowest = 0.0
    for position in range(len(tab_buttons(driver))):
        slowest = max(slowest, click_tab(driver, position))
        for index in range(len(tab_buttons(driver, nested=True))):
            nested = tab_buttons(driver, nested=True)
            if index < len(nested):
                slowest = max(slowest, timed_click(driver, nested[index]))
    return slowest


def open_live_tab(driver, live_tab: str, run_id: str) -> None:
    names = [button.text for button in tab_buttons(driver)]
    if live_tab not in names:
        raise SystemExit(f"no tab {live_tab!r}: the page has {', '.join(names)}")
    click_tab(driver, names.index(live_tab))
    if live_tab == "Train":  # select the running run: its progress bar and curves redraw while it trains
        box = driver.find_element("css selector", "#train-run input")
        box.click()
        box.send_keys(run_id)
        box.send_keys("\n")
        time.sleep(3.0)


# ------------------------------------------------------------------------------------------------ the measurement
@dataclass
class Minute:
    minute: int
    browser: float
    app: float
    tokens_per_s: float
    heap_mb: float
    slowest_click: float
    switch_zh: float
    switch_en: float


def probe(driver, live_tab: str) -> tuple[float, float, float]:
    """Click every other tab and back, then switch the language to Chinese and back: (slowest click, both switches)."""
    names = [button.text for button in tab_buttons(driver)]
    home = names.index(live_tab)
    slowest = 0.0
    for position in range(len(names)):
        if position != home:
            slowest = max(slowest, click_tab(driver, position), click_tab(driver, home))
    return slowest, switch_language(driver, "zh"), switch_language(driver, "en")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=int, default=30, help="minutes on the live tab (default 30)")
    parser.add_argument("--baseline", type=float, default=120.0, help="seconds of each headless phase (default 120)")
    parser.add_argument("--quick", action="store_true", help="2 minutes of page, 40 s of each headless phase")
    parser.add_argument("--home", type=Path, help="a lab home to copy (e.g. one with the demo zoo trained)")
    parser.add_argument("--live-tab", default="Train", help="the tab to stay on (default Train)")
    args = parser.parse_args(argv)
    if args.quick:
        args.minutes, args.baseline = 2, 40.0
    if CHROMIUM is None or CHROMEDRIVER is None:
        raise SystemExit("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")

    work = Path(tempfile.mkdtemp(prefix="bench-page-"))
    home = work / "home"
    if args.home:
        shutil.copytree(args.home.expanduser(), home, ignore=shutil.ignore_patterns("checkpoint", "*.tmp*"))
    else:
        home.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    app_log = work / "app.log"
    print(f"lab home {home} (copied from {args.home or 'nothing'}); app log {app_log}")
    app = launch_app(home, port, app_log)
    driver = None
    run_id = None
    try:
        run_id = start_run(url)
        run_dir = home / "runs" / run_id
        wait_training(run_dir)
        app_meter = CpuMeter(lambda: [app.pid])
        headless_before, app_alone = tokens_per_second(run_dir, args.baseline, app_meter)
        print(f"headless: {headless_before:,.0f} tokens/s; the app alone {app_alone:.3f} cores")

        driver, service = chromium(work / "profile")
        browser_pids = lambda: [pid for pid in descendants(service.process.pid)]  # noqa: E731
        started = time.monotonic()
        driver.get(url)
        _wait(lambda: tab_buttons(driver), 120, "the page")
        load_s = time.monotonic() - started
        first_visit = visit_everything(driver)
        open_live_tab(driver, args.live_tab, run_id)
        print(f"page loaded in {load_s:.1f} s; every tab and nested tab visited (slowest first click "
              f"{first_visit:.2f} s); now on {args.live_tab}")
        print(f"{'min':>3}  {'browser':>7}  {'app':>5}  {'both':>5}  {'tokens/s':>9}  {'heap MB':>7}  "
              f"{'slowest tab':>11}  {'to 中文':>7}  {'to en':>6}")
        minutes: list[Minute] = []
        for minute in range(1, args.minutes + 1):
            browser_meter, app_meter = CpuMeter(browser_pids), CpuMeter(lambda: [app.pid])
            browser_meter.begin()
            rate, app_cores = tokens_per_second(run_dir, QUIET_S, app_meter)
            browser_cores = browser_meter.cores()
            heap = js_heap_mb(driver)
            slowest, to_zh, to_en = probe(driver, args.live_tab)
            row = Minute(minute, browser_cores, app_cores, rate, heap, slowest, to_zh, to_en)
            minutes.append(row)
            print(f"{minute:>3}  {browser_cores:7.3f}  {app_cores:5.3f}  {browser_cores + app_cores:5.3f}  "
                  f"{rate:9,.0f}  {heap:7.1f}  {slowest:10.2f}s  {to_zh:6.2f}s  {to_en:5.2f}s", flush=True)
        driver.quit()
        driver = None
        headless_after, _ = tokens_per_second(run_dir, args.baseline)
        print(f"headless again: {headless_after:,.0f} tokens/s")
        return summarize(minutes, headless_before, headless_after, app_alone)
    finally:
        if driver is not None:
            driver.quit()
        if run_id is not None:
            stop_run(url, run_id)
        app.send_signal(signal.SIGTERM)
        try:
            app.wait(timeout=60)
        except subprocess.TimeoutExpired:
            app.kill()
        shutil.rmtree(work, ignore_errors=True)


def _wait(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise SystemExit(f"{what} did not appear within {timeout:.0f} s")


def summarize(minutes: list[Minute], before: float, after: float, app_alone: float) -> int:
    headless = (before + after) / 2
    page = statistics.mean(m.tokens_per_s for m in minutes)
    cores = statistics.mean(m.browser + m.app for m in minutes)
    click = max(m.slowest_click for m in minutes)
    switch = max(max(m.switch_zh, m.switch_en) for m in minutes)
    first, last = minutes[0].heap_mb, minutes[-1].heap_mb
    results = [
        ("trainer throughput with the page / headless", page / headless, f">= {THROUGHPUT_TARGET:.2f}",
         page / headless >= THROUGHPUT_TARGET, f"{page:,.0f} / {headless:,.0f} tokens/s"),
        ("browser + app CPU (cores, mean)", cores, f"< {CPU_TARGET:.2f}", cores < CPU_TARGET,
         f"browser {statistics.mean(m.browser for m in minutes):.3f}, app {statistics.mean(m.app for m in minutes):.3f}"
         f" (the app alone, no page: {app_alone:.3f})"),
        ("slowest tab click (s)", click, f"< {LATENCY_TARGET_S:.1f}", click < LATENCY_TARGET_S, ""),
        ("slowest language switch (s)", switch, f"< {LATENCY_TARGET_S:.1f}", switch < LATENCY_TARGET_S, ""),
        ("JS heap, last minute / first", last / first if first else float("nan"),
         f"<= {1 + HEAP_GROWTH_TARGET:.2f}", first > 0 and last <= first * (1 + HEAP_GROWTH_TARGET),
         f"{first:.1f} -> {last:.1f} MB"),
    ]
    print("\nsummary")
    for name, value, target, met, detail in results:
        print(f"  {name:<45} {value:8.3f}  target {target:<7} {'met' if met else 'MISSED'}  {detail}")
    return 0 if all(met for *_, met, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
