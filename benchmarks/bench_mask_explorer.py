"""How fast the Mask Explorer answers: `api.anatomy` plus the plotly figure and table, for 64 tokens, per family.

Target (issue: Mask Explorer): under 100 ms p95 for 64 tokens. Run: `python benchmarks/bench_mask_explorer.py`.
It also times one whole `explore` call of the tab handler with four families, as the page runs it.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.explorer.figures import anatomy_figure, anatomy_table  # noqa: E402
from app.explorer.tab import MaskExplorer  # noqa: E402
from lab_models import api  # noqa: E402

TOKENS = 64
REPEATS = 40
TARGET_MS = 100.0


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def time_family(family: str, tokens: list[str]) -> tuple[float, float, float]:
    anatomy_ms, total_ms = [], []
    for seed in range(REPEATS):
        start = time.perf_counter()
        anatomy = api.anatomy(family, tokens, seed=seed)
        middle = time.perf_counter()
        anatomy_figure(anatomy).to_dict()  # what Gradio serialises for gr.Plot
        anatomy_table(anatomy)
        end = time.perf_counter()
        anatomy_ms.append((middle - start) * 1000)
        total_ms.append((end - start) * 1000)
    return statistics.median(anatomy_ms), p95(anatomy_ms), p95(total_ms)


def main() -> None:
    words = ("the quick brown fox jumps over the lazy dog while seven small cats watch from a quiet red "
             "garden wall").split()
    tokens = [words[i % len(words)] for i in range(TOKENS)]
    print(f"Mask Explorer latency, {TOKENS} tokens, {REPEATS} seeds per family (target: p95 < {TARGET_MS:.0f} ms)")
    print(f"{'family':10s} {'anatomy median':>15s} {'anatomy p95':>12s} {'anatomy+figure p95':>19s}  verdict")
    worst = 0.0
    for spec in api.families():
        if not spec.has_anatomy:
            continue
        median, p95_anatomy, p95_total = time_family(spec.name, tokens)
        worst = max(worst, p95_total)
        verdict = "ok" if p95_total < TARGET_MS else "SLOW"
        print(f"{spec.name:10s} {median:13.1f}ms {p95_anatomy:10.1f}ms {p95_total:17.1f}ms  {verdict}")
    with tempfile.TemporaryDirectory() as home:
        explorer = MaskExplorer(api.lab_home(home))
        sentence = " ".join(tokens)
        samples = []
        for seed in range(10):
            start = time.perf_counter()
            explorer.explore(sentence, "whitespace", ["bert", "unilm", "xlnet", "glm"], seed, "", None, None, "",
                             None, "", True)
            samples.append((time.perf_counter() - start) * 1000)
    print(f"whole tab handler, 4 families side by side: median {statistics.median(samples):.1f} ms, "
          f"p95 {p95(samples):.1f} ms")
    print(f"worst single-family p95: {worst:.1f} ms -> {'MEETS' if worst < TARGET_MS else 'MISSES'} the target")


if __name__ == "__main__":
    main()
