"""Benchmark: what the add-on objectives (lab_models/objectives/addons.py) change, each against the same run without it.

Run `python benchmarks/bench_addons.py [--parts contrastive,adversarial,back_translation] [--steps 300]
[--bt-steps 300] [--bt-families mass] [--threads 1] [--out DIR]` (short by default; docs/addons.md names the
command it ran). Every run is `python -m lab_models train` at the tiny preset on the synthetic corpus, seed 0, run
in this process; a pair of runs differs only in the add-on.

1. contrastive (BERT and GPT): `--steps` steps without and with `--objective contrastive=1` (BERT twice: the
   default mean pooling and SimCSE's [CLS]). Then, on the synthetic corpus's held-out sentences
   (lab_models/inference/sentence_similarity.py, 40 per topic), read with mean pooling and with the family's own vector:
   the mean cosine of same-topic and of different-topic pairs, their gap, the AUC of that separation and how often a
   sentence's nearest neighbour shares its topic; alignment (held-out entailed pairs) and uniformity (Wang & Isola
   2020); and the validation loss of the family's own objective (does the add-on cost it anything?).
2. adversarial (BERT): `--steps` steps with and without `--objective adversarial=1` (SMART, K = 1): the mean
   clean_nll and adversarial_nll of the last 20 logged steps, the validation MLM loss of both runs, and the step time
   of the loss and backward pass with and without the add-on, timed on the same batches, interleaved (`--rounds`).
3. back_translation (`--bt-families`, default MASS): `--bt-steps` steps of translation alone (the denoising objective
   off, lr 3e-3, as in docs/addons.md) in four runs: English -> Chinese only; + the add-on with
   `back_translate=false` (zh -> en on real pairs too: the control); + the add-on (back-translated pairs both ways
   from the first step); + the add-on from half-way (`start_step`). Then BLEU and chrF both ways (sacrebleu) on 100
   held-out pairs, greedy, and the last validation losses of both directions.

Prints one table per part and the command that made it. Timings on a shared machine move by 10-20%: compare the
ratios within one run of this script.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere, as the other benchmarks

from lab_models.training import run as train  # noqa: E402
from lab_models.inference.loading import load_run  # noqa: E402
from lab_models.objectives import back_translation, contrastive  # noqa: E402
from lab_models.inference.sentence_similarity import topic_similarity  # noqa: E402

PARTS = ("contrastive", "adversarial", "back_translation")


def run_cli(out: Path, family: str, steps: int, home: Path, *extra: str) -> Path:
    if not (out / "model.safetensors").exists():
        argv = ["--family", family, "--out", str(out), "--steps", str(steps), "--home", str(home), "--seed", "0",
                "--eval-every", "0", "--checkpoint-every", "0", "--log-every", "1", *extra]
        started = time.perf_counter()
        code = train.main(argv)
        if code != 0:
            raise SystemExit(f"training failed: python -m lab_models train {' '.join(argv)}")
        print(f"  trained {out.name} in {time.perf_counter() - started:.0f} s", flush=True)
    return out


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def last_val(run_dir: Path) -> dict:
    return [r for r in rows(run_dir) if r.get("split") == "val"][-1]


def mean_part(run_dir: Path, name: str, last: int = 20) -> float:
    values = [r["losses"][name] for r in rows(run_dir) if r.get("split") == "train" and name in r["losses"]]
    return sum(values[-last:]) / len(values[-last:])


def bench_contrastive(args, home: Path, out: Path) -> None:
    print("\n## contrastive: held-out sentences by topic (same vs different), alignment, uniformity", flush=True)
    header = ("family", "run", "view", "same", "different", "gap", "AUC", "nearest same topic", "alignment",
              "uniformity", "val loss (own)")
    lines = []
    variants = {"bert": (("plain", "without", ()),
                         ("contrastive", "contrastive=1 (mean)", ("--objective", "contrastive=1")),
                         ("contrastive-first", "contrastive=1 ([CLS])", ("--objective", "contrastive=1", "--set",
                                                                          "contrastive.pooling=first"))),
                "gpt": (("plain", "without", ()), ("contrastive", "contrastive=1 (last)", ("--objective",
                                                                                            "contrastive=1")))}
    for family, runs in variants.items():
        for key, label, extra in runs:
            run_dir = run_cli(out / f"{family}-{key}", family, args.steps, home, *extra)
            loaded = load_run(run_dir)
            settings = json.loads((run_dir / "config.json").read_text())["train"].get("addons", {})
            pooling = settings.get("contrastive", {}).get("pooling", "auto")
            numbers = contrastive.SentenceProbe(family, loaded.tokenizer, loaded.vocab, pooling=pooling)(loaded.model)
            own = {k: v for k, v in last_val(run_dir)["losses"].items() if k != "contrastive"}
            for view in ("mean", "auto"):
                result = topic_similarity(run_dir, view)
                lines.append((family, label, result.pooling, f"{result.same:.3f}", f"{result.different:.3f}",
                              f"{result.gap:.3f}", f"{result.auc:.3f}", f"{result.nearest_same_topic:.2f}",
                              f"{numbers['alignment']:.3f}", f"{numbers['uniformity']:.3f}",
                              " ".join(f"{k} {v:.3f}" for k, v in own.items())))
    table(header, lines)
    print("(alignment and uniformity: on the vector the contrastive objective trains, the run's own setting, or for a "
          "run without it the add-on's default: BERT's token mean, GPT's last token)")


def bench_adversarial(args, home: Path, out: Path) -> None:
    print("\n## adversarial (BERT, SMART K=1): clean vs adversarial loss and step time", flush=True)
    plain = run_cli(out / "bert-plain", "bert", args.steps, home)
    adv = run_cli(out / "bert-adversarial", "bert", args.steps, home, "--objective", "adversarial=1")
    lines = [("without", "", "", f"{last_val(plain)['losses']['mlm']:.3f}"),
             ("adversarial=1", f"{mean_part(adv, 'clean_nll'):.3f}", f"{mean_part(adv, 'adversarial_nll'):.3f}",
              f"{last_val(adv)['losses']['mlm']:.3f}")]
    table(("run", "clean_nll (last 20 steps)", "adversarial_nll (last 20 steps)", "val mlm"), lines)
    # step time on the same batches, interleaved
    from lab_models.objectives import addons as addon_module

    loaded = load_run(adv)
    model = loaded.model.train()
    config = json.loads((adv / "config.json").read_text())
    from lab_models.text.corpora import load_corpus
    from lab_models.training.batches import PackedBatches
    from lab_models.text.streams import encode_stream
    from lab_models.objectives import objective_module
    from lab_models.objectives.common import BatchConfig

    corpus = load_corpus("synthetic", home=home)
    source = PackedBatches(encode_stream(loaded.tokenizer, corpus.train, loaded.vocab.eos_id),
                           encode_stream(loaded.tokenizer, corpus.validation, loaded.vocab.eos_id), seq_len=64,
                           batch_size=16, objective=objective_module("bert"),
                           batch_config=BatchConfig(loaded.settings, loaded.vocab))
    batches = [source.train_batch(torch.Generator().manual_seed(i)) for i in range(args.batches)]
    addon_module.attach(model, config["train"]["addons"], tokenizer=loaded.tokenizer, vocab=loaded.vocab,
                        corpus=corpus, batches=source, batch_size=16, max_positions=loaded.max_positions)
    attached = model.addons
    times = {"without": [], "adversarial=1": []}
    for _ in range(args.rounds):
        for label, hook in (("without", None), ("adversarial=1", attached)):
            model.addons = hook
            started = time.perf_counter()
            for batch in batches:
                model.loss(batch).total.backward()
                model.zero_grad(set_to_none=True)
            times[label].append((time.perf_counter() - started) / len(batches))
    best = {label: min(values) for label, values in times.items()}
    table(("run", "ms per step (loss + backward, best of rounds)", "ratio"),
          [(label, f"{1000 * best[label]:.1f}", f"{best[label] / best['without']:.2f}") for label in best])


def bench_back_translation(args, home: Path, out: Path) -> None:
    print("\n## back-translation: BLEU / chrF on 100 held-out pairs, greedy", flush=True)
    header = ("family", "run", "BLEU en->zh", "BLEU zh->en", "chrF en->zh", "chrF zh->en", "val loss en->zh",
              "val loss zh->en")
    lines = []
    for family in args.bt_families:
        own = {"mass": ("--objective", "seq2seq=0", "--objective", "translation=1"),
               "t5": ("--objective", "span_corruption=0", "--objective", "translation=1"), "cove": ()}[family]
        variants = (("none", "en->zh only", ()),
                    ("control", "+ zh->en real (control)", ("--objective", "back_translation=1", "--set",
                                                            "back_translation.back_translate=false")),
                    ("bt", "+ back-translation", ("--objective", "back_translation=1")),
                    ("late", "+ back-translation from half-way", ("--objective", "back_translation=1", "--set",
                                                                 f"back_translation.start_step={args.bt_steps // 2}")))
        for key, label, extra in variants:
            quiet = ("--set", "back_translation.eval_pairs=0") if extra else ()  # scored below, once
            run_dir = run_cli(out / f"{family}-bt-{key}", family, args.bt_steps, home, "--lr", "3e-3", *own, *extra,
                              *quiet)
            loaded = load_run(run_dir)
            codec = back_translation.Codec(family, loaded.tokenizer, loaded.vocab, loaded.max_positions)
            pairs = back_translation.MonolingualData(codec).validation_pairs[:100]
            scores = back_translation.translation_scores(loaded.model, codec, pairs)
            val = last_val(run_dir)["losses"]
            lines.append((family, label, f"{scores['bleu_en_zh']:.1f}", f"{scores['bleu_zh_en']:.1f}",
                          f"{scores['chrf_en_zh']:.1f}", f"{scores['chrf_zh_en']:.1f}",
                          f"{val.get('translation', val.get('nmt', float('nan'))):.3f}",
                          f"{val['translation_zh_en']:.3f}" if "translation_zh_en" in val else "—"))
    table(header, lines)


def table(header, lines) -> None:
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines)]
    print("| " + " | ".join(str(h).ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in lines:
        print("| " + " | ".join(str(x).ljust(w) for x, w in zip(line, widths)) + " |")
    sys.stdout.flush()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--steps", type=int, default=300, help="steps of the contrastive and adversarial runs")
    parser.add_argument("--bt-steps", type=int, default=300, help="steps of the back-translation runs")
    parser.add_argument("--bt-families", default="mass", help="comma list of mass, t5, cove")
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds (adversarial)")
    parser.add_argument("--batches", type=int, default=5, help="batches per timing round (adversarial)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", help="where the runs go (default: a temporary folder); existing runs are reused")
    args = parser.parse_args(argv)
    args.bt_families = [f.strip() for f in args.bt_families.split(",") if f.strip()]
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS)) + sorted(set(args.bt_families) - set(back_translation.FAMILIES))
    if unknown:
        parser.error(f"unknown part or family: {', '.join(unknown)}")
    torch.set_num_threads(args.threads)
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-addons-"))
    home = out / "home"
    print(f"python benchmarks/bench_addons.py {' '.join(sys.argv[1:] if argv is None else argv)}  (runs in {out}; "
          f"torch {torch.__version__}, {args.threads} thread(s))", flush=True)
    for part in parts:
        {"contrastive": bench_contrastive, "adversarial": bench_adversarial,
         "back_translation": bench_back_translation}[part](args, home, out)


if __name__ == "__main__":
    main()
