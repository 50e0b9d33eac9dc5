"""The equal-budget leaderboard: every run with weights, one row each, measured the same way.

    leaderboard(home)                        -> pandas.DataFrame, one row per run (all corpora, grouped by corpus)
    leaderboard(home, "synthetic")           -> only the runs trained on that corpus ("the same corpus" rule)
    leaderboard(home, zoo="tiny")            -> only the runs of that zoo (experiments/zoo.py), one per family
    leaderboard_corpora(home)                -> the corpora that have runs with weights
    write_leaderboard_csv(frame, path)       -> the CSV file (pandas reads it back unchanged)

Columns (LEADERBOARD_COLUMNS, then one `accuracy_<task>` per fine-tuning task that any listed run has, then the
notes, then the baselines): run_id, family, predicts (what the family's validation loss is measured on, `PREDICTS`:
next_token, masked_tokens, permuted_tokens, spans, translation, tags), preset, corpus, steps (of the weights
measured), training_tokens, parameters, val_bits_per_byte, fill_mask_accuracy, fill_mask_examples,
infill_exact_match, infill_examples, best_probe_layer, probe_accuracy, training_flops, seed, accuracy_<task> ...,
fill_mask_note,
infill_note, probe_note, baseline_val_bits_per_byte, baseline_fill_mask_accuracy, baseline_infill_exact_match,
baseline_accuracy_<task> ... (each score's trivial baseline: `trivial_baselines`; a task's is its majority-class
accuracy). Rows are sorted by corpus, then by
validation bits per byte (best first).

The metrics, and how each deviates from the papers' own evaluations
--------------------------------------------------------------------
- **val_bits_per_byte**: the trainer's own number (lab_models/training/engine.py): the family's validation loss in nats
  per target token, summed over the targets and divided by the UTF-8 bytes of those targets, over ln 2; the latest
  evaluation row of metrics.jsonl at or before the step of the weights. Lower is better. A run with no evaluation
  row of its own (an imported checkpoint: nothing was trained in the lab) gets it **measured** here, the trainer's
  way: the validation split of the corpus it is filed under, encoded with the run's own tokenizer and packed into
  rows of min(its row length, MEASURED_SEQ_LEN) tokens (bare, as the lab's training rows are: no [CLS]/[SEP]),
  MEASURED_BATCHES batches of MEASURED_BATCH_SIZE rows built by the family's own batch builder with the trainer's
  validation seeds, the family's own loss (BERT: its masked tokens and NSP). The table's `attrs["measured"]` lists
  those runs, and the page says so. It is the family's *own*
  objective (next token for GPT, masked tokens for BERT, spans for T5, ...), so it compares runs of one family well
  and families only roughly: predicting a masked token with both sides visible is easier than the next token.
- **fill_mask_accuracy** (BERT's cloze task, Devlin et al. 2019 §3.1, used as a probe): N sentences of the corpus's
  validation split (chosen with a seeded generator, the same sentences for every run), each encoded with the run's
  tokenizer and cut to the run's training row length; one word-piece token per sentence, at a seeded relative
  position, is replaced by [MASK] and the run predicts it from all the other tokens, framed as the run reads a text
  (an imported checkpoint inside its tokenizer's own framing, `[CLS] ... [SEP]`), exactly as `api.fill_mask`
  reads a slot (lab_models/inference/generation/generate.py: BERT-style families, ELECTRA's generator, UniLM
  bidirectional, XLNet and MPNet through the query stream, GLM as a one-token blank, T5 as a one-token span). A hit is
  the top-1 token (special tokens excluded) equal to the original id. Deviations: tiny held-out sets (N =
  `max_examples`), one mask per sentence (BERT masks 15% of a row), no 80/10/10 corruption, and a sub-word piece counts
  as a token (the same piece boundaries as the run's tokenizer, so runs with different tokenizers answer different
  questions). GPT, GPT-2 and MASS cannot fill a single [MASK]: NaN, with the reason in fill_mask_note.
- **infill_exact_match** (the blank-infilling evaluations of T5, GLM, MASS and UniLM, reduced to one blank): N
  held-out sentences of 4 to 32 words; a span of 1 to 3 whole words (never the first word: UniLM needs a source)
  is replaced by a blank ___ and the run fills it with `api.generate(mode="infill")`, greedily. MASS and UniLM are
  told the span's length in tokens (they have no end-of-span token; MASS's pretraining also knows it), T5 and GLM
  decide it themselves (up to that length + 4 tokens). A hit is the fill equal to the span after both go through the
  run's tokenizer (encode, decode), compared case-insensitively with all whitespace removed (tokenizers disagree on
  spaces around punctuation); the score is the hit rate, as SQuAD's EM but without its article and punctuation
  stripping. Families without an infill mode (generation_modes) get NaN, with the reason in infill_note.
- **best_probe_layer**, **probe_accuracy** (Liu et al. 2019's linear probes, lab_models/inference/probing.py): the
  layer (and stream) whose linear probe for the words' roles in the synthetic grammar (`PROBE_TASK`: subject, verb,
  object, adverb, place) is most accurate on held-out sentences, and that accuracy; the probe's data are the
  synthetic corpus's whatever the run's corpus. Roles rather than the part-of-speech tags: in this grammar the word
  alone decides its tag, so every layer of every run (and its untrained control) scores alike on tags, while a role
  needs the context. Deviation: one probe per layer on a few thousand words, not the papers' treebanks. The layer
  is also given in parts (best_probe_stream, best_probe_layer_name, best_probe_depth) for a page that writes it in
  its reader's language.
- **accuracy_<task>**: the best validation accuracy of the *finished* fine-tunings of this run on that task
  (lab_models/inference/finetuning/run.py `finetune_leaderboard`); NaN when it has none. Different fine-tuning budgets
  are not equalised here: the Understand tab's fine-tuning decides them.
- **parameters**: config.json's num_parameters (every weight the model holds: ELECTRA's generator and
  discriminator together). **training_tokens**: the input tokens trained on up to the weights' step (metrics.jsonl
  "tokens"; steps x batch_size x seq_len x world_size when a row lacks it). **training_flops**: those tokens times
  the model's FLOPs per training token as the trainer counted them (metrics.jsonl "flops_per_token",
  lab_models/training/flops.py): the compute the run had. Compare runs of equal compute (a zoo trained with
  `--budget-flops`), or of one corpus, preset and step count. **seed**: the run's training seed; a zoo trained with
  `--seeds N` has N runs per family, and lab_models/inference/seed_intervals.py `seed_summary` turns them into each
  score's mean and 95% interval per family.

Cost and cache. A run's fill-mask and infill scores take one forward pass per fill-mask sentence and a few (one per
generated token) per infill sentence: with the default 64 examples, a few hundred small passes per run. They are
cached in the run folder (`leaderboard.json`), keyed by the weights file, its modification time, the corpus
fingerprint, `max_examples`, `seed` and the version of these rules, so the table is instant the second time and is
recomputed only when the weights change (a run still training writes new checkpoints). The other columns are read
fresh every time (they are files, not forward passes).
"""
from __future__ import annotations

import logging
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from lab_models.messages import LabError, Message, message_of
from lab_models.training import runs
from lab_models.training.config import check_seed
from lab_models.home import atomic_write_json, lab_home
from lab_models.inference.loading import weights_file
from lab_models.inference.generation.context import FILL_MASK_FAMILIES
from lab_models.inference.generation.context import DecodingContext
from lab_models.inference.generation.generate import fill_mask_logits
from lab_models.inference.generation.generate import fill_mask_refusal
from lab_models.inference.generation.plans import UnsupportedMode
from lab_models.inference.generation.generate import generate
from lab_models.inference.generation.context import generation_modes
from lab_models.inference.loading import load_run
from lab_models.inference.probing import best_probe_layer, probe_layers
from lab_models.inference.finetuning.results import finetune_leaderboard
from lab_models.inference.finetuning.config import finetunes_dir
from lab_models.text.corpora import load_corpus
from lab_models.text.streams import encode_stream
from lab_models.text.vocab import token_byte_lengths
from lab_models.objectives import objective_module
from lab_models.objectives.common import BatchConfig
from lab_models.training.batches import PackedBatches
from lab_models.training.engine import bits_per_byte, derive_seed, generator_for
from lab_models.text.corpus_sources import FileSource, open_corpus
from lab_models.text.corpus_streams import ReadReport

logger = logging.getLogger(__name__)


LEADERBOARD_COLUMNS = ["run_id", "family", "predicts", "preset", "corpus", "steps", "training_tokens", "parameters",
                       "val_bits_per_byte", "fill_mask_accuracy", "fill_mask_examples", "infill_exact_match",
                       "infill_examples", "best_probe_layer", "probe_accuracy", "training_flops", "seed"]
BASELINE_PREFIX = "baseline_"  # + a score column: that score's trivial baseline for the run (see the docstring)
BASELINE_COLUMNS = [BASELINE_PREFIX + name for name in ("val_bits_per_byte", "fill_mask_accuracy",
                                                        "infill_exact_match")]
# What each family's validation loss (so its bits per byte) is measured on: the tokens its objective predicts. Bits
# per byte of different groups are different quantities (a masked token with both sides visible is easier than the
# next one), so the page compares runs within a group.
PREDICTS = {"gpt": "next_token", "gpt2": "next_token", "elmo": "next_token", "ulmfit": "next_token",
            "bert": "masked_tokens", "roberta": "masked_tokens", "albert": "masked_tokens",
            "spanbert": "masked_tokens", "electra": "masked_tokens", "unilm": "masked_tokens",
            "xlnet": "permuted_tokens", "mpnet": "permuted_tokens",
            "mass": "spans", "t5": "spans", "glm": "spans",
            "cove": "translation", "cvt": "tags"}
PREDICTS_ORDER = ("next_token", "masked_tokens", "permuted_tokens", "spans", "translation", "tags", "other")
REFERENCE_CHARACTERS = 200_000  # the training text the trivial baselines count tokens and words in
NOTE_COLUMNS = ["fill_mask_note", "infill_note", "probe_note"]
# best_probe_layer's parts (empty where the run has no probe): the page writes the layer in the reader's language
PROBE_LAYER_COLUMNS = ["best_probe_stream", "best_probe_layer_name", "best_probe_depth"]
ACCURACY_PREFIX = "accuracy_"  # + the fine-tuning task's name: one column per task
# the scores a plot shows, with whether lower is better
METRIC_COLUMNS = {"val_bits_per_byte": True, "fill_mask_accuracy": False, "infill_exact_match": False,
                  "probe_accuracy": False}
PROBE_TASK = "roles"  # the probe the table ranks (the module docstring says why not the tags)
CACHE_FILE = "leaderboard.json"
CACHE_VERSION = 5  # bump when the evaluation rules change, so cached scores are recomputed (4: framing, baselines,
#   the probe columns; 5: the best probe layer's parts)
MEASURED_SEQ_LEN = 128  # a run without validation rows: bits per byte measured on rows of at most this many tokens
MEASURED_BATCH_SIZE = 8
MEASURED_BATCHES = 4  # 4 x 8 rows of 128 tokens: about 4k tokens, seconds for a 100M-parameter model on a CPU
CACHE_ENTRIES = 8  # settings kept per run (each a few numbers)
DEFAULT_MAX_EXAMPLES = 64
MAX_EXAMPLES_LIMIT = 500
INFILL_WORDS = (4, 32)  # held-out sentences for infilling have this many whitespace words (inclusive)
INFILL_SPAN_WORDS = 3  # spans of 1 .. this many words
INFILL_EXTRA_TOKENS = 4  # T5 and GLM may write the span's length + this many tokens before they are cut off
MIN_WORD_CHARACTERS = 4  # a held-out sentence has at least this many letters or digits ("e.g." is no sentence)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*")
_WORD_CHARACTER = re.compile(r"\w")


# ------------------------------------------------------------------------------------------------ held-out text
def held_out_sentences(documents) -> list[str]:
    """The sentences of `documents` in order: split after . ! ? followed by space, and after 。！？; whitespace runs
    become one space; fragments with fewer than MIN_WORD_CHARACTERS letters or digits are dropped.

    >>> held_out_sentences(["the cat sees a ball . it runs home .", "猫看见球。它跑回家。"])
    ['the cat sees a ball .', 'it runs home .', '猫看见球。', '它跑回家。']
    """
    out = []
    for document in documents:
        for sentence in _SENTENCE_END.split(str(document)):
            sentence = " ".join(sentence.split())
            if len(_WORD_CHARACTER.findall(sentence)) >= MIN_WORD_CHARACTERS:
                out.append(sentence)
    return out


@dataclass(frozen=True)
class HeldOutExamples:
    """The questions every run of a corpus answers: sentences with a seeded relative mask position, and sentences
    with a seeded word span. Drawn once per (corpus, N, seed), independent of any run."""

    fill_mask: tuple[tuple[str, float], ...]  # (sentence, u in [0, 1): the masked token is candidates[int(u * n)])
    infill: tuple[tuple[str, int, int], ...]  # (sentence, first word of the span (>= 1), words in the span)
    reference: tuple[str, ...] = ()  # the start of the training split: what the trivial baselines count in
    validation: tuple[str, ...] = ()  # the start of the validation split: what the unigram baseline is scored on


def held_out_examples(validation, max_examples: int, seed: int = 0, train=()) -> HeldOutExamples:
    """`max_examples` fill-mask and infill examples from the validation documents, chosen with
    torch.Generator(seed): a seeded sample of the sentences (not the first N, so they come from many documents),
    then per sentence the relative mask position, or the span's start and length.

    >>> examples = held_out_examples(["the cat sees a red ball in the park ."], 4, seed=0)
    >>> len(examples.fill_mask), len(examples.infill), examples.infill[0][0]
    (1, 1, 'the cat sees a red ball in the park .')
    """
    sentences = held_out_sentences(validation)
    generator = torch.Generator().manual_seed(int(seed))
    fill_order = torch.randperm(len(sentences), generator=generator)[:max_examples].tolist()
    fill = tuple((sentences[i], float(torch.rand((), generator=generator))) for i in fill_order)
    low, high = INFILL_WORDS
    pool = [s for s in sentences if low <= len(s.split()) <= high]
    infill_order = torch.randperm(len(pool), generator=generator)[:max_examples].tolist()
    infill = []
    for i in infill_order:
        n_words = len(pool[i].split())
        length = 1 + int(torch.randint(INFILL_SPAN_WORDS, (), generator=generator))
        length = min(length, n_words - 1)
        start = 1 + int(torch.randint(n_words - length, (), generator=generator))  # 1 .. n_words - length
        infill.append((pool[i], start, length))
    return HeldOutExamples(fill_mask=fill, infill=tuple(infill), reference=_first_characters(train),
                           validation=_first_characters(validation))


def _first_characters(documents, limit: int = REFERENCE_CHARACTERS) -> tuple[str, ...]:
    """The documents in order, up to `limit` characters in all (the last one cut).

    >>> _first_characters(["abc", "defg", "hi"], limit=5)
    ('abc', 'de')
    """
    out, left = [], limit
    for document in documents:
        if left <= 0:
            break
        out.append(str(document)[:left])
        left -= len(out[-1])
    return tuple(out)


# ------------------------------------------------------------------------------------------------ one run's facts
def _number(value) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def run_row(run_dir: Path, weights_step: int) -> dict:
    """The columns read from the run's files (no forward pass): run_id, family, preset, corpus, steps,
    training_tokens, parameters, val_bits_per_byte, at the step of the weights, and training_flops (the tokens times
    the model's FLOPs per token that the trainer counted; NaN where it could not)."""
    config = runs.read_config(run_dir)
    metrics = runs.read_metrics(run_dir)
    train_rows = [row for row in metrics if row.get("split", "train") != "val"
                  and isinstance(row.get("step"), (int, float)) and row["step"] <= weights_step]
    val_rows = [row for row in metrics if row.get("split") == "val" and row.get("bits_per_byte") is not None]
    val_at = [row for row in val_rows if isinstance(row.get("step"), (int, float)) and row["step"] <= weights_step]
    val_row = (val_at or val_rows or [{}])[-1]
    tokens = _number(train_rows[-1].get("tokens")) if train_rows else math.nan
    if math.isnan(tokens):
        per_step = [config.get("batch_size"), config.get("seq_len"), config.get("world_size") or 1]
        tokens = float(weights_step * math.prod(int(v) for v in per_step)) if all(per_step) else math.nan
    per_token = next((_number(row.get("flops_per_token")) for row in reversed(train_rows)
                      if row.get("flops_per_token") is not None), math.nan)
    return {"run_id": run_dir.name, "family": config.get("family"),
            "predicts": PREDICTS.get(str(config.get("family")), "other"), "preset": config.get("preset"),
            "corpus": config.get("corpus"), "steps": int(weights_step), "training_tokens": tokens,
            "parameters": _number(config.get("num_parameters")),
            "val_bits_per_byte": _number(val_row.get("bits_per_byte")), "training_flops": tokens * per_token,
            "seed": _seed(config)}


def _seed(config: dict) -> int:
    """The run's training seed (config.json), 0 when it has none (an imported checkpoint)."""
    seed = config.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else 0


def _runs_with_weights(home: Path) -> list[tuple[Path, Path, int]]:
    """(run folder, weights file, step) for every run under <home>/runs that has weights now, newest first."""

    if not (home / "runs").is_dir():
        return []
    out = []
    for summary in runs.list_runs(home):
        run_dir = Path(summary["path"])
        try:
            weights, step = weights_file(run_dir)
        except (ValueError, OSError):
            continue
        if runs.read_config(run_dir).get("family"):
            out.append((run_dir, weights, step))
    return out


def leaderboard_corpora(home=None) -> list[str]:
    """The corpora (as the runs' config.json names them) that have at least one run with weights, those with the
    most runs first, then by name."""
    counts: dict[str, int] = {}
    for run_dir, _, _ in _runs_with_weights(lab_home(home)):
        corpus = runs.read_config(run_dir).get("corpus")
        if corpus:
            counts[str(corpus)] = counts.get(str(corpus), 0) + 1
    return sorted(counts, key=lambda name: (-counts[name], name))


# ------------------------------------------------------------------------------------------------ the evaluations
def _normalise(text: str) -> str:
    """Case-folded, with every whitespace removed: the infill comparison (see the module docstring).

    >>> _normalise(" The  cat ."), _normalise("the cat.")
    ('thecat.', 'thecat.')
    """
    return "".join(str(text).lower().split())


def _fill_mask_score(run, examples: HeldOutExamples) -> tuple[float, int, Message | str]:
    """(accuracy, examples scored, note) of one loaded run."""
    # The id-level helpers of lab_models/inference/generation/generate.py: the same slot prediction as api.fill_mask,
    # but on token ids,
    # so the masked piece is exactly one token of the run's own encoding (re-encoding a text with "[MASK]" in it
    # could move the piece boundaries around the slot).

    if run.family not in FILL_MASK_FAMILIES:
        return math.nan, 0, Message("{reason}.", reason=fill_mask_refusal(run.family))
    ctx = DecodingContext(run)
    banned = ctx.banned
    row_length = int(run.config.get("seq_len") or run.max_positions)
    added = ctx.framing.reading.added()  # an imported checkpoint reads [CLS] ... [SEP] (lab_models/text/framing.py)
    limit = max(2, min(row_length, run.max_positions - 2) - added)  # GLM's [S] needs one more position
    hits = scored = 0
    with torch.inference_mode():
        for sentence, u in examples.fill_mask:
            ids = ctx.encode(sentence)[:limit]
            candidates = [i for i, token in enumerate(ids) if not bool(banned[token])]
            if not candidates:
                continue
            slot = candidates[int(u * len(candidates))]
            target = ids[slot]
            ids[slot] = ctx.vocab.mask_id
            framed = ctx.read(ids)
            try:
                logits = fill_mask_logits(ctx, framed.ids, [slot + framed.start], framed.segments)  # (1, V)
            except UnsupportedMode as reason:
                return math.nan, 0, message_of(reason)
            best = int(torch.argmax(logits[0].float().masked_fill(banned, float("-inf"))))
            hits += int(best == target)
            scored += 1
    if not scored:
        return math.nan, 0, Message("no held-out sentence had a token to mask")
    return hits / scored, scored, ""


def trivial_baselines(run, examples: HeldOutExamples) -> dict:
    """Each score's trivial baseline for this run, from its tokenizer and the corpus, with no model:

    - baseline_fill_mask_accuracy: always guess the most frequent ordinary token of the training text (in the run's
      tokenizer), on the same masked slots as `_fill_mask_score`;
    - baseline_infill_exact_match: always fill the blank with the most frequent word of the training text, on the
      same spans as `_infill_score`;
    - baseline_val_bits_per_byte: a unigram model of the run's tokens (the training text's token frequencies,
      add-one smoothed), in bits per UTF-8 byte of the validation text: what a model that ignores the context scores.

    NaN where the corpus gave no reference text. A run whose score equals its baseline has learned nothing that
    counting tokens does not give (at the tiny zoo's budget, four families fill exactly the most frequent token)."""
    if not examples.reference:
        return {name: math.nan for name in BASELINE_COLUMNS}
    ctx = DecodingContext(run)
    banned = ctx.banned
    counts: dict[int, int] = {}
    for encoding in run.tokenizer.encode_batch(list(examples.reference), add_special_tokens=False):
        for token in encoding.ids:
            counts[token] = counts.get(token, 0) + 1
    ordinary = [token for token in sorted(counts, key=lambda t: (-counts[t], t))
                if 0 <= token < len(banned) and not bool(banned[token])]
    top_token = ordinary[0] if ordinary else -1
    row_length = int(run.config.get("seq_len") or run.max_positions)
    limit = max(2, min(row_length, run.max_positions - 2))
    hits = scored = 0
    for sentence, u in examples.fill_mask:
        ids = ctx.encode(sentence)[:limit]
        candidates = [i for i, token in enumerate(ids) if not bool(banned[token])]
        if candidates:
            hits += int(ids[candidates[int(u * len(candidates))]] == top_token)
            scored += 1
    fill = hits / scored if scored else math.nan
    words: dict[str, int] = {}
    for document in examples.reference:
        for word in document.lower().split():
            words[word] = words.get(word, 0) + 1
    top_word = max(sorted(words), key=lambda w: words[w]) if words else ""
    spans = [" ".join(sentence.split()[start:start + length]) for sentence, start, length in examples.infill]
    infill = (sum(_normalise(span) == _normalise(top_word) for span in spans) / len(spans)) if spans else math.nan
    total, vocabulary = sum(counts.values()), max(run.vocab.size, len(counts))
    bits = size = 0.0
    for document, encoding in zip(examples.validation, run.tokenizer.encode_batch(list(examples.validation),
                                                                                 add_special_tokens=False)):
        bits += sum(-math.log2((counts.get(token, 0) + 1) / (total + vocabulary)) for token in encoding.ids)
        size += len(document.encode("utf-8"))
    unigram = bits / size if size else math.nan
    return {"baseline_val_bits_per_byte": unigram, "baseline_fill_mask_accuracy": fill,
            "baseline_infill_exact_match": infill}


def _infill_score(run, examples: HeldOutExamples) -> tuple[float, int, Message | str]:
    """(exact match, examples scored, note) of one loaded run, through `generate(mode="infill")`."""

    if "infill" not in generation_modes(run.family):
        probe = generate(run.run_dir, "the ___ .", mode="infill")  # supported=False: the family's own reason
        return math.nan, 0, probe.explanation
    tokenizer = run.tokenizer

    def encode(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids) if text.strip() else []

    hits = scored = skipped = 0
    for sentence, start, length in examples.infill:
        words = sentence.split()
        left, span, right = (" ".join(words[:start]), " ".join(words[start:start + length]),
                             " ".join(words[start + length:]))
        span_tokens = max(1, len(encode(f"{left} {span}")) - len(encode(left)))
        prompt = f"{left} ___ {right}" if right else f"{left} ___"
        try:
            result = generate(run.run_dir, prompt, mode="infill", strategy="greedy", blank_length=span_tokens,
                              max_new_tokens=span_tokens + INFILL_EXTRA_TOKENS)
        except ValueError as error:  # e.g. longer than the model reads: not a question this run can be asked
            logger.debug("infill of %r skipped for %s: %s", sentence, run.run_id, error)
            skipped += 1
            continue
        if not result.supported:
            return math.nan, 0, result.explanation
        reference = tokenizer.decode(encode(span), skip_special_tokens=True)
        hits += int(_normalise(result.new_text) == _normalise(reference))
        scored += 1
    if not scored and skipped:
        return math.nan, 0, Message("no held-out sentence could be blanked for this run ({skipped} too long)",
                                    skipped=skipped)
    if not scored:
        return math.nan, 0, Message("no held-out sentence could be blanked for this run")
    return hits / scored, scored, (Message("{skipped} sentence(s) too long for the model were skipped",
                                           skipped=skipped) if skipped else "")


def measured_bits_per_byte(run, validation_texts) -> float:
    """Validation bits per byte of a loaded run on `validation_texts`, measured the trainer's way (see the module
    docstring: the family's batch builder and loss, the trainer's validation seeds, its bytes per token); NaN for a
    family whose batches are not corpus windows (the RNN era's own batch sources)."""
    module = objective_module(run.family)
    if not hasattr(module, "make_batch") or hasattr(module, "batch_source"):
        return math.nan
    seq_len = max(2, min(int(run.config.get("seq_len") or run.max_positions), MEASURED_SEQ_LEN, run.max_positions))
    if hasattr(module, "max_length"):  # GLM and MPNet lengthen their rows: keep them inside the model's positions
        while seq_len > 2 and module.max_length(seq_len, run.settings) > run.max_positions:
            seq_len -= 1
    stream = encode_stream(run.tokenizer, list(validation_texts), run.vocab.eos_id)
    if stream.numel() < seq_len:
        return math.nan
    batches = PackedBatches(stream, stream, seq_len=seq_len, batch_size=MEASURED_BATCH_SIZE, objective=module,
                            batch_config=BatchConfig(run.settings, run.vocab), eval_batches=MEASURED_BATCHES)
    byte_lengths = token_byte_lengths(run.tokenizer).to(run.device)
    nll = n_bytes = 0.0
    with torch.random.fork_rng(devices=[]), torch.inference_mode():  # the global generator is left as it was
        for i, batch in enumerate(batches.validation_batches(lambda i: generator_for(0, "validation", i))):
            torch.manual_seed(derive_seed(0, "validation-rng", i))  # as the trainer seeds each validation batch
            out = run.model.loss(batch.to(run.device))
            nll += float(out.target_nll.float().sum())
            if out.target_ids.numel():
                n_bytes += float(byte_lengths[out.target_ids.long()].sum())
    return bits_per_byte(nll, n_bytes)


def _probe_score(run_dir) -> tuple[str, float, Message | str, dict]:
    """(best probe layer, its accuracy, note, {stream, layer name, depth} of that layer) of one run: the PROBE_TASK
    probe of every layer (probing.py; its features are cached in the run folder). The page writes the layer from the
    last three, in the reader's language."""
    try:
        best = best_probe_layer(probe_layers(run_dir, PROBE_TASK))
    except ValueError as error:  # e.g. a tokenizer that cannot read the synthetic sentences: the other scores stand
        return "", math.nan, Message("could not probe this run: {error}", error=message_of(error)), {}
    if not best:
        return "", math.nan, Message("the run has no layer to probe"), {}
    where = {"best_probe_stream": str(best["stream"]), "best_probe_layer_name": str(best["layer_name"]),
             "best_probe_depth": float(best["depth"])}
    return f"{best['stream']}: {best['layer_name']} (depth {best['depth']:.2f})", best["accuracy"], "", where


def evaluate_run(run_dir, examples: HeldOutExamples, validation_texts=None) -> dict:
    """The forward-pass metrics of one run (no cache): fill_mask_accuracy, fill_mask_examples, fill_mask_note,
    infill_exact_match, infill_examples, infill_note, best_probe_layer, probe_accuracy, probe_note, the baselines
    (`trivial_baselines`), seconds, cacheable (False after an unexpected error), and measured_bits_per_byte (when
    `validation_texts` are given: the run has no evaluation row of its own; else NaN). A run that cannot be loaded or
    evaluated gets NaN and the reason in the notes."""

    started = time.perf_counter()
    cacheable = True
    measured = math.nan
    baselines = {name: math.nan for name in BASELINE_COLUMNS}
    probe = ("", math.nan, "", {})
    try:
        run = load_run(run_dir)
        fill = _fill_mask_score(run, examples)
        infill = _infill_score(run, examples)
        if validation_texts is not None:
            measured = measured_bits_per_byte(run, validation_texts)
        baselines = trivial_baselines(run, examples)
        probe = _probe_score(run_dir)
    except ValueError as error:
        fill = infill = (math.nan, 0, Message("could not evaluate this run: {error}", error=message_of(error)))
        probe = ("", math.nan, fill[2], {})
    except Exception as error:  # noqa: BLE001 - one broken run must not take the whole table down
        logger.exception("leaderboard: evaluating %s failed", Path(run_dir).name)
        fill = infill = (math.nan, 0, Message("evaluating this run failed: {error_type}: {error}",
                                              error_type=type(error).__name__, error=error))
        probe = ("", math.nan, fill[2], {})
        cacheable = False  # perhaps a bug fixed by the next version of the lab: ask again next time
    return {"fill_mask_accuracy": fill[0], "fill_mask_examples": fill[1], "fill_mask_note": fill[2],
            "infill_exact_match": infill[0], "infill_examples": infill[1], "infill_note": infill[2],
            "best_probe_layer": probe[0], "probe_accuracy": probe[1], "probe_note": probe[2], **probe[3], **baselines,
            "measured_bits_per_byte": measured, "seconds": time.perf_counter() - started, "cacheable": cacheable}


def _weights_now(run_dir: Path) -> tuple[str, int] | None:
    """(the weights file relative to the run folder, its modification time in ns) now; None when there are none.
    A run still training rotates its checkpoints, so a file found a moment ago may be gone: ask again."""

    for _ in range(3):
        try:
            weights, _ = weights_file(run_dir)
            return os.path.relpath(weights, run_dir), weights.stat().st_mtime_ns
        except ValueError:
            return None
        except OSError:
            continue
    return None


def _cache_key(run_dir: Path, weights: tuple[str, int], max_examples: int, seed: int, measure: bool = False) -> str:
    fingerprint = runs.read_config(run_dir).get("corpus_fingerprint", "")
    return f"v{CACHE_VERSION}|{weights[0]}|{weights[1]}|{fingerprint}|n{max_examples}|seed{seed}" + (
        f"|bpb{MEASURED_SEQ_LEN}x{MEASURED_BATCH_SIZE}x{MEASURED_BATCHES}" if measure else "")


def _read_cache(run_dir: Path, key: str) -> dict | None:
    entry = runs.read_json(run_dir / CACHE_FILE).get("entries", {}).get(key)
    if not isinstance(entry, dict):
        return None
    return {name: (math.nan if value is None and name in ("fill_mask_accuracy", "infill_exact_match",
                                                          "probe_accuracy", "measured_bits_per_byte",
                                                          *BASELINE_COLUMNS) else value)
            for name, value in entry.items()}


def _write_cache(run_dir: Path, key: str, result: dict) -> None:
    cache = runs.read_json(run_dir / CACHE_FILE)
    entries = cache.get("entries") if isinstance(cache.get("entries"), dict) else {}
    entries.pop(key, None)
    entries[key] = {name: (None if isinstance(value, float) and math.isnan(value) else value)
                    for name, value in result.items()}
    kept = dict(list(entries.items())[-CACHE_ENTRIES:])  # insertion order: the newest last
    try:
        atomic_write_json(run_dir / CACHE_FILE, {"entries": kept})
    except OSError as error:  # a read-only run folder still gets its scores, just not cached
        logger.warning("could not cache the leaderboard scores of %s: %s", run_dir.name, error)


# ------------------------------------------------------------------------------------------------ the table
def _classification(home: Path, run_ids: list[str]) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """(run id -> {task: best accuracy of its finished fine-tunings}, task -> its majority-class accuracy)."""

    if not run_ids or not finetunes_dir(home).is_dir():
        return {}, {}
    frame = finetune_leaderboard(home, runs_filter=run_ids)
    frame = frame[frame["state"] == "finished"]
    out: dict[str, dict[str, float]] = {}
    for (run_id, task), accuracy in frame.groupby(["pretrained run", "task"])["accuracy"].max().items():
        out.setdefault(str(run_id), {})[str(task)] = _number(accuracy)
    majority = {str(task): _number(value) for task, value in frame.groupby("task")["majority baseline"].max().items()}
    return out, majority


def _check_settings(corpus, max_examples, seed) -> tuple[str | None, int, int]:
    if corpus is not None and not isinstance(corpus, str):
        raise LabError("corpus must be a corpus name (as the runs' config.json says it), got {corpus!r}", corpus=corpus)
    corpus = corpus.strip() or None if isinstance(corpus, str) else None
    if isinstance(max_examples, float) and max_examples.is_integer():
        max_examples = int(max_examples)
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or not (
            1 <= max_examples <= MAX_EXAMPLES_LIMIT):
        raise LabError("max_examples must be a whole number from 1 to {max_examples_limit} (held-out sentences "
                       "per metric), got {max_examples!r}",
                       max_examples_limit=MAX_EXAMPLES_LIMIT, max_examples=max_examples)
    if isinstance(seed, float) and seed.is_integer():
        seed = int(seed)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise LabError("seed must be a whole number, got {seed!r}", seed=seed)
    check_seed(seed)  # from 0 to MAX_SEED, as a training run's
    return corpus, max_examples, seed


def leaderboard(home=None, corpus: str | None = None, *, max_examples: int = DEFAULT_MAX_EXAMPLES, seed: int = 0,
                progress: Callable[[int, int, str], None] | None = None, zoo: str | None = None):
    """One row per run with weights (see the module docstring for the columns and the metrics), as a DataFrame.

    corpus: None (or "") for every corpus, else only the runs trained on it; an unknown corpus (no run with weights
    was trained on it) is a ValueError naming the ones that have runs. zoo: only the runs tagged with that zoo (a
    zoo's runs share a corpus and a preset; their steps follow the zoo's table). max_examples: held-out sentences
    per metric (1 .. MAX_EXAMPLES_LIMIT); seed: picks the sentences and the masked positions. progress(done, total,
    message) is called before each run and at the end. `frame.attrs` holds "computed" and "cached" (the run ids
    evaluated now and those read from leaderboard.json), "seconds" (run id -> evaluation time), "tasks" (the
    fine-tuning tasks with a column) and "settings".
    """
    import pandas as pd

    corpus, max_examples, seed = _check_settings(corpus, max_examples, seed)
    home = lab_home(home)
    found = _runs_with_weights(home)
    if corpus is not None:
        chosen = [item for item in found if runs.read_config(item[0]).get("corpus") == corpus]
        if not chosen:
            names = leaderboard_corpora(home)
            if not names:
                raise LabError("No run has weights yet: train one in the Train tab first.")
            raise LabError("No run with weights was trained on corpus {corpus!r}: choose one of {names}.",
                           corpus=corpus, names=", ".join(names))
        found = chosen
    if zoo is not None:
        found = [item for item in found if runs.read_config(item[0]).get("zoo") == zoo]
        if not found:
            raise LabError("No run of the zoo {zoo!r} has weights yet: train it first (the first tab's Train the "
                           "demo zoo, or python -m lab_models zoo).", zoo=zoo)
    examples_by_corpus: dict[str, HeldOutExamples | str] = {}
    rows, computed, cached, seconds, measured = [], [], [], {}, []
    total = len(found)
    for index, (run_dir, _, step) in enumerate(found):
        if progress is not None:
            progress(index, total, f"{run_dir.name} ({index + 1}/{total})")
        row = run_row(run_dir, step)
        measure = math.isnan(row["val_bits_per_byte"])  # no evaluation row of its own (an imported checkpoint)
        weights_before = _weights_now(run_dir)
        key = _cache_key(run_dir, weights_before, max_examples, seed, measure) if weights_before else None
        result = _read_cache(run_dir, key) if key else None
        if result is not None:
            cached.append(run_dir.name)
        else:
            result = _evaluate_on_corpus(home, run_dir, row["corpus"], examples_by_corpus, max_examples, seed,
                                         measure)
            # a run still training may have saved new weights meanwhile: those scores mix steps, so they are shown
            # but not cached (the next call measures the newest weights again)
            if result.pop("cacheable", True) and key and _weights_now(run_dir) == weights_before:
                _write_cache(run_dir, key, result)
            computed.append(run_dir.name)
        seconds[run_dir.name] = float(result.get("seconds") or 0.0)
        if measure and not math.isnan(_number(result.get("measured_bits_per_byte"))):
            row["val_bits_per_byte"] = _number(result.get("measured_bits_per_byte"))
            measured.append(run_dir.name)
        rows.append({**row, **{name: result.get(name, math.nan) for name in
                               ("fill_mask_accuracy", "fill_mask_examples", "fill_mask_note", "infill_exact_match",
                                "infill_examples", "infill_note", "best_probe_layer", "probe_accuracy",
                                "probe_note", *PROBE_LAYER_COLUMNS, *BASELINE_COLUMNS)}})
    accuracies, majority = _classification(home, [row["run_id"] for row in rows])
    tasks = sorted({task for per_run in accuracies.values() for task in per_run})
    for row in rows:
        for task in tasks:
            row[ACCURACY_PREFIX + task] = accuracies.get(row["run_id"], {}).get(task, math.nan)
            row[BASELINE_PREFIX + ACCURACY_PREFIX + task] = majority.get(task, math.nan)
    task_baselines = [BASELINE_PREFIX + ACCURACY_PREFIX + task for task in tasks]
    columns = (LEADERBOARD_COLUMNS + [ACCURACY_PREFIX + task for task in tasks] + NOTE_COLUMNS + PROBE_LAYER_COLUMNS
               + BASELINE_COLUMNS + task_baselines)
    frame = pd.DataFrame(rows, columns=columns)
    for name in ("fill_mask_accuracy", "infill_exact_match", "val_bits_per_byte", "training_tokens", "parameters",
                 "training_flops",
                 "probe_accuracy", "best_probe_depth", *(ACCURACY_PREFIX + task for task in tasks), *BASELINE_COLUMNS, *task_baselines):
        frame[name] = pd.to_numeric(frame[name], errors="coerce").astype(float)
    for name in ("steps", "fill_mask_examples", "infill_examples", "seed"):
        frame[name] = pd.to_numeric(frame[name], errors="coerce").fillna(0).astype(int)
    for name in (*NOTE_COLUMNS, "best_probe_layer", "best_probe_stream", "best_probe_layer_name"):  # a note keeps its message: an object column, not a text one
        frame[name] = pd.Series([value if isinstance(value := row.get(name), str) else
                                 "" if value is None or value != value else str(value) for row in rows],
                                index=frame.index, dtype=object)
    if len(frame):
        frame = frame.sort_values(["corpus", "val_bits_per_byte", "run_id"], na_position="last",
                                  kind="stable").reset_index(drop=True)
    frame.attrs.update(computed=computed, cached=cached, seconds=seconds, tasks=tasks, measured=measured,
                       settings={"corpus": corpus, "max_examples": max_examples, "seed": seed, "zoo": zoo})
    if progress is not None:
        progress(total, total, "done")
    return frame


def _evaluate_on_corpus(home: Path, run_dir: Path, corpus_name, examples_by_corpus: dict, max_examples: int,
                        seed: int, measure: bool = False) -> dict:
    """evaluate_run on the held-out examples of the run's corpus (drawn once per corpus per call), measuring its
    validation bits per byte on that corpus when `measure`; a corpus that cannot be loaded gives NaN with the reason
    (not cached: importing the corpus again fixes it)."""

    name = str(corpus_name or "")
    if name not in examples_by_corpus:
        try:  # a corpus too big to load (read in place) gives the first 4 MB of its validation split
            source = open_corpus(name, home=home)
            if isinstance(source, FileSource):
                validation = source.validation_documents()
                # the training text the trivial baselines count in: its first REFERENCE_CHARACTERS, read lazily
                train = (text for split, text in source.documents(ReadReport()) if split == "train")
            else:
                corpus = load_corpus(name, home=home)
                validation, train = corpus.validation, corpus.train
        except ValueError as error:
            examples_by_corpus[name] = Message("the corpus {name!r} cannot be loaded for held-out text: {error}",
                                               name=name, error=message_of(error))
        else:
            examples_by_corpus[name] = (held_out_examples(validation, max_examples, seed, train) if validation
                                        else Message("the corpus {name!r} has no validation split (one document): "
                                                     "no held-out text to ask", name=name))
            examples_by_corpus[(name, "validation")] = list(validation)
    examples = examples_by_corpus[name]
    if isinstance(examples, str):
        return {"fill_mask_accuracy": math.nan, "fill_mask_examples": 0, "fill_mask_note": examples,
                **{name: math.nan for name in BASELINE_COLUMNS},
                "infill_exact_match": math.nan, "infill_examples": 0, "infill_note": examples,
                "best_probe_layer": "", "probe_accuracy": math.nan, "probe_note": examples, "seconds": 0.0,
                "cacheable": False}
    logger.info("leaderboard: evaluating %s on %d held-out sentences of %s", run_dir.name, max_examples, name)
    return evaluate_run(run_dir, examples, examples_by_corpus[(name, "validation")] if measure else None)


def write_leaderboard_csv(frame, path) -> Path:
    """Write the table to `path` as CSV (UTF-8, a header row, no index; NaN as an empty field), so that
    `pandas.read_csv(path)` gives the same columns and values back. Returns the path."""
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise LabError("Compute the leaderboard first: there is no table to export.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False, encoding="utf-8")
    return path
