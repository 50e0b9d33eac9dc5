"""Starting a run from another run's weights and tokenizer: `python -m lab_models train --init-from RUN ...`.

RUN is an imported checkpoint or a lab run (a run folder, or a run id in the lab home). The new run keeps the
starting run's model exactly (its `ModelConfig`, every weight whose name and shape the new family's model shares), its
tokenizer with the tokens that play the lab's roles, and its framing (lab_models/text/framing.py: a run started from
an imported BERT reads text as BERT's tokenizer frames it), and trains it with any family whose architecture
matches:

- the same family: more pretraining on the user's corpus (domain-adaptive pretraining, Gururangan et al. 2020),
  e.g. BERT's MLM (and NSP) continued;
- UniLM from BERT: UniLM's four masks on BERT's model, as the UniLM paper initialised from BERT-large (Dong et al.
  2019, §3); BERT's pooler and NSP head carry over to UniLM's optional NSP;
- SpanBERT from BERT: span masking and the span boundary objective. The SBO head is new and initialised as the
  released code's `BertPairTargetPredictionHead` (Joshi et al. 2020): its two-layer MLP and relative position table
  N(0, 0.02), LayerNorms at 1 and 0, an output bias of zeros, and its output matrix the (loaded) token embedding,
  tied. BERT's NSP head is dropped (SpanBERT trains single sequences);
- an ELECTRA discriminator from BERT: BERT's encoder and embeddings become the discriminator; the generator (a
  quarter as wide, sharing the embeddings) and the replaced-token head are new (ELECTRA's own init);
- RoBERTa (dynamic masking, no NSP) from BERT, GPT from GPT-2, ... whatever the structure allows.

"Matches" means the family's batches can drive the starting model: enough segment embeddings for the segment ids its
batches write (UniLM's per-mode ids need 6; a table with more rows than used is fine: a family without segments
reads row 0, as BERT's default token type), the same query stream (XLNet's learned w, MPNet's [MASK] slots), the same
number of position rows (GLM's 2-D positions), an encoder-decoder for MASS and T5 and not for the others, T5's
sentinels in the vocabulary, and a Transformer (the RNN-era families are LSTMs). A mismatch is one line naming the
option (`architecture_mismatch`), before anything is written.

What the new run records: config.json "train" has `init_from` (the starting run's folder), config.json
"initialized_from" the starting run's id, family, step and source (its own "imported_from" architecture, if any) and
how many tensors were loaded, which were new and which were dropped; NOTE.md says the same in words. A resume reads
the newest checkpoint as any run does (the starting run is not read again); a run stopped before its first
checkpoint starts again from the starting run.

Deviations: the model's dimensions come from the starting run, so `--preset` sets only the training budget (steps,
batch, row length, learning rate, schedule); `--model` may change dropout only, and `--tokenizer`/`--vocab-size`
are refused (the tokenizer is the starting run's). The lab's batches are packed text without the checkpoint's
[CLS]/[SEP] framing, as every lab run trains; the checkpoint's framing is still the one inference uses.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from lab_models.messages import LabError, Message
from lab_models.families import RNN_FAMILIES, family_record
from lab_models.home import atomic_write_text, lab_home
from lab_models.models.family import model_config_from_dict, segments_needed, stream_structure
from lab_models.objectives import objective_module
from lab_models.text.framing import FRAMING_KEY
from lab_models.training import runs

ALLOWED_MODEL_CHANGES = ("dropout",)  # --model keys that keep the starting run's weights meaningful
NOTE_FILE = "NOTE.md"
RUN_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


@dataclass(frozen=True)
class StartingPoint:
    """The run a new run starts from: its folder, family, model dimensions, weights and tokenizer facts."""

    run_dir: Path
    family: str
    model: dict  # config.json "model": the exact ModelConfig
    weights: Path  # model.safetensors, or the newest checkpoint's
    step: int
    token_roles: dict | None  # which tokens play the lab's roles (imported checkpoints), or None (the lab's names)
    framing: dict | None  # the checkpoint's framing (config.json "framing"), or None (the lab's)
    source: str  # what it is, in words: "GPT2LMHeadModel imported from /data/gpt2" or "a lab bert run"


def resolve_run(value, home=None) -> Path:
    """A run folder from `--init-from`: a folder path, else a run id inside `<lab home>/runs/`; ValueError saying
    what to give otherwise."""
    text = str(value or "").strip()
    if not text:
        raise LabError("--init-from needs a run: a run id of the lab home or a run folder")
    path = Path(text).expanduser()
    if path.is_dir():
        return path.resolve()
    if RUN_NAME.match(text) and text not in (".", ".."):
        candidate = lab_home(home) / "runs" / text
        if candidate.is_dir():
            return candidate.resolve()
    raise LabError("--init-from {text!r}: no such run folder, and no run with that id in "
                   "{path}; give a run id from the runs table or a run folder",
                   text=text[:200], path=lab_home(home) / 'runs')


def _weights(run_dir: Path) -> tuple[Path, int]:
    """The weights a new run starts from: model.safetensors (the run's final or stopped weights), else its newest
    checkpoint's."""
    final = run_dir / runs.MODEL_FILE
    if final.is_file():
        return final, int(runs.read_status(run_dir).get("step") or 0)
    checkpoint = runs.latest_checkpoint(run_dir)
    if checkpoint is not None and (checkpoint / runs.MODEL_FILE).is_file():
        return checkpoint / runs.MODEL_FILE, int(runs.read_json(checkpoint / "state.json").get("step") or 0)
    raise LabError("--init-from {name}: the run has no weights yet (no model.safetensors and no checkpoint)",
                   name=run_dir.name)


def read_starting_point(value, home=None) -> StartingPoint:
    """The starting run named by `--init-from`, read and checked; ValueError for anything that is not a run with
    weights and a tokenizer."""
    run_dir = resolve_run(value, home)
    config = runs.read_config(run_dir)
    if not config.get("family") or not isinstance(config.get("model"), dict):
        raise LabError("--init-from {name}: not a run folder (its config.json has no family and model)",
                       name=run_dir.name)
    if not (run_dir / runs.TOKENIZER_FILE).is_file():
        raise LabError("--init-from {name}: the run has no {tokenizer_file}",
                       name=run_dir.name, tokenizer_file=runs.TOKENIZER_FILE)
    weights, step = _weights(run_dir)
    imported = config.get("imported_from") if isinstance(config.get("imported_from"), dict) else None
    source = (f"{imported.get('architecture')} imported from {imported.get('path')}" if imported
              else f"a lab {config['family']} run")
    roles = config.get("token_roles") if isinstance(config.get("token_roles"), dict) else None
    framing = config.get(FRAMING_KEY) if isinstance(config.get(FRAMING_KEY), dict) else None
    return StartingPoint(run_dir, config["family"], dict(config["model"]), weights, step, roles, framing, source)


def architecture_mismatch(start: StartingPoint, family: str, settings) -> Message | None:
    """None when `family` (with its objective `settings`) can train the starting run's model, else one sentence
    naming the option that differs (see the module docstring)."""
    if family in RNN_FAMILIES or start.family in RNN_FAMILIES:
        lstm = family if family in RNN_FAMILIES else start.family
        return Message("{lstm} is an LSTM family of the RNN era and the other is a Transformer: the architectures "
                       "differ (model class), so {name} cannot start a {family} run", lstm=lstm,
                       name=start.run_dir.name, family=family)
    config = model_config_from_dict(family, start.model)
    needed = segments_needed(family, settings)
    if needed > config.n_segments:
        return Message("{family} with these settings writes segment ids 0..{last_segment}, but the starting run's "
                       "model has n_segments={n_segments}", family=family, last_segment=needed - 1,
                       n_segments=config.n_segments)
    wanted = stream_structure(family, settings)
    if wanted["query_stream"] != config.query_stream:
        return Message("{family} needs query_stream={wanted!r}, but the starting run's model has "
                       "query_stream={query_stream!r}", family=family, wanted=wanted["query_stream"],
                       query_stream=config.query_stream)
    if wanted["n_position_rows"] != config.n_position_rows:
        return Message("{family} needs n_position_rows={wanted}, but the starting run's model has "
                       "n_position_rows={n_position_rows}", family=family, wanted=wanted["n_position_rows"],
                       n_position_rows=config.n_position_rows)
    if wanted["encoder_decoder"] != (config.decoder_layers > 0):
        need = (Message("an encoder-decoder (decoder_layers > 0)") if wanted["encoder_decoder"]
                else Message("no decoder (decoder_layers=0)"))
        return Message("{family} needs {need}, but the starting run's model has decoder_layers={decoder_layers}",
                       family=family, need=need, decoder_layers=config.decoder_layers)
    return None


def check_start(start: StartingPoint, family: str, settings, model_overrides: dict) -> object:
    """The new run's ModelConfig (the starting run's, with `model_overrides` applied), or ValueError in one line
    naming what differs or what may not change."""
    changed = [key for key in model_overrides if key not in ALLOWED_MODEL_CHANGES]
    if changed:
        raise LabError("--model {changed}=... would change the architecture of the starting run "
                       "{name}: with --init-from only {allowed_model_changes} may change",
                       changed=changed[0], name=start.run_dir.name,
                       allowed_model_changes=', '.join(ALLOWED_MODEL_CHANGES))
    problem = architecture_mismatch(start, family, settings)
    if problem is not None:
        raise LabError("--init-from {name} ({start_family}): {problem}; start {family} from a "
                       "run whose model has it, or train {family} from scratch",
                       name=start.run_dir.name, start_family=start.family, problem=problem, family=family)
    return dataclasses.replace(model_config_from_dict(family, start.model), **model_overrides)


def check_sentinels(family: str, settings, seq_len: int, vocab) -> None:
    """T5's span corruption needs one sentinel per noise span: the starting run's vocabulary must have enough."""
    module = objective_module(family)
    if hasattr(module, "sentinels_needed"):
        needed = module.sentinels_needed(seq_len, settings)
        if needed > len(vocab.sentinel_ids):
            raise LabError("{family} corrupts a {seq_len}-token row with {needed} sentinels, but the starting "
                           "run's vocabulary has {n_sentinel_ids}: lower --seq-len",
                           family=family, seq_len=seq_len, needed=needed, n_sentinel_ids=len(vocab.sentinel_ids))


@dataclass(frozen=True)
class Initialised:
    """What `load_starting_weights` did: tensor names loaded, new (kept as initialised) and dropped."""

    loaded: tuple[str, ...]
    new: tuple[str, ...]
    dropped: tuple[str, ...]

    def facts(self, start: StartingPoint) -> dict:
        """config.json "initialized_from"."""
        return {"run": str(start.run_dir), "run_id": start.run_dir.name, "family": start.family, "step": start.step,
                "source": start.source, "weights": start.weights.name, "loaded": len(self.loaded),
                "new": _grouped(self.new), "dropped": _grouped(self.dropped)}


def _grouped(names) -> list[str]:
    """Tensor names grouped by module ("heads.sbo.*"), for a readable record.

    >>> _grouped(["heads.sbo.boundary.dense1.weight", "heads.sbo.bias", "generator.blocks.0.attn.qkv.weight"])
    ['generator.*', 'heads.sbo.*']
    """
    groups = set()
    for name in names:
        parts = name.split(".")
        groups.add(".".join(parts[:2]) + ".*" if parts[0] == "heads" else parts[0] + ".*")
    return sorted(groups)


def load_starting_weights(model: torch.nn.Module, start: StartingPoint) -> Initialised:
    """Copy every tensor of the starting run that the new model has under the same name and shape; the rest of the
    model keeps its own initialisation (new heads, ELECTRA's generator). ValueError when a shared name has another
    shape (the architectures do not match after all) or a loaded weight is not finite."""
    state = model.state_dict()
    loaded, dropped = [], []
    with safe_open(str(start.weights), "pt") as handle, torch.no_grad():
        for name in handle.keys():
            if name not in state:
                dropped.append(name)
                continue
            tensor = handle.get_tensor(name)
            if tuple(tensor.shape) != tuple(state[name].shape):
                raise LabError("--init-from {start_run_dir_name}: its {name} is {tensor_shape}, the new "
                               "model's {state_shape}: the architectures differ",
                               start_run_dir_name=start.run_dir.name, name=name, tensor_shape=tuple(tensor.shape),
                               state_shape=tuple(state[name].shape))
            if tensor.is_floating_point() and not math.isfinite(float(tensor.float().sum())):
                raise LabError("--init-from {start_run_dir_name}: its {name} holds NaN or infinite numbers",
                               start_run_dir_name=start.run_dir.name, name=name)
            state[name].copy_(tensor.to(state[name].dtype))
            loaded.append(name)
    new = [name for name in state if name not in set(loaded)]
    return Initialised(tuple(loaded), tuple(new), tuple(dropped))


def note_text(start: StartingPoint, family: str, done: Initialised, objectives: dict) -> str:
    """NOTE.md of a run started from another."""
    title = family_record(family).title
    on = ", ".join(f"{name} {weight:g}" for name, weight in objectives.items() if weight > 0)
    lines = [f"# Started from {start.run_dir.name}", "",
             f"- a {title} run whose weights and tokenizer start from `{start.run_dir}` ({start.family}, step "
             f"{start.step}; {start.source}), read from {start.weights.name}",
             f"- objectives: {on}",
             f"- {len(done.loaded)} tensors loaded from the starting run"]
    if done.new:
        lines.append(f"- new, initialised as {title} initialises them: {', '.join(_grouped(done.new))}")
    if done.dropped:
        lines.append(f"- not used by {title} (dropped): {', '.join(_grouped(done.dropped))}")
    lines.append("- the tokenizer, the tokens that play the lab's roles and the text framing are the starting run's")
    return "\n".join(lines) + "\n"


def write_note(out: Path, start: StartingPoint, family: str, done: Initialised, objectives: dict) -> None:
    atomic_write_text(Path(out) / NOTE_FILE, note_text(start, family, done, objectives))
