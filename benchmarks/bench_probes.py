"""Linear probes of every layer of a zoo (lab_models/inference/probing.py): what they cost and what they find.

    python benchmarks/bench_probes.py --home DIR [--zoo tiny] [--tasks tags,roles,topic,sentiment] [--threads 1]
                                      [--figure probes.html] [--figure-task roles] [--json probes.json]
    python benchmarks/bench_probes.py --runs RUN_DIR,RUN_DIR ...      (any runs: e.g. the small preset's)
    python benchmarks/bench_probes.py --from-json probes.json --figure roles.html --figure-task roles

For every run of the zoo (one per family), in the zoo's order:
1. cold: `probe_layers(run, first task)` with the run folder's feature cache removed first (it is rebuilt): reading
   every layer of the run and of its random-init control over the probe sentences, then fitting the probes;
2. warm: `probe_layers` of every task again (the features come from the cache: probes only).
It prints each run's seconds (cold: wall and CPU; warm: CPU per task; with one thread the CPU seconds are what a quiet
machine's wall clock shows, whatever the load) and, per task, each family's accuracy at the embeddings and at
the top layer, its best layer (stream, name, depth) and accuracy there, the random-init control at that layer and
the majority baseline. The peer measured in the same run: the probes of one run fitted one by one (an L-BFGS run per
layer) against `fit_linear_probes`' one joint fit, as a ratio (same features, same accuracies).

`--figure` writes one standalone HTML page (plotly.js inlined): a panel per family, accuracy against relative depth
for each stream, the untrained control dotted, the majority baseline dashed (docs/probes.md's figures are headless
Chromium screenshots of it). `--json` writes every table.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab_models import api  # noqa: E402
from lab_models.inference import probing  # noqa: E402

DASHES = ("solid", "dash", "dashdot")


def zoo_runs(home: Path, zoo: str) -> list[tuple[str, Path]]:
    """(family, run folder) of the zoo's runs with weights, in the zoo's order."""
    found = {}
    for row in api.runs_with_weights(home=home):
        config = json.loads((Path(row["path"]) / "config.json").read_text())
        if config.get("zoo") == zoo:
            found.setdefault(config["family"], Path(row["path"]))
    return [(family, found[family]) for family in api.ZOO_ORDER if family in found]


def summary(frame) -> dict:
    best = probing.best_probe_layer(frame)
    first = frame[frame["stream"] == frame["stream"].iloc[0]]
    return {"embeddings": float(first["accuracy"].iloc[0]), "top": float(first["accuracy"].iloc[-1]),
            "best": f"{best['stream']}: {best['layer_name']}", "best_depth": best["depth"],
            "best_accuracy": best["accuracy"], "control_at_best": best["control"],
            "majority": float(frame["majority"].iloc[0]),
            "rows": frame[probing.PROBE_COLUMNS].to_dict(orient="records")}


def joint_against_separate(run_dir: Path, task: str) -> tuple[float, float, float]:
    """(CPU seconds one by one, CPU seconds jointly, the largest accuracy difference) for one run's probes."""
    features = probing.probe_features(run_dir, 0, None, probing.PROBE_TASKS[task][1])
    labels, held_out = probing.probe_labels(features, task, 0)
    unit = "words" if probing.PROBE_TASKS[task][0] == "word" else "sentences"
    every = [item[unit] for item in features.model] + [item[unit] for item in features.control]
    classes = len(probing.task_labels(task))
    labelled = labels >= 0  # a stories task labels some of the words only
    training, validating = labelled & ~held_out, labelled & held_out
    train = [x[training] for x in every]
    validation = [x[validating] for x in every]
    started = time.process_time()
    separate = [probing.layer_accuracies([t], labels[training], [v], labels[validating], classes)[0]
                for t, v in zip(train, validation)]
    one_by_one = time.process_time() - started
    started = time.process_time()
    joint = probing.layer_accuracies(train, labels[training], validation, labels[validating], classes)
    together = time.process_time() - started
    return one_by_one, together, max(abs(a - b) for a, b in zip(separate, joint))


def figure(results: dict, task: str, path: Path) -> None:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    families = list(results)
    cols = 6
    rows = math.ceil(len(families) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=families, horizontal_spacing=0.03,
                        vertical_spacing=0.09, shared_yaxes=True)
    for index, family in enumerate(families):
        row, col = index // cols + 1, index % cols + 1
        table = results[family][task]["rows"]
        streams = list(dict.fromkeys(item["stream"] for item in table))
        for number, stream in enumerate(streams):
            part = [item for item in table if item["stream"] == stream]
            single = len(part) == 1
            mode = "markers" if single else "lines+markers"
            fig.add_trace(go.Scatter(x=[p["depth"] for p in part], y=[p["accuracy"] for p in part], mode=mode,
                                     name=stream, showlegend=False, line={"color": "#2563eb",
                                                                          "dash": DASHES[number % 3]},
                                     marker={"symbol": "diamond" if single else "circle", "size": 9 if single else 6}),
                          row=row, col=col)
            fig.add_trace(go.Scatter(x=[p["depth"] for p in part], y=[p["control"] for p in part], mode=mode,
                                     showlegend=False, line={"color": "#94a3b8", "dash": "dot"},
                                     marker={"symbol": "diamond-open" if single else "circle-open"}),
                          row=row, col=col)
        majority = table[0]["majority"]
        fig.add_trace(go.Scatter(x=[0, 1], y=[majority, majority], mode="lines", showlegend=False,
                                 line={"color": "#dc2626", "dash": "dash", "width": 1}), row=row, col=col)
        if len(streams) > 1:
            fig.layout.annotations[index].text = f"{family} ({' / '.join(streams)})"
    fig.update_yaxes(range=[0, 1.02])
    fig.update_xaxes(range=[-0.05, 1.05])
    fig.update_annotations(font_size=12)
    titles = {"tags": "part-of-speech tags", "roles": "roles (subject / verb / object / adverb / place)",
              "topic": "topic", "sentiment": "sentiment"}
    fig.update_layout(title=f"Linear probes of the tiny zoo: {titles.get(task, task)}; accuracy against relative "
                            f"depth (0 = embeddings, 1 = top layer)<br>blue: the trained run (dashed: its second "
                            f"stream; a diamond: a one-layer stream); grey dotted: the same architecture untrained "
                            f"(random-init control); red dashed: the majority baseline", title_font_size=13,
                      height=260 * rows + 110, width=1500, template="plotly_white",
                      margin={"l": 40, "r": 20, "t": 100, "b": 30})
    path.write_text(fig.to_html(include_plotlyjs=True, full_html=True, config={"displayModeBar": False}),
                    encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, help="the lab home whose zoo is measured")
    parser.add_argument("--runs", default="", help="run folders (comma-separated) instead of a zoo, e.g. small runs")
    parser.add_argument("--zoo", default="tiny")
    parser.add_argument("--tasks", default="tags,roles,topic,sentiment")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--figure", type=Path, help="HTML page of the first task's curves, a panel per family")
    parser.add_argument("--figure-task", default=None, help="the task the figure draws (default: the first)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--from-json", type=Path, help="draw --figure from an earlier --json (nothing measured)")
    args = parser.parse_args()
    if args.from_json:
        if not args.figure:
            parser.error("--from-json draws a figure: give --figure")
        figure(json.loads(args.from_json.read_text()), args.figure_task or "tags", args.figure)
        print(f"figure: {args.figure}")
        return 0
    torch.set_num_threads(args.threads)
    tasks = [task.strip() for task in args.tasks.split(",") if task.strip()]
    if args.runs:
        runs = [(json.loads((Path(path) / "config.json").read_text())["family"], Path(path))
                for path in args.runs.split(",") if path.strip()]
    elif args.home:
        runs = zoo_runs(args.home, args.zoo)
    else:
        parser.error("give --home (a zoo's lab home) or --runs")
    if not runs:
        print(f"no run of the zoo {args.zoo!r} has weights in {args.home}", file=sys.stderr)
        return 1
    print(f"{len(runs)} runs ({', '.join(run.name for _, run in runs) if args.runs else 'zoo ' + args.zoo}); torch "
          f"threads {args.threads}; tasks {', '.join(tasks)}")
    results: dict[str, dict] = {}
    total_cold = total_cpu = 0.0
    # the cache file of the first task's language (the synthetic grammar's or the stories')
    cache_file = probing.features_file(probing.PROBE_TASKS[tasks[0]][1])
    for family, run_dir in runs:
        (run_dir / cache_file).unlink(missing_ok=True)
        started, cpu = time.perf_counter(), time.process_time()
        api.probe_layers(run_dir, tasks[0])
        cold_seconds, cold_cpu = time.perf_counter() - started, time.process_time() - cpu
        total_cold += cold_seconds
        total_cpu += cold_cpu
        results[family] = {"run": run_dir.name, "cold_seconds": cold_seconds, "cold_cpu_seconds": cold_cpu,
                           "cache_bytes": (run_dir / cache_file).stat().st_size}
        warm, warm_cpu = [], []
        for task in tasks:
            started, cpu = time.perf_counter(), time.process_time()
            frame = api.probe_layers(run_dir, task)
            warm.append(time.perf_counter() - started)
            warm_cpu.append(time.process_time() - cpu)
            results[family][task] = summary(frame)
        results[family]["warm_seconds"] = dict(zip(tasks, warm))
        results[family]["warm_cpu_seconds"] = dict(zip(tasks, warm_cpu))
        print(f"{family:9s} cold {cold_seconds:6.1f} s wall / {cold_cpu:5.1f} s CPU; warm (CPU) "
              + ", ".join(f"{task} {s:4.2f} s" for task, s in zip(tasks, warm_cpu))
              + f"; cache {results[family]['cache_bytes'] / 2**20:.1f} MiB", flush=True)
    print(f"all {len(runs)} runs cold: {total_cold:.0f} s wall, {total_cpu:.0f} s CPU (one thread: a quiet machine's "
          f"wall time)")
    for task in tasks:
        print(f"\n{task}: family, embeddings -> top layer (first stream), best layer (depth): accuracy | untrained "
              f"control there | majority")
        for family in results:
            item = results[family][task]
            print(f"  {family:9s} {item['embeddings']:.3f} -> {item['top']:.3f}   best {item['best']} "
                  f"({item['best_depth']:.2f}): {item['best_accuracy']:.3f} | {item['control_at_best']:.3f} | "
                  f"{item['majority']:.3f}")
    family, run_dir = runs[0]
    one_by_one, together, difference = joint_against_separate(run_dir, tasks[0])
    print(f"\npeer, {family} {tasks[0]}: probes fitted one by one {one_by_one:.2f} s CPU, jointly {together:.2f} s "
          f"(ratio {one_by_one / together:.1f}x; largest accuracy difference {difference:.4f})")
    if args.figure:
        figure(results, args.figure_task or tasks[0], args.figure)
        print(f"figure: {args.figure}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
