"""Benchmark: the demo zoo, end to end. Targets: the whole tiny zoo (17 families) in under 10 minutes on a
2-core CPU (and under 5 minutes with the CPU's faster defaults, or a better zoo in the same time: fill-mask
accuracy is printed beside the most-frequent-word baseline); a first side-by-side comparison in under 3 minutes from
`python app.py` on a fresh lab home; on a GPU, `--preset small` for every family in under 10 minutes.

    python benchmarks/bench_zoo.py [--preset tiny] [--families all|gpt,bert,...] [--steps N | --budget-flops F]
                                   [--corpus stories] [--seeds N] [--workers N] [--finetune-tasks scope,story_order]
                                   [--home DIR [--score-only]]
    python benchmarks/bench_zoo.py --time-to-first-comparison [--port 7899]

Default mode: trains the zoo into a fresh temporary lab home (or --home) through the job manager, exactly as `python -m
lab_models zoo` does, and prints the total time, the time until the first one, two and three runs had finished, each
run's time (from launch to exit, tokenizer training and the Python start-up included), and the quality checks of the
zoo's corpus. On the synthetic grammar (`--corpus synthetic`): GPT's greedy continuation of "the small cat", and for
every family that can fill a blank its accuracy on 48 easy blanks of held-out synthetic sentences: one word masked (a
noun after its adjective or determiner, a determiner, a verb after its subject, the final "."), scored twice, as the
exact word and as the word's class (any noun for a noun, ...); the grammar's lexicon decides the classes
(lab_models/text/synthetic.py). On the "stories" language (the tiny zoo's): the context tasks of the language
(lab_models/text/story_tasks.py) with their trivial baselines, and every score that the issue of a fair zoo sets a
target on (lab_models/inference/context_scores.py scores a run):

    reference blanks   every masked LM fills held-out "the NOUN" nouns at 2x the best trivial baseline
    continuations      GPT's and GPT-2's complete sentences parse under the grammar 90% of the time
    spans              T5, GLM, MASS, UniLM infill the whole "the NOUN" at 2x the best span baseline
    translation        MASS, T5, CoVe beat copying the source in BLEU on held-out sentence pairs
    probes             every family's best layer beats the best layer of its random-init control by 0.05 on one of
                       the three context probes (ambiguous_tags, antecedent, subject_number)
    default Compare    GPT, GPT-2, BERT and T5 in Auto mode on the Compare tab's prompt answer with sentences
    fine-tuning        every run fine-tuned on scope and story_order (200 steps, `--finetune-tasks`), each family's
                       accuracy with its interval; no task solved at 1.000 by every family

and ends with a summary over seeds: each score's mean per family, its 95% interval (Student's t over the seeds,
widened to Wilson's over the examples for a hit rate; Wilson's alone with one seed) and the target's verdict ("met" or
"missed by"). The load average (`os.getloadavg`) before and after is printed: timings on a busy machine are
pessimistic.

--time-to-first-comparison: starts `python app.py` on a fresh lab home, clicks "Train the demo zoo" through
gradio_client (`/zoo_start`), and reports when the Compare tab could show two finished runs side by side: the first
moment two demo-zoo runs are finished and `/compare_generate` answers for both without an error. Then it stops the zoo
and the app.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere, as the other benchmarks

from lab_models import api
from lab_models.inference.context_scores import (blank_scores, continuation_scores, span_scores,  # noqa: E402
                                                  translation_scores)
from lab_models.text.stories import parse_sentence  # noqa: E402
from lab_models.text import synthetic  # noqa: E402
from lab_models.text.story_tasks import baseline_table  # noqa: E402
from lab_models.training.jobs.manager import JobManager  # noqa: E402
from lab_models.experiments.zoo import (ZOO_ORDER, ZooConfig, parse_families, start_zoo, stop_zoo,  # noqa: E402
                                        zoo_progress)

REPO = Path(__file__).resolve().parent.parent
TARGET_ZOO_S = 600.0
TARGET_ZOO_FAST_S = 300.0  # the tiny zoo with the CPU's faster defaults
TARGET_FIRST_COMPARISON_S = 180.0
PROMPT = "the small cat"
# the Compare tab's DEFAULT_PROMPT (app/compare/tab.py)
COMPARE_PROMPT = "a doctor guards two judges . they [MASK] the doctor ."
BLANKS = 48
BLANK_TAGS = ("NOUN", "DET", "VERB", "PUNCT")  # the easy blanks: a noun, a determiner, a verb, the final "."


def load() -> str:
    return "load average " + " / ".join(f"{value:.2f}" for value in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


def easy_blanks(count: int = BLANKS, seed: int = 1) -> list[tuple[str, str, str]]:
    """(sentence with one [MASK], the word, its tag) for sentences of a synthetic seed the corpus was not drawn
    from, each tag in BLANK_TAGS in turn."""
    data = synthetic.synthetic_dataset(seed=seed, n_sentences=400)
    rng = random.Random(seed)
    blanks = []
    examples = list(data.examples)
    rng.shuffle(examples)
    for example in examples:
        tag = BLANK_TAGS[len(blanks) % len(BLANK_TAGS)]
        positions = [i for i, t in enumerate(example.tags) if t == tag and i > 0]
        if not positions:
            continue
        i = positions[0]
        words = list(example.tokens)
        word = words[i]
        words[i] = "[MASK]"
        blanks.append((" ".join(words), word, tag))
        if len(blanks) == count:
            break
    return blanks


def word_classes() -> dict[str, set[str]]:
    """tag -> every word the grammar gives that tag (from a large sample of derivations)."""
    classes: dict[str, set[str]] = {}
    for example in synthetic.synthetic_dataset(seed=0, n_sentences=8000).examples:
        for word, tag in zip(example.tokens, example.tags):
            classes.setdefault(tag, set()).add(word)
    return classes


def fill_mask_scores(run_dir: Path, blanks, classes) -> tuple[float, float] | None:
    """(exact accuracy, class accuracy) of the top-1 fill over the easy blanks; None when the family cannot."""
    exact = right_class = 0
    for sentence, word, tag in blanks:
        try:
            slots = api.fill_mask(run_dir, sentence, top_k=1)
        except ValueError:
            return None
        guess = slots[0][0][0].strip() if slots and slots[0] else ""
        exact += guess == word
        right_class += guess in classes.get(tag, set())
    return exact / len(blanks), right_class / len(blanks)


def most_frequent_words() -> tuple[str, dict[str, str]]:
    """The synthetic corpus's most frequent word, and the most frequent word of each tag: the baselines a fill-mask
    score is read against (a model that always answers "the" is right whenever the blank was "the")."""
    counts: dict[str, int] = {}
    by_tag: dict[str, dict[str, int]] = {}
    for example in synthetic.synthetic_dataset(seed=0, n_sentences=8000).examples:
        for word, tag in zip(example.tokens, example.tags):
            counts[word] = counts.get(word, 0) + 1
            by_tag.setdefault(tag, {})[word] = by_tag.setdefault(tag, {}).get(word, 0) + 1
    return max(counts, key=counts.get), {tag: max(words, key=words.get) for tag, words in by_tag.items()}


def quality(home: Path, config: ZooConfig) -> None:
    progress = zoo_progress(api.RunStore(home), config)
    runs = {run.family: home / "runs" / run.run_id for run in progress.runs if run.state == "finished"}
    lexicon = set(synthetic.vocabulary())
    if "gpt" in runs:
        generation = api.generate(runs["gpt"], PROMPT, max_new_tokens=24)
        words = generation.new_text.split()
        in_lexicon = sum(word in lexicon for word in words) / max(len(words), 1)
        print(f"\nGPT continues {PROMPT!r}: {generation.text!r}\n  {in_lexicon:.0%} of its words are in the "
              "grammar's lexicon")
    blanks, classes = easy_blanks(), word_classes()
    print(f"\nfill-mask on {len(blanks)} easy blanks of unseen synthetic sentences (e.g. {blanks[0][0]!r}):")
    print(f"{'family':10s} {'exact':>6s} {'class':>6s}")
    top, top_by_tag = most_frequent_words()
    always = sum(word == top for _, word, _ in blanks) / len(blanks)
    always_class = sum(top in classes.get(tag, set()) for _, _, tag in blanks) / len(blanks)
    by_class = sum(word == top_by_tag.get(tag) for _, word, tag in blanks) / len(blanks)
    print(f"{'baseline':10s} {always:6.0%} {always_class:6.0%}   (always the corpus's most frequent word, {top!r}; "
          f"the most frequent word of the blank's own class: {by_class:.0%} exact)")
    for family, run_dir in runs.items():
        scores = fill_mask_scores(run_dir, blanks, classes)
        if scores is not None:
            print(f"{family:10s} {scores[0]:6.0%} {scores[1]:6.0%}")
    if "bert" in runs:
        sentence = "the small [MASK] sees a red ball ."
        top = api.fill_mask(runs["bert"], sentence, top_k=3)[0]
        print(f"BERT fills {sentence!r}: " + ", ".join(f"{token.strip()!r} {p:.2f}" for token, p in top))


TARGET_BLANK_RATIO = 2.0  # every masked LM fills context blanks at least 2x the best trivial baseline
TARGET_PARSE_RATE = 0.9  # GPT's and GPT-2's continuations parse under the grammar
MASKED_LM_FAMILIES = ("bert", "roberta", "albert", "spanbert", "electra", "mpnet", "unilm", "xlnet")
CONTINUING_FAMILIES = ("gpt", "gpt2")


class Tally:
    """Every score of the zoo per (metric, family), one value per seed, and the examples a hit rate is over. `report`
    prints each metric per family as the mean and its 95% interval (Student's t over the seeds with two or more,
    widened to Wilson's over the examples for a hit rate; Wilson's alone with one seed), the target the issue sets on
    it, and whether the mean meets it."""

    def __init__(self):
        self.values: dict[str, dict[str, list[float]]] = {}
        self.examples: dict[str, int] = {}
        self.targets: dict[str, tuple[float, tuple[str, ...], str]] = {}

    def add(self, metric: str, family: str, value: float, examples: int | None = None) -> None:
        self.values.setdefault(metric, {}).setdefault(family, []).append(float(value))
        if examples:
            self.examples[metric] = examples

    def target(self, metric: str, threshold: float, families: tuple[str, ...], text: str) -> None:
        self.targets[metric] = (threshold, families, text)

    def interval(self, metric: str, values: list[float]) -> tuple[float, float, float, str]:
        from lab_models.inference.seed_intervals import mean_interval, wilson_interval
        mean, low, high = mean_interval(values)
        examples = self.examples.get(metric)
        over = "seeds" if len(values) > 1 else "—"
        if examples:
            wide = wilson_interval(mean, examples)
            if len(values) == 1 or wide[0] < low or wide[1] > high:
                low, high = (wide if len(values) == 1 else (min(low, wide[0]), max(high, wide[1])))
                over = "examples" if len(values) == 1 else "seeds and examples"
            low, high = max(low, 0.0), min(high, 1.0)  # a hit rate's interval stays inside [0, 1]
        return mean, low, high, over

    def report(self) -> None:
        if not self.values:
            return
        print("\nsummary over seeds: each score's mean per family, its 95% interval (over what), and the target")
        for metric, by_family in self.values.items():
            threshold, families, text = self.targets.get(metric, (None, (), ""))
            print(f"  {metric}" + (f" (target: {text})" if text else ""))
            for family, values in by_family.items():
                mean, low, high, over = self.interval(metric, values)
                bounds = f"[{low:.3f}, {high:.3f}] over {over}" if low == low else "(one seed)"
                verdict = ""
                if threshold is not None and family in families:
                    verdict = "met" if mean >= threshold else f"missed by {threshold - mean:.3f}"
                print(f"    {family:10s} {mean:8.3f} {bounds:34s} n={len(values)}  {verdict}")


def context_quality(home: Path, config: ZooConfig, finetune_tasks=(), workers: int = 1) -> None:
    """The zoo on the "stories" language's context tasks, beside their trivial baselines and the issue's targets:
    reference blanks (the noun of "the NOUN" pointing to a story character) at 2x the best baseline for every masked
    LM, agreement blanks beside theirs, GPT's and GPT-2's continuations parsing 90% of the time."""
    progress = zoo_progress(api.RunStore(home), config)
    finished = [run for run in progress.runs if run.state == "finished"]
    baselines = baseline_table().set_index("task")
    print("\ncontext tasks of the stories language (validation stories; lab_models/text/story_tasks.py):")
    print(baselines[["unit", "validation_items", "majority", "word_identity", "bigram", "trigram", "both_sides",
                     "best_baseline", "context_task"]].round(3).to_string())
    best = {kind: baselines.loc[kind, "best_baseline"] for kind in ("reference", "agreement")}
    tally = Tally()
    tally.target("reference blanks", TARGET_BLANK_RATIO * best["reference"], MASKED_LM_FAMILIES,
                 f">= {TARGET_BLANK_RATIO:.0f}x the best baseline {best['reference']:.3f}, every masked LM")
    tally.target("continuations that parse", TARGET_PARSE_RATE, CONTINUING_FAMILIES, f">= {TARGET_PARSE_RATE}")
    print(f"\n{'run':12s} {'reference':>10s} {'x best':>7s} {'agreement':>10s}   target: reference >= "
          f"{TARGET_BLANK_RATIO:.0f}x {best['reference']:.3f}")
    for run in finished:
        run_dir = home / "runs" / run.run_id
        try:
            reference, agreement = blank_scores(run_dir, "reference"), blank_scores(run_dir, "agreement")
        except ValueError:
            continue  # the family does not fill a one-word blank
        tally.add("reference blanks", run.family, reference.accuracy, reference.items)
        tally.add("agreement blanks", run.family, agreement.accuracy, agreement.items)
        ratio = reference.accuracy / best["reference"]
        verdict = "met" if ratio >= TARGET_BLANK_RATIO else f"missed by {TARGET_BLANK_RATIO - ratio:.1f}x"
        verdict = verdict if run.family in MASKED_LM_FAMILIES else "(no target)"
        print(f"{_label(run):12s} {reference.accuracy:10.3f} {ratio:7.1f} {agreement.accuracy:10.3f}   {verdict}; "
              f"most frequent fills {reference.top_answers}")
    for run in finished:
        if run.family in CONTINUING_FAMILIES:
            continuation = continuation_scores(home / "runs" / run.run_id)
            tally.add("continuations that parse", run.family, continuation.parse_rate, continuation.sentences)
            verdict = "met" if continuation.parse_rate >= TARGET_PARSE_RATE else \
                f"missed by {TARGET_PARSE_RATE - continuation.parse_rate:.2f}"
            print(f"{_label(run)} continuations: {continuation.parse_rate:.0%} of {continuation.sentences} complete "
                  f"sentences parse (target >= {TARGET_PARSE_RATE:.0%}: {verdict}); e.g. {continuation.example!r}")
    span_quality(home, finished, tally)
    translation_quality(home, finished, tally)
    probe_quality(home, finished, tally)
    compare_quality(home, finished, COMPARE_PROMPT)
    if finetune_tasks:
        finetune_quality(home, finished, finetune_tasks, workers, tally)
    tally.report()


TARGET_SPAN_RATIO = 2.0  # the span-infilling families fill held-out spans at 2x the best trivial baseline
SPAN_FAMILIES = ("t5", "glm", "mass", "unilm")
TRANSLATION_FAMILIES = ("mass", "t5", "cove")  # beat copying the source in BLEU
TARGET_SELECTIVITY = 0.05  # every family's best probe layer beats its random-init control by this on a context task
CONTEXT_PROBE_TASKS = ("ambiguous_tags", "antecedent", "subject_number")
COMPARE_FAMILIES = ("gpt", "gpt2", "bert", "t5")  # the Compare tab's default columns


def span_quality(home: Path, runs, tally: Tally) -> None:
    """The span-infilling families on held-out "the NOUN" spans, beside story_tasks' span baselines."""
    baselines = baseline_table().set_index("task").loc["reference_span"]
    best = float(baselines["best_baseline"])
    print(f"\nspans: the two words \"the NOUN\" of held-out reference blanks, hidden whole, filled by infill "
          f"(baselines: majority {baselines['majority']:.3f}, bigram {baselines['bigram']:.3f}, trigram "
          f"{baselines['trigram']:.3f}, both sides {baselines['both_sides']:.3f}; target >= "
          f"{TARGET_SPAN_RATIO:.0f}x {best:.3f})")
    tally.target("spans", TARGET_SPAN_RATIO * best, SPAN_FAMILIES, f">= {TARGET_SPAN_RATIO:.0f}x the best baseline "
                 f"{best:.3f}")
    print(f"{'run':12s} {'exact':>6s} {'x best':>7s} {'noun':>6s}")
    for run, scores in _scored(home, runs, SPAN_FAMILIES, span_scores):
        tally.add("spans", run.family, scores.accuracy, scores.items)
        ratio = scores.accuracy / best
        verdict = "met" if ratio >= TARGET_SPAN_RATIO else f"missed by {TARGET_SPAN_RATIO - ratio:.1f}x"
        print(f"{_label(run):12s} {scores.accuracy:6.3f} {ratio:7.1f} {scores.noun_accuracy:6.3f}   {verdict}; "
              f"most frequent fills {scores.top_answers}")


def _scored(home: Path, runs, families, score):
    """(run, score(run folder)) for the runs of `families` whose score is not None (a family that cannot)."""
    for run in runs:
        if run.family in families:
            scores = score(home / "runs" / run.run_id)
            if scores is not None:
                yield run, scores


def translation_quality(home: Path, runs, tally: Tally) -> None:
    """The translating families' BLEU on held-out sentence pairs of the stories, beside copying the source."""
    print("\ntranslation: BLEU (sacrebleu, Chinese per character) of greedy translations of 120 held-out stories "
          "sentences, beside copying the English source (target: above it)")
    tally.target("BLEU minus copying the source", 1e-9, TRANSLATION_FAMILIES, "> 0")
    print(f"{'run':12s} {'BLEU':>6s} {'copy':>6s} {'chrF':>6s}")
    for run, scores in _scored(home, runs, TRANSLATION_FAMILIES, translation_scores):
        tally.add("BLEU minus copying the source", run.family, scores.bleu - scores.copy_bleu)
        verdict = "met" if scores.bleu > scores.copy_bleu else \
            f"missed by {scores.copy_bleu - scores.bleu:.1f} BLEU"
        english, reference, translation = scores.example
        print(f"{_label(run):12s} {scores.bleu:6.1f} {scores.copy_bleu:6.1f} {scores.chrf:6.1f}   {verdict}; "
              f"{english!r} -> {translation!r} (reference {reference!r})")


def probe_quality(home: Path, runs, tally: Tally) -> None:
    """Every run's best probe layer on the stories' context tasks against the best layer of its random-init
    control (the same architecture and seed, untrained)."""
    print(f"\nprobes on the context tasks: the best layer's accuracy, the best layer of the random-init control, and "
          f"the difference (target: >= {TARGET_SELECTIVITY} on at least one task)")
    tally.target("best probe over its control", TARGET_SELECTIVITY, tuple(ZOO_ORDER),
                 f">= {TARGET_SELECTIVITY} on the best of the three tasks, every family")
    print(f"{'run':12s} " + " ".join(f"{task:>24s}" for task in CONTEXT_PROBE_TASKS) + "   verdict")
    for run in runs:
        cells, margins = [], []
        for task in CONTEXT_PROBE_TASKS:
            try:
                frame = api.probe_layers(home / "runs" / run.run_id, task)
            except ValueError as error:
                cells.append(f"{'—':>24s}")
                print(f"  {_label(run)} {task}: {error}")
                continue
            trained, control = float(frame["accuracy"].max()), float(frame["control"].max())
            margins.append(trained - control)
            cells.append(f"{trained:.3f} vs {control:.3f} ({trained - control:+.3f})".rjust(24))
        best = max(margins, default=float("nan"))
        tally.add("best probe over its control", run.family, best)
        verdict = "met" if best >= TARGET_SELECTIVITY else f"missed by {TARGET_SELECTIVITY - best:.3f}"
        print(f"{_label(run):12s} " + " ".join(cells) + f"   {verdict}")


def compare_quality(home: Path, runs, prompt: str) -> None:
    """The Compare tab's default columns (GPT, GPT-2, BERT, T5 in Auto mode on its default prompt): does each column
    read as sentences of the grammar? A column does when it holds the sentences the prompt asks for
    (`sentences_asked_for`) and every complete sentence of it parses (words after the last "." are an unfinished
    sentence, not scored)."""
    print(f"\nthe default Compare ({', '.join(COMPARE_FAMILIES)}, Auto mode) on {prompt!r}: every column's text "
          "(the prompt with the answer) split into sentences, each parsed by the grammar")
    met = 0
    for run in runs:
        if run.family not in COMPARE_FAMILIES or run.seed != 0:
            continue
        generation = api.generate(home / "runs" / run.run_id, prompt, mode="auto", max_new_tokens=24)
        sentences = complete_sentences_of(generation.text)
        parsed = [parse_sentence(sentence) is not None for sentence in sentences]
        if len(sentences) < sentences_asked_for(prompt):
            verdict = "does not finish the prompt's sentence"
        elif all(parsed):
            verdict, met = "reads as sentences", met + 1
        else:
            verdict = f"{len(parsed) - sum(parsed)} of {len(parsed)} sentences do not parse"
        print(f"  {run.family:6s} {generation.text!r}: {verdict}")
    print(f"  {met} of {len(COMPARE_FAMILIES)} columns read as sentences (target: all)")


FINETUNE_TASKS = ("scope", "story_order")  # the stories' fine-tuning tasks; --finetune-tasks all adds the synthetic ones


def finetune_quality(home: Path, runs, tasks, workers: int, tally: Tally) -> None:
    """Every run fine-tuned on each task (`python -m lab_models finetune`, its defaults: 200 steps, seed 0), `workers`
    at once with one thread each; per family the mean accuracy and its 95% interval (over seeds, with two or more;
    else Wilson's over the validation examples), beside the task's majority baseline, and whether any task is solved at
    1.000 by every family."""
    import json
    from lab_models.inference.seed_intervals import mean_interval, wilson_interval

    folders = {}
    jobs = [(run, task) for task in tasks for run in runs if run.family != "cvt" or task == "tagging"]
    pending, running = list(jobs), []
    began = time.monotonic()
    while pending or running:
        while pending and len(running) < workers:
            run, task = pending.pop(0)
            out = home / "bench-finetunes" / f"{run.run_id}--{task}"
            folders[(run.run_id, task)] = out
            if (out / "result.json").exists():
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            command = [sys.executable, "-m", "lab_models", "finetune", "--run", str(home / "runs" / run.run_id),
                       "--task", task, "--out", str(out), "--home", str(home)]
            running.append(subprocess.Popen(command, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"},
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        running = [process for process in running if process.poll() is None]
        time.sleep(0.2)
    print(f"\nfine-tuning ({len(jobs)} fine-tunings of 200 steps, {workers} at once: "
          f"{time.monotonic() - began:.0f} s); accuracy on each task's validation split, 95% interval")
    for task in tasks:
        results: dict[str, list[dict]] = {}
        for run in runs:
            folder = folders.get((run.run_id, task))
            result_file = folder / "result.json" if folder else None
            if result_file and result_file.exists():
                results.setdefault(run.family, []).append(json.loads(result_file.read_text()))
        if not results:
            continue
        majority = next(iter(results.values()))[0].get("majority_baseline", float("nan"))
        print(f"  {task} (majority baseline {majority:.3f}):")
        perfect = []
        for family, rows in results.items():
            accuracies = [row["accuracy"] for row in rows]
            for row in rows:
                tally.add(f"fine-tuned {task}", family, row["accuracy"], int(row.get("validation_examples") or 0))
            mean, low, high = mean_interval(accuracies)
            over = "seeds"
            if len(rows) == 1:
                low, high = wilson_interval(mean, int(rows[0].get("validation_examples") or 0))
                over = "examples"
            perfect.append(all(accuracy >= 1.0 for accuracy in accuracies))
            print(f"    {family:10s} {mean:.3f} [{low:.3f}, {high:.3f}] over {over} ({len(rows)} seed"
                  f"{'s' if len(rows) > 1 else ''})")
        verdict = "solved at 1.000 by every family (too easy)" if all(perfect) else "not solved by every family: met"
        print(f"    -> {verdict}")


def sentences_asked_for(prompt: str) -> int:
    """How many complete sentences a column that answers `prompt` must hold: the prompt's own (a blank is filled in
    its sentence), and one more when the prompt ends inside a sentence (the answer finishes it).

    >>> sentences_asked_for("a doctor guards two judges . they"), sentences_asked_for("the cat [MASK] a ball .")
    (2, 1)
    """
    words = prompt.replace(".", " . ").split()
    open_tail = bool(words) and words[-1] != "."
    return len(complete_sentences_of(prompt)) + open_tail


def complete_sentences_of(text: str) -> list[str]:
    """The sentences of a column's text up to its last "." (the words after it are an unfinished sentence)."""
    words = text.replace(".", " . ").split()
    sentences, current = [], []
    for word in words:
        current.append(word)
        if word == ".":
            sentences.append(" ".join(current))
            current = []
    return sentences


def _label(run) -> str:
    """A zoo run's name in the tables: its family, and its seed when the zoo has several ('bert/1')."""
    return run.family if run.seed == 0 else f"{run.family}/{run.seed}"


def scores(home: Path, config: ZooConfig, finetune_tasks=()) -> None:
    """The quality checks of the zoo's corpus: the synthetic grammar's easy blanks, or the stories' context tasks."""
    if config.corpus_name == "synthetic":
        quality(home, config)
    elif config.corpus_name == "stories":
        context_quality(home, config, finetune_tasks, config.workers_here)
    else:
        print(f"\nno quality check for the corpus {config.corpus_name!r} (synthetic and stories have one)")


def train_zoo(args) -> None:
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="bench-zoo-"))
    config = ZooConfig(preset=args.preset, families=parse_families(args.families), steps=args.steps,
                       device=args.device, corpus=args.corpus, budget_flops=args.budget_flops, seeds=args.seeds,
                       workers=args.workers)
    finetune_tasks = _finetune_tasks(args.finetune_tasks)
    if args.score_only:
        scores(home, config, finetune_tasks)
        return
    print(f"zoo {config.name}: {len(config.families)} families into {home} ({load()})", flush=True)
    jobs = JobManager(home, recover=False, poll_interval_s=0.1)
    began = time.monotonic()
    start_zoo(jobs, config)
    launched: dict[str, float] = {}
    ended: dict[str, float] = {}
    try:
        while True:
            progress = zoo_progress(jobs, config)
            now = time.monotonic() - began
            for run in progress.runs:
                key = (run.family, run.seed)
                if run.state == "running":
                    launched.setdefault(key, now)
                elif run.state in ("finished", "failed", "stopped") and key not in ended:
                    launched.setdefault(key, now)
                    ended[key] = now
                    print(f"  {len(ended):2d}/{len(progress.runs)} {_label(run):12s} {run.state:8s} "
                          f"{ended[key] - launched[key]:6.1f} s (at {now:6.1f} s)", flush=True)
            if not progress.active:
                break
            time.sleep(0.2)
    except KeyboardInterrupt:
        stop_zoo(jobs, config.name)
        raise
    finally:
        jobs.close()
    total = time.monotonic() - began
    order = sorted(ended.values())
    firsts = ", ".join(f"{k + 1}: {order[k]:.1f} s" for k in range(min(3, len(order))))
    verdict = "ok" if total < TARGET_ZOO_S or config.preset != "tiny" else "SLOW"
    fast = "met" if total < TARGET_ZOO_FAST_S else "NOT met"
    print(f"\ntotal {total:.1f} s for {len(ended)} runs (target < {TARGET_ZOO_S:.0f} s: {verdict}; the faster "
          f"< {TARGET_ZOO_FAST_S:.0f} s for the tiny zoo: {fast}); first finished runs at {firsts}; {load()}")
    print(f"{'run':12s} {'steps':>6s} {'seconds':>8s} {'val bits/byte':>14s}")
    for run in zoo_progress(api.RunStore(home), config).runs:
        key = (run.family, run.seed)
        seconds = ended.get(key, float("nan")) - launched.get(key, float("nan"))
        bits = f"{run.val_bits_per_byte:.3f}" if run.val_bits_per_byte is not None else "—"
        print(f"{_label(run):12s} {run.total_steps:6d} {seconds:8.1f} {bits:>14s}")
    scores(home, config, finetune_tasks)
    if not args.home and not args.keep:
        shutil.rmtree(home, ignore_errors=True)


def _finetune_tasks(text: str) -> tuple[str, ...]:
    if text in ("", "none"):
        return ()
    if text == "all":
        return tuple(api.FINETUNE_TASKS)
    tasks = tuple(task.strip() for task in text.split(",") if task.strip())
    unknown = [task for task in tasks if task not in api.FINETUNE_TASKS]
    if unknown:
        raise SystemExit(f"unknown fine-tuning task {unknown[0]!r}: choose from {', '.join(api.FINETUNE_TASKS)}, all "
                         "or none")
    return tasks


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def time_to_first_comparison(args) -> None:
    import httpx
    from gradio_client import Client

    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="bench-zoo-app-"))
    port = args.port or _free_port()
    url = f"http://127.0.0.1:{port}/"
    print(f"python app.py on a fresh lab home {home} ({load()})", flush=True)
    began = time.monotonic()
    app = subprocess.Popen([sys.executable, "app.py", "--port", str(port)], cwd=REPO,
                           env={**os.environ, "PRETRAINING_LAB_HOME": str(home)}, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    client = None
    try:
        while True:
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        served = time.monotonic() - began
        client = Client(url, verbose=False)
        client.predict(api_name="/zoo_start")
        clicked = time.monotonic() - began
        print(f"page served after {served:.1f} s; Train the demo zoo clicked at {clicked:.1f} s", flush=True)
        store = api.RunStore(home)
        while True:
            finished = [run.run_id for run in zoo_progress(store).runs if run.state == "finished"]
            if len(finished) >= 2:
                page, details = client.predict(finished[:2], PROMPT, "auto", "greedy", 1.0, 0, 1.0, 4, 12, 0, 4, 0,
                                               api_name="/compare_generate")
                if len(details) == 2 and all("error" not in column for column in details):
                    break
            time.sleep(0.5)
        shown = time.monotonic() - began
        verdict = "ok" if shown < TARGET_FIRST_COMPARISON_S else "SLOW"
        print(f"first side-by-side comparison ({', '.join(d['family'] for d in details)}) at {shown:.1f} s after "
              f"python app.py (target < {TARGET_FIRST_COMPARISON_S:.0f} s: {verdict}); {load()}")
        for column in details:
            print(f"  {column['family']}: {column.get('text')!r}")
        client.predict(api_name="/zoo_stop")
    finally:
        app.terminate()
        try:
            app.wait(timeout=90)
        except subprocess.TimeoutExpired:
            app.kill()
        if args.home or args.keep:
            print(f"lab home kept: {home} (python app.py --home {home} continues the zoo)")
        else:
            shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--families", default="all")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--corpus", help="the zoo's corpus (default: the preset's)")
    parser.add_argument("--budget-flops", type=float, help="equal training FLOPs for every family instead of steps")
    parser.add_argument("--seeds", type=int, default=1, help="runs per family (seeds 0, 1, ...)")
    parser.add_argument("--workers", type=int, help="runs at once (default: the zoo's rule, one per core at tiny)")
    parser.add_argument("--finetune-tasks", default=",".join(FINETUNE_TASKS),
                        help="fine-tune every run on these built-in tasks (comma-separated, 'all' or 'none'; default: "
                             "the stories' scope and story_order)")
    parser.add_argument("--score-only", action="store_true",
                        help="score the zoo already trained in --home (no training)")
    parser.add_argument("--home", help="a fresh lab home to use (kept) instead of a temporary one")
    parser.add_argument("--keep", action="store_true", help="keep the temporary lab home")
    parser.add_argument("--time-to-first-comparison", action="store_true")
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    if args.time_to_first_comparison:
        time_to_first_comparison(args)
    else:
        train_zoo(args)


if __name__ == "__main__":
    main()
