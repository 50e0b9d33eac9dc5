"""The page under load: many clients at once while a run trains, the queue of training starts, and memory over time.

    python benchmarks/bench_load.py [--clients 20] [--calls 10] [--memory-calls 200]

It launches the real app (`python app.py`, as a user does: Gradio's queue with 4 workers) on a free loopback port
with a fresh lab home, trains a tiny GPT run to completion (for Compare), starts a long one, and then:
1. Load: `--clients` gradio_client clients, each in its own thread, run the Mask Explorer (`/explore_masks`, four
   families) `--calls` times each while that run trains. Every call must be answered without an error; the script
   reports p50, p95 and the slowest latency. Target: p95 under 1 s on a 2-core machine.
2. The queue: two clients press Start at the same moment: one run trains and the other waits in the queue (one run
   per device); a third client presses Stop on the running one: that run, and only that run, stops, and the queued
   one starts.
3. Memory: the server's resident memory after the first 20 calls (Mask Explorer and Compare, alternating) and after
   `--memory-calls`; target: within 10% (no leak).
The app and its trainers are stopped at the end; the lab home is a temporary folder, removed afterwards.
tests/reliability/test_load.py runs a small version (5 clients x 3 calls, the queue check) against the test app.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
P95_TARGET_S = 1.0
RSS_GROWTH_TARGET = 0.10
SENTENCES = ["the quick brown fox jumps over the lazy dog", "the small cat sees a red ball in the garden",
             "a farmer sells my apple at the market .", "the girl does not eat the apple today"]
FAMILY_SETS = [["bert", "unilm", "xlnet", "glm"], ["gpt", "t5", "mass", "spanbert"], ["roberta", "mpnet"], ["electra"]]
NO_SETTINGS = {"headers": ["setting", "value", "default", "what it does"], "data": []}


def explorer_inputs(index: int) -> list:
    """The /explore_masks inputs: a sentence, whitespace split, up to four families, a seed, no fixed choices."""
    return [SENTENCES[index % len(SENTENCES)], "whitespace", FAMILY_SETS[index % len(FAMILY_SETS)], index, "", None,
            None, "", None, "", True, True]


def gpt_start_inputs(steps: int) -> list:
    """/start_training inputs for a tiny GPT run of `steps` steps on the CPU (GPT has one objective, clm)."""
    return ["gpt", "tiny", "", "", steps, 0, "cpu", NO_SETTINGS, True, 1.0, False, 0, False, 0, False, 0]


def compare_inputs(run_id: str, index: int) -> list:
    return [[run_id], SENTENCES[index % len(SENTENCES)][:20], "auto", "greedy", 1.0, 0, 1.0, 4, 20, 0, 10, 0]


@dataclass
class LoadResult:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def hammer_mask_explorer(url: str, clients: int, calls: int, deadline_s: float = 300.0) -> LoadResult:
    """`clients` threads, each with its own gradio_client Client, call /explore_masks `calls` times."""
    from gradio_client import Client

    result = LoadResult()
    lock = threading.Lock()

    def one_client(number: int) -> None:
        try:  # a generous connect/read timeout: on a loaded machine the config takes seconds while others draw
            client = Client(url, verbose=False, httpx_kwargs={"timeout": deadline_s})
        except Exception as error:  # noqa: BLE001 - counted, not raised: every client's fate is reported
            with lock:
                result.errors.append(f"client {number} could not connect: {error}")
            return
        for call in range(calls):
            started = time.perf_counter()
            try:
                job = client.submit(*explorer_inputs(number * calls + call), api_name="/explore_masks")
                outputs = job.result(timeout=deadline_s)
                assert len(outputs) == 13 and outputs[0], "an empty answer"  # 4 slots x 3, the split note
            except Exception as error:  # noqa: BLE001
                with lock:
                    result.errors.append(f"client {number} call {call}: {type(error).__name__}: {error}")
                continue
            with lock:
                result.latencies.append(time.perf_counter() - started)

    threads = [threading.Thread(target=one_client, args=(n,), daemon=True) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=deadline_s * calls)
    if any(thread.is_alive() for thread in threads):
        result.errors.append("a client never finished (a hung queue)")
    return result


def run_state(client, run_id: str) -> dict:
    _, _, _, _, details = client.predict(run_id, api_name="/show_run")
    return details


def wait_state(client, run_id: str, states: tuple[str, ...], timeout: float = 300.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        details = run_state(client, run_id)
        if details.get("state") in states:
            return details
        if time.monotonic() > deadline:
            raise AssertionError(f"{run_id} did not reach {states} within {timeout:.0f} s: {details.get('state')}")
        time.sleep(0.3)


def wait_training(client, run_id: str, timeout: float = 300.0) -> dict:
    """Until the run has trained a step (its worker has started and is past its imports)."""
    deadline = time.monotonic() + timeout
    while True:
        details = run_state(client, run_id)
        if details.get("state") == "running" and (details.get("step") or 0) >= 1:
            return details
        if time.monotonic() > deadline or details.get("state") not in ("queued", "running"):
            raise AssertionError(f"{run_id} is not training: {details.get('state')} {details.get('message')}")
        time.sleep(0.3)


def two_starts_and_a_stop(url: str, steps: int = 100_000) -> dict:
    """Two clients start runs at the same moment, a third stops the running one. Returns what each saw; raises
    AssertionError when the queue or the stop got it wrong. Both runs are stopped at the end."""
    from gradio_client import Client

    starters = [Client(url, verbose=False), Client(url, verbose=False)]
    stopper = Client(url, verbose=False)
    started: list[str] = []
    barrier = threading.Barrier(2)

    def press_start(client) -> None:
        barrier.wait()
        started.append(client.predict(*gpt_start_inputs(steps), api_name="/start_training"))

    threads = [threading.Thread(target=press_start, args=(client,)) for client in starters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(started) == 2 and started[0] != started[1], f"two starts gave {started}"
    try:
        deadline = time.monotonic() + 300
        while True:  # one of them gets the device; the other waits behind it
            states = {run_id: run_state(stopper, run_id) for run_id in started}
            running = [r for r, s in states.items() if s["state"] == "running" and s.get("step", 0) >= 1]
            if running:
                break
            assert time.monotonic() < deadline, f"neither run started: {states}"
            time.sleep(0.3)
        first, = running
        second = next(r for r in started if r != first)
        assert states[second]["state"] == "queued" and states[second]["queue_position"] == 1, states[second]
        stopper.predict(first, api_name="/stop_run")  # a third client stops the running one
        stopped = wait_state(stopper, first, ("stopped", "failed", "died", "finished"))
        assert stopped["state"] == "stopped", stopped
        follower = wait_state(stopper, second, ("running", "stopped", "failed", "died", "finished"))
        assert follower["state"] == "running", f"the queued run did not take the device: {follower}"
        return {"stopped": first, "then_running": second, "stopped_at_step": stopped["step"]}
    finally:
        for run_id in started:
            try:
                stopper.predict(run_id, api_name="/stop_run")
            except Exception:  # noqa: BLE001 - already stopped
                pass
        for run_id in started:
            wait_state(stopper, run_id, ("stopped", "failed", "died", "finished"))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"no VmRSS for process {pid}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch_app(home: Path, port: int) -> subprocess.Popen:
    """`python app.py` on loopback, as a user launches it; returns once the page answers."""
    import httpx

    env = dict(os.environ, PYTHONPATH=str(REPO))
    process = subprocess.Popen([sys.executable, "app.py", "--port", str(port), "--home", str(home)], cwd=REPO,
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert process.poll() is None, "the app exited while starting"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.kill()
    raise AssertionError("the app did not answer within 180 s")


def memory_over_calls(url: str, pid: int, compare_run: str, calls: int) -> tuple[float, float]:
    """The server's RSS (MB) after the first 20 and after `calls` alternating Mask Explorer and Compare calls."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    after_20 = None
    for index in range(calls):
        if index % 2:
            client.predict(*compare_inputs(compare_run, index), api_name="/compare_generate")
        else:
            client.predict(*explorer_inputs(index), api_name="/explore_masks")
        if index + 1 == 20:
            after_20 = resident_mb(pid)
    return after_20, resident_mb(pid)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--memory-calls", type=int, default=200)
    args = parser.parse_args(argv)
    from gradio_client import Client

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    problems = []
    with tempfile.TemporaryDirectory(prefix="bench-load-") as home:
        app = launch_app(Path(home), port)
        try:
            client = Client(url, verbose=False)
            compare_run = client.predict(*gpt_start_inputs(30), api_name="/start_training")
            wait_state(client, compare_run, ("finished",), timeout=600)
            background = client.predict(*gpt_start_inputs(100_000), api_name="/start_training")
            wait_training(client, background)
            started, cpu_before, clients_before = time.perf_counter(), cpu_seconds(app.pid), os.times()
            load = hammer_mask_explorer(url, args.clients, args.calls)
            seconds, clients_after = time.perf_counter() - started, os.times()
            cpu_per_call = (cpu_seconds(app.pid) - cpu_before) / max(1, len(load.latencies))
            # the gradio_client clients run in this process, on the same 2 cores as the server and the trainer
            client_cpu_per_call = ((clients_after.user + clients_after.system)
                                   - (clients_before.user + clients_before.system)) / max(1, len(load.latencies))
            trained = run_state(client, background)
            client.predict(background, api_name="/stop_run")
            wait_state(client, background, ("stopped",))
            uptime = os.getloadavg()
            p95 = load.percentile(0.95)
            print(f"load: {args.clients} clients x {args.calls} /explore_masks calls while {background} trained "
                  f"(it reached step {trained.get('step')}): {len(load.latencies)} answered, {len(load.errors)} "
                  f"errors in {seconds:.1f} s; latency p50 {load.percentile(0.5):.3f} s, p95 {p95:.3f} s, max "
                  f"{max(load.latencies, default=float('nan')):.3f} s (target p95 < {P95_TARGET_S:g} s: "
                  f"{'met' if p95 < P95_TARGET_S else 'MISSED'}); CPU per call: the server {cpu_per_call * 1000:.0f} ms, "
                  f"the gradio_client side {client_cpu_per_call * 1000:.0f} ms (with every client waiting, a call waits "
                  f"about clients x their sum / the cores the trainer leaves); load average {uptime[0]:.1f}")
            problems += load.errors[:5]
            if p95 >= P95_TARGET_S:
                problems.append(f"p95 {p95:.3f} s is over the {P95_TARGET_S:g} s target")
            queue = two_starts_and_a_stop(url)
            print(f"queue: two starts at once -> one running, one queued; a third client's Stop stopped "
                  f"{queue['stopped']} at step {queue['stopped_at_step']} and {queue['then_running']} took the device")
            after_20, after_all = memory_over_calls(url, app.pid, compare_run, args.memory_calls)
            growth = after_all / after_20 - 1
            print(f"memory: server RSS {after_20:.0f} MB after 20 Mask Explorer/Compare calls, {after_all:.0f} MB "
                  f"after {args.memory_calls} ({growth:+.1%}; target within {RSS_GROWTH_TARGET:.0%}: "
                  f"{'met' if abs(growth) <= RSS_GROWTH_TARGET else 'MISSED'}); load average "
                  f"{os.getloadavg()[0]:.1f}")
            if abs(growth) > RSS_GROWTH_TARGET:
                problems.append(f"RSS grew {growth:+.1%}")
        finally:
            app.send_signal(signal.SIGTERM)  # the launcher stops its trainers cleanly
            try:
                app.wait(timeout=90)
            except subprocess.TimeoutExpired:
                app.kill()
    for problem in problems:
        print(f"problem: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
