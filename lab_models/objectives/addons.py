"""Add-on objectives: losses that several families can mix into their own pretraining, each a toggle with its weight.

    name               families                                        module (paper, formula, deviations)
    contrastive        bert roberta albert electra mpnet unilm         objectives/contrastive.py (SimCSE, InfoNCE)
                       gpt gpt2
    adversarial        bert roberta albert spanbert                    objectives/adversarial.py (SMART/ALUM; FreeLB
                                                                       in fine-tuning)
    back_translation   mass t5 cove                                    objectives/back_translation.py (Sennrich 2016)

Turned on with `--objective NAME=WEIGHT` (or the Train tab's row, which lists them from the family's spec), tuned with
`--set NAME.SETTING=VALUE` (e.g. `--set contrastive.temperature=0.1`). Like translation, an add-on's default weight is
0 and it appears in config.json only when asked for. config.json records each add-on that is on under "addons" (its
weight, its resolved settings and facts about its data); TrainConfig saves the settings under "train.addons".

How they plug in, so that the family's batch builder, its loss and the engine stay as they are:

1. Weights: `resolve_objective_weights` (models.py) calls `check_weights`: an add-on for a family that does not
   support it is a ValueError naming the families that do; an add-on needs one of the family's own objectives on
   (it adds to that loss); MASS's and T5's back-translation needs their `translation` objective (English -> Chinese
   on the real pairs).
2. Data: `AddonBatches` wraps the run's batch source. After the family's batch is drawn, it draws the add-ons' data
   with the same step generator (so the family's batch is exactly what it would be without them) and puts it in
   `Batch.addons`: the contrastive sentences, the monolingual sentences and real zh -> en pairs of back-translation.
   Validation batches get fixed data the same way.
3. Loss: `FamilyModel.forward` (and CoVe's) calls `Addons.apply(model, batch, out)` after the family's loss when
   add-ons are attached (`attach`, by the trainer): total = the family's total + sum of weight * add-on loss, and the
   add-ons' parts join `parts` (so metrics.jsonl "losses" and the Train tab's curves show them with no other change).
   Before an add-on's `start_step` (contrastive, back-translation) its part is not computed (null in the rows): the
   wrapper passes the engine's step along (`train_batch_at`), so which parts a step has depends on the step alone.
4. Evaluation: `Addons.evaluate(model)` adds numbers to each validation row: alignment, uniformity and topic_gap
   (contrastive), bleu_en_zh, bleu_zh_en, chrf_en_zh, chrf_zh_en (back-translation).

Worked example (what `check_weights` says):

>>> check_weights("t5", {"span_corruption": 1.0, "contrastive": 1.0})
Traceback (most recent call last):
...
lab_models.messages.LabError: contrastive is an add-on objective of bert, roberta, ..., gpt2, not of t5: it pools
one sentence vector ...
>>> split_settings(["mask_rate=0.2", "contrastive.temperature=0.1"])
(['mask_rate=0.2'], ['contrastive.temperature=0.1'])

Deviations: none of their own; the add-ons' modules state theirs. Add-on rows are not counted in `tokens_per_s`
(which counts the family's batch).
"""
from __future__ import annotations

import dataclasses
import logging
import typing

import torch

from lab_models.messages import LabError, Message
from lab_models.batch import Batch
from lab_models.objectives import adversarial, back_translation, contrastive
from lab_models.objectives.settings import parse_value
from lab_models.objectives.losses import LossOutput

logger = logging.getLogger(__name__)

ADDONS = ("contrastive", "adversarial", "back_translation")
MODULES = {"contrastive": contrastive, "adversarial": adversarial, "back_translation": back_translation}
WHY_NOT = {  # why a family outside an add-on's list cannot use it (the error message's second half)
    "contrastive": Message("it pools one sentence vector from an encoder or a left-to-right model"),
    "adversarial": Message("its embedding perturbation is computed from gradients that would carry targets into the "
                           "input of any family whose rows do not all see every input token "
                           "(objectives/adversarial.py); it can still be used when fine-tuning any Transformer run"),
    "back_translation": Message("it needs a model that translates both ways between the synthetic English and Chinese"),
}
DESCRIPTIONS = {  # one line each for the Train tab
    "contrastive": Message("add-on, SimCSE: two dropout views of a sentence are positives, the batch's other "
                           "sentences negatives (InfoNCE, τ 0.05, on the mean of the tokens; GPT: the last token)"),
    "adversarial": Message("add-on, SMART/ALUM: smoothness under a worst-case perturbation of the input embeddings "
                           "(symmetric KL, L2 ball ε)"),
    "back_translation": Message("add-on, Sennrich et al.: translate monolingual Chinese/English with the model "
                                "itself and train on the synthetic pairs both ways (logs BLEU)"),
}
FAMILY_OBJECTIVE_NEEDED = {("mass", "back_translation"): "translation", ("t5", "back_translation"): "translation"}


def families_of(name: str) -> tuple[str, ...]:
    return MODULES[name].FAMILIES


def family_addons(family: str) -> tuple[str, ...]:
    """The add-ons `family` supports, in ADDONS order (what the family's spec lists after its own objectives)."""
    return tuple(name for name in ADDONS if family in families_of(name))


def default_settings(name: str) -> dict:
    return dataclasses.asdict(MODULES[name].Settings())


# ------------------------------------------------------------------------------------------------ weights


def check_names(family: str, requested: dict) -> None:
    """ValueError for an add-on asked for (any weight) by a family that does not support it."""
    for name in ADDONS:
        if name in requested and family not in families_of(name):
            raise LabError("{name} is an add-on objective of {families}, not of {family}: "
                           "{why}", name=name, families=', '.join(families_of(name)), family=family, why=WHY_NOT[name])


def check_weights(family: str, weights: dict[str, float]) -> None:
    """The rules of module docstring's point 1 on resolved weights (every objective of the family, 0 = off)."""
    check_names(family, {name: w for name, w in weights.items() if w > 0})
    on = [name for name in ADDONS if weights.get(name, 0.0) > 0]
    if not on:
        return
    own = [name for name in weights if name not in ADDONS]
    if not any(weights[name] > 0 for name in own) and len(on) == 1:
        raise LabError("{on} is an add-on: {family} still needs one of its own objectives ({own}) with a positive "
                       "weight", on=on[0], family=family, own=", ".join(own))
    if not any(weights[name] > 0 for name in own):
        raise LabError("{on} are add-ons: {family} still needs one of its own objectives ({own}) with a positive "
                       "weight", on=", ".join(on), family=family, own=", ".join(own))
    for name in on:
        needed = FAMILY_OBJECTIVE_NEEDED.get((family, name))
        if needed and weights.get(needed, 0.0) <= 0:
            raise LabError("{name} for {family} trains beside its English -> Chinese `{needed}` objective: turn "
                           "that on too (--objective {needed}=1)", name=name, family=family, needed=needed)


# ------------------------------------------------------------------------------------------------ settings


def split_settings(items: list[str]) -> tuple[list[str], list[str]]:
    """`--set` items -> (the family's, the add-ons' "NAME.SETTING=VALUE")."""
    family, addon = [], []
    for item in items:
        (addon if item.split("=", 1)[0].strip().split(".", 1)[0] in ADDONS else family).append(item)
    return family, addon


def resolve_settings(family: str, weights: dict[str, float], items: list[str]) -> dict[str, dict]:
    """{add-on: its settings as a dict} for the add-ons that are on, with `--set NAME.SETTING=VALUE` items applied.
    ValueError for an unknown setting, a bad value, or a setting of an add-on that is off."""

    given: dict[str, dict] = {}
    for item in items:
        key, sep, text = item.partition("=")
        name, _, setting = key.strip().partition(".")
        cls = MODULES[name].Settings
        fields = {f.name for f in dataclasses.fields(cls)}
        if not sep or setting not in fields:
            raise LabError("unknown setting {key!r}: {name}'s settings are "
                           "{fields}",
                           key=key.strip(), name=name, fields=', '.join(f'{name}.{f}' for f in sorted(fields)))
        try:
            given.setdefault(name, {})[setting] = parse_value(text.strip(), typing.get_type_hints(cls)[setting])
        except ValueError as error:
            raise LabError("bad --set {key}={text}: {error}", key=key.strip(), text=text.strip(), error=error) from None
    resolved = {}
    for name in ADDONS:
        if weights.get(name, 0.0) > 0:
            resolved[name] = dataclasses.asdict(MODULES[name].Settings(**given.pop(name, {})))
    if given:
        name = next(iter(given))
        raise LabError("{name}.{value} is set but {name} is off for {family}: give {name} a "
                       "weight (--objective {name}=1) or leave its settings at their defaults",
                       name=name, value=next(iter(given[name])), family=family)
    return resolved


def settings_objects(settings: dict[str, dict]) -> dict[str, object]:
    """The saved dicts (config.json "train.addons") -> each add-on's Settings."""
    return {name: MODULES[name].Settings(**values) for name, values in settings.items()}


# ------------------------------------------------------------------------------------------------ the loss hook


class Addons:
    """The add-ons a training run attached to its model (`attach`): their settings and the helpers their losses need
    (back-translation's tokenizer codec); `apply` adds their losses, `evaluate` their validation numbers."""

    def __init__(self, settings: dict[str, object], codec=None, probe=None, held_out_pairs=()):
        self.settings = settings
        self.codec = codec  # back_translation.Codec
        self.probe = probe  # contrastive.SentenceProbe
        self.held_out_pairs = tuple(held_out_pairs)

    def apply(self, model, batch: Batch, out):
        """The family's LossOutput `out` with the add-ons' weighted losses added to `total` and their parts."""

        weights = model.objective_weights
        total, parts = out.total, dict(out.parts)
        if "adversarial" in self.settings:
            regulariser, logged = adversarial.pretraining_loss(model, batch, self.settings["adversarial"])
            total = total + weights["adversarial"] * regulariser
            parts.update(adversarial=regulariser.detach(), **{k: v.detach() for k, v in logged.items()})
        if "contrastive" in self.settings and bool(batch.addons.get(contrastive.ACTIVE_KEY, True)):
            ids = batch.addons.get(contrastive.IDS_KEY)
            if ids is None:
                raise LabError("contrastive learning needs the batch's sentences (Batch.addons"
                               "[{ids_key!r}]): draw batches through objectives.addons.AddonBatches",
                               ids_key=contrastive.IDS_KEY)
            loss = contrastive.loss(model, ids, self.settings["contrastive"])
            total = total + weights["contrastive"] * loss
            parts["contrastive"] = loss.detach()
        if "back_translation" in self.settings:
            loss, logged = back_translation.loss(model, batch, self.settings["back_translation"], self.codec)
            total = total + weights["back_translation"] * loss
            parts.update({k: v.detach() for k, v in logged.items()})
        return LossOutput(total=total, parts=parts, target_ids=out.target_ids, target_nll=out.target_nll)

    def evaluate(self, model) -> dict[str, float]:
        """The numbers a validation row gets (empty when no add-on reports any)."""
        row: dict[str, float] = {}
        if self.probe is not None:
            row.update(self.probe(model))
        if self.codec is not None and self.held_out_pairs:
            row.update(back_translation.translation_scores(
                model, self.codec, self.held_out_pairs, max_new_tokens=self.settings["back_translation"]
                .max_new_tokens))
        return {key: round(value, 6) for key, value in row.items()}


class AddonBatches:
    """A batch source (training/engine.py's protocol) that adds the add-ons' data to another one's batches."""

    def __init__(self, inner, sentences: contrastive.SentenceView | None, monolingual:
                 back_translation.MonolingualData | None, contrastive_n: int, back_translation_n: int,
                 back_translation_start: int = 0, contrastive_start: int = 0):
        if hasattr(inner, "train_batch_at"):
            raise LabError("add-on objectives need a batch source whose batches depend on the step generator only")
        self.inner, self.sentences, self.monolingual = inner, sentences, monolingual
        self.contrastive_n, self.back_translation_n = contrastive_n, back_translation_n
        self.back_translation_start, self.contrastive_start = back_translation_start, contrastive_start

    def __getattr__(self, name):  # validation_note, tokens_per_batch, ...: the wrapped source's
        if name == "inner":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _add(self, batch: Batch, sentences, monolingual) -> Batch:
        extra = {}
        if sentences is not None:
            extra[contrastive.IDS_KEY] = sentences
        if monolingual is not None:
            extra.update(monolingual)
        return dataclasses.replace(batch, addons={**batch.addons, **extra})

    def train_batch_at(self, step: int, generator: torch.Generator) -> Batch:
        """The batch of step `step` (the engine calls this when it exists): the family's, then the add-ons' data."""
        batch = self.inner.train_batch(generator)  # the family's draws come first
        sentences = self.sentences.sample(generator, self.contrastive_n) if self.sentences else None
        monolingual = self.monolingual.sample(generator, self.back_translation_n) if self.monolingual else None
        if monolingual is not None:  # back-translation waits for its start_step (its module docstring)
            monolingual[back_translation.ACTIVE_KEY] = torch.tensor(step >= self.back_translation_start)
        batch = self._add(batch, sentences, monolingual)
        if sentences is not None:  # and contrastive learning for its own
            batch.addons[contrastive.ACTIVE_KEY] = torch.tensor(step >= self.contrastive_start)
        return batch

    def train_batch(self, generator: torch.Generator) -> Batch:
        return self.train_batch_at(1 << 62, generator)

    def validation_batches(self, generators) -> list[Batch]:
        return [self._add(batch, self.sentences.validation(i, self.contrastive_n) if self.sentences else None,
                          self.monolingual.validation(i, self.back_translation_n) if self.monolingual else None)
                for i, batch in enumerate(self.inner.validation_batches(generators))]


def attach(model, settings: dict[str, dict], *, tokenizer, vocab, corpus, batches, batch_size: int,
           max_positions: int):
    """Attach the add-ons that are on (`settings`: config.json's "train.addons") to `model` and wrap `batches`.
    Returns (the batch source to train from, the Addons or None, config.json's {"addons": facts} or {})."""
    if not settings:
        return batches, None, {}
    objects = settings_objects(settings)
    facts = {name: {"weight": model.objective_weights[name], "settings": settings[name]} for name in objects}
    sentences = monolingual = codec = probe = None
    contrastive_n = back_translation_n = back_translation_start = 0
    held_out = ()
    if "contrastive" in objects:
        chosen = objects["contrastive"]
        contrastive_n = chosen.sentences or batch_size
        sentences = contrastive.SentenceView(model.family, tokenizer, vocab, corpus.train, corpus.validation, chosen)
        probe = contrastive.SentenceProbe(model.family, tokenizer, vocab, chosen.max_tokens, pooling=chosen.pooling)
        facts["contrastive"].update(sentences_per_step=contrastive_n, **sentences.facts(),
                                    pooling=contrastive.trained_pooling(model.family, chosen.pooling))
    if "back_translation" in objects:
        chosen = objects["back_translation"]
        back_translation_n, back_translation_start = chosen.sentences or batch_size, chosen.start_step
        codec = back_translation.Codec(model.family, tokenizer, vocab, max_positions)
        monolingual = back_translation.MonolingualData(codec)
        held_out = monolingual.validation_pairs[: chosen.eval_pairs]
        facts["back_translation"].update(sentences_per_step=back_translation_n, bleu_pairs=len(held_out),
                                         **monolingual.facts())
    if "adversarial" in objects:
        facts["adversarial"]["method"] = "smart"
    model.addons = Addons(objects, codec=codec, probe=probe, held_out_pairs=held_out)
    if sentences is not None or monolingual is not None:
        batches = AddonBatches(batches, sentences, monolingual, contrastive_n, back_translation_n,
                               back_translation_start, objects["contrastive"].start_step if sentences else 0)
    logger.info("add-on objectives: %s", ", ".join(f"{name} (weight {model.objective_weights[name]:g})"
                                                    for name in objects))
    return batches, model.addons, {"addons": facts}
