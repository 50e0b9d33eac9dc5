"""A fake `python -m lab_models train` for the zoo's tests (tests/experiments/test_zoo.py, tests/app/test_zoo_panel.py):
it keeps the run-folder contract (config.json with the family and the zoo tag, metrics, checkpoints, model.safetensors,
status.json) in a fraction of a second and stops cleanly on SIGTERM, so that a whole zoo runs in about a second."""
from __future__ import annotations

import textwrap

FAKE_TRAINER = textwrap.dedent('''
    """A fake `python -m lab_models train` for the zoo: writes config.json (family, zoo), metrics, checkpoints,
    model.safetensors, and stops cleanly on SIGTERM. FAKE_FAIL=family,... fail; FAKE_DELAY seconds per step."""
    import argparse, json, os, signal, sys, time

    parser = argparse.ArgumentParser()
    for flag in ("--family", "--out", "--home", "--preset", "--corpus", "--device", "--zoo"):
        parser.add_argument(flag)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--resume", action="store_true")
    args, _ = parser.parse_known_args()
    out = args.out
    delay = float(os.environ.get("FAKE_DELAY", "0.02"))

    def status(state, step, message=""):
        with open(os.path.join(out, ".s.tmp"), "w") as f:
            json.dump({"state": state, "step": step, "total_steps": args.steps, "message": message,
                       "pid": os.getpid()}, f)
        os.replace(os.path.join(out, ".s.tmp"), os.path.join(out, "status.json"))

    def checkpoint(step):
        folder = os.path.join(out, "checkpoint", "step-%08d" % step)
        os.makedirs(folder, exist_ok=True)
        json.dump({"step": step}, open(os.path.join(folder, "state.json"), "w"))
        json.dump({"step": step, "dir": os.path.basename(folder)},
                  open(os.path.join(out, "checkpoint", "latest.json"), "w"))

    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    start = json.load(open(os.path.join(out, "checkpoint", "latest.json")))["step"] if args.resume else 0
    json.dump({"family": args.family, "preset": args.preset, "zoo": args.zoo, "resumed_from": start,
               "threads": os.environ.get("OMP_NUM_THREADS")},
              open(os.path.join(out, "config.json"), "w"))
    for step in range(start + 1, args.steps + 1):
        if stop:
            checkpoint(step - 1)
            open(os.path.join(out, "model.safetensors"), "w").close()
            status("stopped", step - 1, "stopped by SIGTERM")
            sys.exit(0)
        if args.family in os.environ.get("FAKE_FAIL", "").split(","):
            status("failed", step, "loss became NaN (fake)")
            sys.exit(1)
        time.sleep(delay)
        with open(os.path.join(out, "metrics.jsonl"), "a") as f:
            f.write(json.dumps({"step": step, "loss": 5.0 / step, "elapsed_s": step * delay}) + "\\n")
        checkpoint(step)
        status("running", step)
    open(os.path.join(out, "model.safetensors"), "w").close()
    status("finished", args.steps, "done")
''')
