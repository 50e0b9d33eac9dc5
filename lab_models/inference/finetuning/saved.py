"""A finished fine-tuning's classifier back from its folder, for the attributions of its labels
(lab_models/inference/attributions.py).

    saved = load_finetuned("<lab home>/finetunes/<run>--sentiment--<time>")
    saved.classifier (a FinetuneClassifier in eval mode), saved.run (the pretrained run), saved.label_names,
    saved.encode("the cat sees a ball .") -> a FinetuneBatch of one sentence, framed as the fine-tuning framed it

A fine-tuning keeps its weights (`model.safetensors`: the whole classifier, backbone and head) only when it ran with
`--save-weights` (`FinetuneConfig.save_weights`; the Understand tab's fine-tunings set it). The classifier is
rebuilt exactly as lab_models/inference/finetuning/run.py built it (`FinetuneClassifier` on the pretrained run's
model, the task's kind, labels and pooling) and the saved weights are loaded strictly. Loads are cached by the
folder and the weights file's modification time, as `load_run`'s.
"""
from __future__ import annotations

import copy
import functools
import os
from dataclasses import dataclass
from pathlib import Path

from lab_models.messages import LabError
from lab_models.inference.finetuning.config import CAUSAL_FAMILIES
from lab_models.inference.finetuning.encoding import FinetuneBatch, collate_examples, encode_examples
from lab_models.inference.finetuning.heads import FinetuneClassifier
from lab_models.inference.loading import TrainedRun, load_run
from lab_models.text.tasks import Task, TaskExample
from lab_models.training import runs


@dataclass(frozen=True)
class SavedFinetune:
    """A fine-tuned classifier with what it needs to read a sentence."""

    folder: Path
    finetune_id: str
    classifier: FinetuneClassifier
    run: TrainedRun  # the pretrained run it started from (its tokenizer, vocabulary and family)
    task_name: str
    task_kind: str
    label_names: tuple[str, ...]
    max_len: int

    def encode(self, text: str) -> FinetuneBatch:
        """One sentence framed as the fine-tuning framed its examples ([CLS] a [SEP]; [BOS] a [EOS] for the causal
        families; the RNN families unframed), as a batch of one on the classifier's device."""
        example = TaskExample(text, 0)
        task = Task(self.task_name, self.task_kind, self.label_names, (example,), (example,))
        encoded = encode_examples(task, [example], self.run.tokenizer, self.run.vocab, self.run.framing.downstream,
                                  self.max_len)
        batch = collate_examples(encoded, self.run.vocab.pad_id, self.run.family in CAUSAL_FAMILIES,
                                 self.run.family == "glm", token_task=False)
        return batch.to(self.run.device)


def is_finetune_folder(folder) -> bool:
    """Whether `folder` holds a fine-tuning (its config.json says kind "finetune")."""
    folder = Path(folder)
    return folder.is_dir() and runs.read_config(folder).get("kind") == "finetune"


def load_finetuned(folder) -> SavedFinetune:
    """The fine-tuned classifier in `folder` (cached). ValueError: not a fine-tuning, no saved weights, a token or pair
    task (its labels are not one per sentence), a pretrained run that no longer loads."""
    folder = Path(folder).expanduser()
    if not is_finetune_folder(folder):
        raise LabError("{name} is not a fine-tuning: pick one from the fine-tunings list.", name=folder.name)
    weights = folder / runs.MODEL_FILE
    if not weights.is_file():
        raise LabError("The fine-tuning {name} kept no weights: fine-tune again with --save-weights (the "
                       "Understand tab's fine-tunings keep them).", name=folder.name)
    return _load(folder.resolve(), weights.stat().st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _load(folder: Path, mtime_ns: int) -> SavedFinetune:
    config = runs.read_config(folder)
    settings = config.get("finetune") if isinstance(config.get("finetune"), dict) else {}
    task = config.get("task") if isinstance(config.get("task"), dict) else {}
    kind, labels = task.get("kind"), tuple(task.get("label_names") or ())
    if kind != "sequence":
        raise LabError("The fine-tuning {name} is a {kind} task: attributions explain one label per "
                       "sentence (sentiment, topic, a CSV of sentences).", name=folder.name, kind=kind)
    run = load_run(config.get("run_dir") or settings.get("run_dir") or "")
    classifier = FinetuneClassifier(copy.deepcopy(run.model), kind, len(labels), settings.get("pooling") or "first")
    runs.load_weights(classifier, folder / runs.MODEL_FILE)
    classifier.to(run.device).eval()
    max_len = int(settings.get("max_len") or run.config.get("seq_len") or run.max_positions)
    return SavedFinetune(folder, folder.name, classifier, run, str(task.get("name") or ""), kind, labels,
                         min(max_len, run.max_positions))


def explainable_finetune(folder: str | os.PathLike) -> bool:
    """Whether the fine-tuning in `folder` kept its weights and labels sentences (the attributions' picker lists only
    those)."""
    task = runs.read_config(folder).get("task") if is_finetune_folder(folder) else None
    return isinstance(task, dict) and task.get("kind") == "sequence" and (Path(folder) / runs.MODEL_FILE).is_file()
