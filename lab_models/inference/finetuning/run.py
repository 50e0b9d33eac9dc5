"""Fine-tuning a pretrained run on a labelled task: `python -m lab_models finetune`, its `FinetuneConfig`, the
leaderboard over all fine-tunings, and queueing one on the `JobManager`.

    python -m lab_models finetune --run RUN_DIR_OR_ID --task sentiment|topic|entailment|tagging [--out DIR]
        [--steps N] [--pool auto|first|last|mean] [--lm-aux-weight X] [--batch-size N] [--lr X] [--seed S]
        [--max-len N] [--device auto|cpu|cuda|mps] [--eval-every N] [--log-every N] [--warmup-fraction X]
        [--weight-decay X] [--home DIR] [--save-weights] [--adversarial none|freelb|smart] [--adversarial-weight X]
        [--csv PATH --text-column C --label-column L [--text-pair-column P]]     (then --task csv, or no --task)

    finetune(FinetuneConfig(run_dir=..., task="topic", out=...)) -> the result dict (what result.json holds)
    finetune_leaderboard(home) -> pandas.DataFrame, one row per fine-tuning with a result
    start_finetune(job_manager, run_id, "topic", steps=200) -> the fine-tuning's id (queued like a training run)

What it does (the recipe of BERT §4 / GPT §3.2, scaled down):
1. Load the run's model, a fresh copy (not `inference.load_run`'s cached, shared one), and its tokenizer.
2. Frame each example with the lab's special tokens and add a head on the backbone's hidden states:
   - sentence tasks:  [CLS] a [SEP]            pairs: [CLS] a [SEP] b [SEP]  (segment 0, then 1; BERT §3)
   - causal families: [BOS] a [EOS]            pairs: [BOS] a [SEP] b [EOS]  (GPT §3.3: start, delimiter, extract)
   - an imported checkpoint (or a run started from one): as its own tokenizer frames a text (encoding.py)
   A `SequenceClassificationHead` (dense, tanh, dropout, linear: BERT's pooler + classifier) pools the hidden
   states: "first" (the [CLS] position, BERT), "last" (the last real token, GPT's extract token), or "mean" (over
   the real tokens, special tokens included). "auto" is "last" for the causal families (gpt, gpt2: under a causal
   mask only the last position has read the whole input) and "first" for the others ("last" for a checkpoint whose
   framing puts its classification token after the text: XLNet's `<cls>`). Tagging ("token" tasks) puts a
   `TokenClassificationHead` on every position; a word's label sits on its first sub-word piece
   (lab_models/text/tasks.py).
3. Train every weight with AdamW (β = 0.9, 0.999, eps 1e-8, weight decay 0.01 on matrices only, gradient clipping at
   1.0), linear warmup over the first 10% of the steps and linear decay to 0 (BERT's fine-tuning schedule), batches
   drawn without replacement epoch by epoch. The loss is the task's cross-entropy, plus `lm_aux_weight` (λ) times an
   auxiliary language-modelling loss: GPT §3.2, L3(C) = L2(C) + λ L1(C), λ = 0.5. The default λ is 0.5 for the
   causal families and 0 for the others.
4. Evaluate on the task's validation split every `eval_every` steps and at the end: accuracy and macro F1 (the mean
   F1 over the classes that occur in the gold labels or the predictions, as scikit-learn's "macro").
5. Optionally (`adversarial`, off by default) add adversarial training on the input embeddings, FreeLB or SMART,
   weighted by `adversarial_weight`: lab_models/objectives/adversarial.py (`finetune_loss`; `adversarial_step` below
   seeds it) has the method, its papers and deviations; the train rows' losses then hold "adversarial" and
   "adversarial_task" (the task loss under the final perturbation).

The parts, in lab_models/inference/finetuning/: config.py (`FinetuneConfig`, constants, schedule, macro F1, folders),
encoding.py (framing and truncation), heads.py (the classifier, the auxiliary LM loss, evaluation; the per-family
table and the papers and deviations), results.py (summaries, the leaderboard, queueing on the JobManager). This
module holds the setup, the training loop and the CLI.

Outputs, in `out` (by default `<lab home>/finetunes/<run_id>--<task>--<YYYYmmdd-HHMMSS>`): `config.json` (the
resolved `FinetuneConfig` under "finetune", the task's summary, the run's family and id), `status.json`
({"state": running/finished/stopped/failed, "step", "total_steps", ...}, as the pretraining runs; the JobManager
writes "queued"), `metrics.jsonl` (train rows: step, loss, losses {"task", "lm"}, accuracy of the batches, lr,
elapsed_s; evaluation rows with "split": "val": loss, accuracy, macro_f1), `result.json` at the end (task, run_id,
family, accuracy, macro_f1, majority_baseline, steps, seconds, num_parameters, pooling, lm_aux_weight, label_names,
confusion [gold][predicted]) and `finetune.log`. With --save-weights also `model.safetensors` (backbone + head).

Signals: SIGTERM or SIGINT finishes the current step, evaluates, writes result.json and status "stopped", exit 0.
A bad argument (unknown task, missing run, bad CSV, ...) exits 2 with one line on stderr ("error: ..."); a failure
while training writes status "failed" and exits 1.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import logging
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from lab_models.messages import LabError, Message
from lab_models.training import runs
from lab_models.batch import IGNORE_INDEX
from lab_models.training.engine import derive_seed, generator_for, parameter_groups
from lab_models.home import atomic_write_json
from lab_models.nn.moe import collect_routing
from lab_models.models.switch import routing_loss
from lab_models.objectives.adversarial import FINETUNE_SETTINGS, finetune_loss
from lab_models.text.tasks import TASKS, Task
from lab_models.inference.finetuning.config import (CAUSAL_FAMILIES, RESULT_FILE, LOG_FILE, EXIT_BAD_ARGUMENT,
                                                    EXIT_FAILED, STATUS_INTERVAL_S, EVAL_BATCH_SIZE, FinetuneConfig,
                                                    linear_schedule, new_finetune_dir, resolve_run_dir,
                                                    load_config_task)
from lab_models.inference.finetuning.encoding import EncodedExample, encode_examples, collate_examples
from lab_models.inference.finetuning.heads import FinetuneClassifier, task_cross_entropy, AuxiliaryLoss, evaluate
from lab_models.training.console import OneLineParser, say_error, status_message
from lab_models.training.device import select_device
from lab_models.inference.loading import load_run
from lab_models.training.run import StopRequest

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------------ setup
@dataclass
class _Prepared:
    config: FinetuneConfig  # resolved
    out: Path
    task: Task
    run_dir: Path
    run_id: str
    family: str
    model: FinetuneClassifier
    device: torch.device
    train: list[EncodedExample]
    validation: list[EncodedExample]
    settings: object
    vocab: object
    pretrained_step: int


def adversarial_step(classifier, batch, clean_logits: torch.Tensor, loss_of: Callable[[torch.Tensor], torch.Tensor],
                  method: str, seed: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`finetune_loss` with fine-tuning's settings for `method` (FINETUNE_SETTINGS), delta_0 drawn from
    (seed, step), and the dropout masks of the step's clean pass (seeded from (seed, "finetune-dropout", step), as
    lab_models/inference/finetuning/run.py seeds it)."""
    if method not in FINETUNE_SETTINGS:
        raise LabError("adversarial fine-tuning method must be one of {finetune_settings}, got "
                       "{method!r}", finetune_settings=', '.join(FINETUNE_SETTINGS), method=method)
    generator = torch.Generator().manual_seed(derive_seed(seed, "finetune-adversarial", step))
    return finetune_loss(classifier, batch, clean_logits, loss_of, method, FINETUNE_SETTINGS[method], generator,
                         dropout_seed=derive_seed(seed, "finetune-dropout", step))

def prepare(config: FinetuneConfig) -> _Prepared:
    """Check everything, build the model and encode the task. ValueError for anything a user can fix. Nothing is
    written, except that the output folder is created when `config.out` is None (to claim a fresh name)."""

    run_dir = resolve_run_dir(config.run_dir, config.home)
    task = load_config_task(config)
    run = load_run(run_dir)  # validates the folder and picks the weights
    base = copy.deepcopy(run.model)  # a private copy: the cached model may be serving the page
    seq_len = int(run.config.get("seq_len") or run.max_positions)
    train_config = run.config.get("train") if isinstance(run.config.get("train"), dict) else {}
    resolved = config.resolved(run.family, seq_len, run.max_positions, train_config.get("lr"))
    downstream = run.framing.downstream  # the lab's [CLS] a [SEP] / [BOS] a [EOS], or the checkpoint's own framing
    if config.pooling == "auto":  # XLNet's checkpoint framing puts its <cls> last: pool there
        resolved = dataclasses.replace(resolved, pooling=downstream.pooling(resolved.pooling, run.vocab.cls_id))
    resolved = dataclasses.replace(resolved, run_dir=str(run_dir))
    device = select_device(resolved.device)
    if resolved.out is None:
        out = new_finetune_dir(config.home, run.run_id, task.slug)
    else:
        out = Path(resolved.out).expanduser().resolve()
    if (out / RESULT_FILE).exists():
        raise LabError("{out} already holds a finished fine-tuning (result.json); choose another --out", out=out)
    resolved = dataclasses.replace(resolved, out=str(out))
    with torch.random.fork_rng(devices=[]):  # the head's init, from the seed, leaving the global generator alone
        torch.manual_seed(derive_seed(resolved.seed, "finetune-head") & 0x7FFFFFFF)
        model = FinetuneClassifier(base, task.kind, task.n_labels, resolved.pooling)
    model.requires_grad_(True)  # every weight is fine-tuned (pretraining froze the parts no objective used)
    model.to(device).train()
    train = encode_examples(task, task.train, run.tokenizer, run.vocab, downstream, resolved.max_len)
    validation = encode_examples(task, task.validation, run.tokenizer, run.vocab, downstream, resolved.max_len)
    return _Prepared(resolved, out, task, run_dir, run.run_id, run.family, model, device, train, validation,
                     run.settings, run.vocab, run.step)


# ------------------------------------------------------------------------------------------------ the loop
def finetune(config: FinetuneConfig, *, should_stop: Callable[[], bool] = lambda: False) -> dict:
    """Fine-tune as configured and return the result (also written to out/result.json). ValueError before anything
    is written for a bad configuration; an error while training writes status "failed" and is raised."""
    prepared = prepare(config)
    return run_prepared(prepared, should_stop=should_stop)


def run_prepared(p: _Prepared, *, should_stop: Callable[[], bool] = lambda: False) -> dict:
    cfg, out, model = p.config, p.out, p.model
    out.mkdir(parents=True, exist_ok=True)
    (out / runs.METRICS_FILE).unlink(missing_ok=True)
    causal = p.family in CAUSAL_FAMILIES
    two_d = p.family == "glm"
    token_task = p.task.kind == "token"
    pad_id = p.vocab.pad_id
    created = time.time()
    atomic_write_json(out / runs.CONFIG_FILE, {
        "kind": "finetune", "finetune": cfg.to_dict(), "family": p.family, "run_id": p.run_id,
        "run_dir": str(p.run_dir),
        "pretrained_step": p.pretrained_step, "task": p.task.summary(), "steps": cfg.steps,
        "num_parameters": model.num_parameters(), "device_used": str(p.device), "created": created,
        "torch_version": torch.__version__})
    runs.write_status(out, "running", step=0, total_steps=cfg.steps, message=Message("fine-tuning"))
    try:
        return _train(p, causal, two_d, token_task, pad_id, should_stop)
    except Exception as error:
        step = _last_step(out)
        logger.exception("fine-tuning failed after step %d", step)
        runs.write_status(out, "failed", step=step, total_steps=cfg.steps,
                          message=Message("{error_type}: {error}", error_type=_error_type(error),
                                          error=status_message(error)))
        raise


def _error_type(error: BaseException) -> str:
    """The type a failure names: a `LabError` is the ValueError it is to the person reading."""
    return "ValueError" if type(error) is LabError else type(error).__name__


def _last_step(out: Path) -> int:
    rows = runs.read_metrics(out)
    return int(rows[-1].get("step") or 0) if rows else 0


def _train(p: _Prepared, causal: bool, two_d: bool, token_task: bool, pad_id: int,
           should_stop: Callable[[], bool]) -> dict:
    cfg, out, model, device = p.config, p.out, p.model, p.device
    autocast = device.type == "cuda"
    optimizer = torch.optim.AdamW(parameter_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8)
    auxiliary = AuxiliaryLoss(model, p.settings, p.vocab, model.base.model_config.max_positions) \
        if cfg.lm_aux_weight > 0 else None
    validation = [collate_examples(p.validation[i:i + EVAL_BATCH_SIZE], pad_id, causal, two_d, token_task)
                  for i in range(0, len(p.validation), EVAL_BATCH_SIZE)]
    n_train = len(p.train)
    per_epoch = max(1, n_train // cfg.batch_size) if n_train >= cfg.batch_size else 1
    order: dict[int, list[int]] = {}

    def batch_indices(step: int) -> list[int]:
        """Epoch e is a permutation drawn from (seed, e); step s takes its slice (no example twice per epoch)."""
        epoch, slot = divmod(step - 1, per_epoch)
        if epoch not in order:
            order.clear()
            order[epoch] = torch.randperm(n_train, generator=generator_for(cfg.seed, "finetune-epoch", epoch)).tolist()
        chosen = order[epoch][slot * cfg.batch_size:(slot + 1) * cfg.batch_size]
        return chosen if chosen else order[epoch][: cfg.batch_size]

    started = time.perf_counter()
    last_status = 0.0
    interval = {"steps": 0, "loss": 0.0, "task": 0.0, "lm": 0.0, "correct": 0, "scored": 0}
    last_eval: dict | None = None
    step = 0
    logger.info("fine-tuning %s (%s) on %s: %d steps, %d train / %d validation examples, pooling %s, λ=%g",
                p.run_id, p.family, p.task.name, cfg.steps, n_train, len(p.validation), cfg.pooling, cfg.lm_aux_weight)
    stopped = bool(should_stop())
    while step < cfg.steps and not stopped:
        step += 1
        torch.manual_seed(derive_seed(cfg.seed, "finetune-dropout", step))
        rows = [p.train[i] for i in batch_indices(step)]
        batch = collate_examples(rows, pad_id, causal, two_d, token_task).to(device)
        lr = linear_schedule(step, cfg.steps, cfg.lr, cfg.warmup_fraction)
        for group in optimizer.param_groups:
            group["lr"] = lr
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=autocast), \
                collect_routing(model) as routing:
            logits, hidden = model(batch)
            task_loss = task_cross_entropy(logits, batch.labels)
            lm_loss = auxiliary(batch, hidden, step, cfg.seed) if auxiliary is not None else None
            adversarial = None if cfg.adversarial == "none" else adversarial_step(  # (loss, task loss under delta)
                model, batch, logits, lambda out: task_cross_entropy(out, batch.labels), cfg.adversarial, cfg.seed,
                step)
        total = task_loss if lm_loss is None else task_loss + cfg.lm_aux_weight * lm_loss
        total = total + routing_loss(routing)  # Switch layers keep their load-balancing loss (0 for dense models)
        if adversarial is not None:
            total = total + cfg.adversarial_weight * adversarial[0]
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip if cfg.grad_clip > 0 else float("inf"))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if not math.isfinite(float(total.detach())):
            raise FloatingPointError(Message("the fine-tuning loss became NaN or infinite at step {step}; lower --lr",
                                             step=step))
        with torch.no_grad():
            flat_logits = logits.reshape(-1, logits.shape[-1]) if token_task else logits
            flat_labels = batch.labels.reshape(-1)
            keep = flat_labels != IGNORE_INDEX
            interval["correct"] += int((flat_logits[keep].argmax(-1) == flat_labels[keep]).sum())
            interval["scored"] += int(keep.sum())
        interval["steps"] += 1
        interval["loss"] += float(total.detach())
        interval["task"] += float(task_loss.detach())
        interval["lm"] += float(lm_loss.detach()) if lm_loss is not None else 0.0
        for key, value in zip(("adversarial", "adversarial_task"), adversarial or ()):
            interval[key] = interval.get(key, 0.0) + float(value.detach())
        stopped = bool(should_stop())
        last = step == cfg.steps
        elapsed = time.perf_counter() - started
        if last or stopped or step % cfg.log_every == 0:
            n = interval["steps"]
            losses = {"task": interval["task"] / n}
            if auxiliary is not None:
                losses["lm"] = interval["lm"] / n
            if adversarial is not None:  # the trained adversarial loss, and the task loss under the perturbation
                losses.update(adversarial=interval["adversarial"] / n,
                              adversarial_task=interval["adversarial_task"] / n)
            runs.append_metrics(out, {"split": "train", "step": step, "loss": interval["loss"] / n, "losses": losses,
                                      "accuracy": interval["correct"] / max(1, interval["scored"]), "lr": lr,
                                      "elapsed_s": elapsed})
            interval = {"steps": 0, "loss": 0.0, "task": 0.0, "lm": 0.0, "correct": 0, "scored": 0}
        if last or stopped or step % cfg.eval_every == 0:
            last_eval = evaluate(model, validation, p.task.n_labels, device, autocast)
            last_eval["step"] = step
            runs.append_metrics(out, {"split": "val", "step": step, "loss": last_eval["loss"],
                                      "accuracy": last_eval["accuracy"], "macro_f1": last_eval["macro_f1"],
                                      "elapsed_s": time.perf_counter() - started})
            logger.info("step %d: validation accuracy %.4f, macro F1 %.4f", step, last_eval["accuracy"],
                        last_eval["macro_f1"])
        if time.monotonic() - last_status >= STATUS_INTERVAL_S or step % cfg.eval_every == 0:
            runs.write_status(out, "running", step=step, total_steps=cfg.steps, message=Message("fine-tuning"),
                              loss=float(total.detach()), val_accuracy=last_eval["accuracy"] if last_eval else None)
            last_status = time.monotonic()
    if last_eval is None or last_eval["step"] != step:  # stopped before the first step
        last_eval = evaluate(model, validation, p.task.n_labels, device, autocast)
        last_eval["step"] = step
    seconds = time.perf_counter() - started
    state = "finished" if step == cfg.steps else "stopped"
    result = {
        "finetune_id": out.name, "state": state, "task": p.task.name, "task_kind": p.task.kind,
        "run_id": p.run_id, "run_dir": str(p.run_dir), "family": p.family,
        "pooling": "per-token" if token_task else cfg.pooling,
        "lm_aux_weight": cfg.lm_aux_weight, "adversarial": cfg.adversarial,
        "accuracy": last_eval["accuracy"], "macro_f1": last_eval["macro_f1"],
        "validation_loss": last_eval["loss"], "majority_baseline": p.task.majority_baseline(), "steps": step,
        "total_steps": cfg.steps, "seconds": seconds, "num_parameters": model.num_parameters(),
        "label_names": list(p.task.label_names), "confusion": last_eval["confusion"], "scored": last_eval["scored"],
        "train_examples": len(p.train), "validation_examples": len(p.validation), "finished_at": time.time(),
    }
    if cfg.save_weights:
        runs.save_weights(model, out / runs.MODEL_FILE)
    atomic_write_json(out / RESULT_FILE, result)
    if state == "finished":
        message = Message("finished {steps} steps: validation accuracy {accuracy:.3f}", steps=step,
                          accuracy=last_eval["accuracy"])
    else:
        message = Message("stopped at step {step} of {steps}: validation accuracy {accuracy:.3f}", step=step,
                          steps=cfg.steps, accuracy=last_eval["accuracy"])
    runs.write_status(out, state, step=step, total_steps=cfg.steps, message=message,
                      val_accuracy=last_eval["accuracy"])
    logger.info("%s: %s", out.name, message)
    return result


# ------------------------------------------------------------------------------------------------ the CLI
def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m lab_models finetune", description="Fine-tune a pretrained run on a task.")
    p.add_argument("--run", help="the pretrained run's folder, or its id under <home>/runs")
    p.add_argument("--task", help=f"{', '.join(TASKS)}, or csv (with --csv)")
    p.add_argument("--out", help="the fine-tuning's folder (default: <home>/finetunes/<run>--<task>--<time>)")
    p.add_argument("--steps", type=int)
    p.add_argument("--pool", help="auto | first | last | mean (default auto)")
    p.add_argument("--lm-aux-weight", type=float, help="λ (default 0.5 for gpt/gpt2, else 0)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--max-len", type=int)
    p.add_argument("--device")
    p.add_argument("--eval-every", type=int)
    p.add_argument("--log-every", type=int)
    p.add_argument("--warmup-fraction", type=float)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--grad-clip", type=float)
    p.add_argument("--csv", dest="csv_path")
    p.add_argument("--text-column")
    p.add_argument("--label-column")
    p.add_argument("--text-pair-column")
    p.add_argument("--save-weights", action="store_true")
    p.add_argument("--adversarial", help="none | freelb | smart (default none): adversarial training on the input "
                                         "embeddings")
    p.add_argument("--adversarial-weight", type=float, help="its weight in the loss (default 1)")
    p.add_argument("--home", help="the lab home (default: $PRETRAINING_LAB_HOME or ~/.pretraining-lab)")
    return p


def config_from_args(args) -> FinetuneConfig:
    if not args.run:
        raise LabError("--run is required: the pretrained run's folder or id")
    task = args.task or ("csv" if args.csv_path else None)
    if not task:
        raise LabError("--task is required: one of {tasks}, or --csv PATH with its columns", tasks=', '.join(TASKS))
    given = {"out": args.out, "steps": args.steps, "pooling": args.pool, "lm_aux_weight": args.lm_aux_weight,
             "batch_size": args.batch_size, "lr": args.lr, "seed": args.seed, "max_len": args.max_len,
             "device": args.device, "eval_every": args.eval_every, "log_every": args.log_every,
             "warmup_fraction": args.warmup_fraction, "weight_decay": args.weight_decay, "grad_clip": args.grad_clip,
             "csv_path": args.csv_path, "text_column": args.text_column, "label_column": args.label_column,
             "text_pair_column": args.text_pair_column, "home": args.home, "adversarial": args.adversarial,
             "adversarial_weight": args.adversarial_weight}
    return FinetuneConfig(run_dir=args.run, task=task, save_weights=args.save_weights,
                          **{k: v for k, v in given.items() if v is not None})


def _setup_logging(out: Path) -> list[logging.Handler]:
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(logging.WARNING)
    stderr.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler = logging.FileHandler(out / LOG_FILE, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for h in (stderr, handler):
        root.addHandler(h)
    return [stderr, handler]


def main(argv: list[str] | None = None) -> int:
    stop = StopRequest()
    stop.install()  # from the start: a stop during setup ends the run before its first step
    out_hint = None
    try:
        args = build_parser().parse_args(argv)
        out_hint = args.out
        config = config_from_args(args)
        prepared = prepare(config)
    except ValueError as error:
        message = status_message(error)
        if out_hint and Path(out_hint).expanduser().is_dir():  # a queued job's folder: tell the UI why
            try:
                runs.write_status(Path(out_hint).expanduser(), "failed", step=0, total_steps=0, message=message)
            except (OSError, ValueError):
                pass
        say_error(message)
        return EXIT_BAD_ARGUMENT
    prepared.out.mkdir(parents=True, exist_ok=True)
    handlers = _setup_logging(prepared.out)
    try:
        run_prepared(prepared, should_stop=stop)
        return 0
    except Exception as error:  # noqa: BLE001 - reported in status.json (run_prepared) and on stderr
        say_error(f"{_error_type(error)}: {error}")
        return EXIT_FAILED
    finally:
        for handler in handlers:
            logging.getLogger().removeHandler(handler)
            handler.close()

