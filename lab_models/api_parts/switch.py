"""`lab_models.api`'s switch section (re-exported there: the UI imports only `lab_models.api`).

The Switch Transformer (lab_models/nn/moe.py, lab_models/switch.py): a feed-forward option of every Transformer
family, turned on with `model=switch_settings(True, ...)` in start_training (the CLI's --model ffn=switch ...).
"""
from __future__ import annotations

from pathlib import Path

from .. import runs as _runs
from .. import switch as _switch
from ..home import lab_home
from .training import RunStore
from .understand import _probe_run_dir, runs_with_weights

RoutingView = _switch.RoutingView
SWITCH_DEFAULTS = dict(_switch.SWITCH_DEFAULTS)  # ffn, n_experts, capacity_factor, expert_every, ... (ModelConfig's)
__all__ = ["RoutingView", "SWITCH_DEFAULTS", "switch_settings", "switch_routing", "is_switch_run", "switch_runs"]


def switch_settings(on: bool, n_experts=None, capacity_factor=None, expert_every=None, router_z_weight=None) -> dict:
    """The `model` overrides of `start_training` for Switch layers: {} when `on` is false, else {"ffn": "switch"} and
    every given value that differs from its default (None = the default). ValueError for a value the model would
    reject (e.g. 0 experts), with the model's own message."""
    if not on:
        return {}
    given = {"n_experts": n_experts, "capacity_factor": capacity_factor, "expert_every": expert_every,
             "router_z_weight": router_z_weight}
    overrides: dict[str, object] = {"ffn": "switch"}
    for key, value in given.items():
        if value is None or value == "":
            continue
        default = SWITCH_DEFAULTS[key]
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"The Switch setting {key} must be a number, got {value!r}.") from None
        if isinstance(default, int):
            if not number.is_integer():
                raise ValueError(f"The Switch setting {key} must be a whole number, got {value!r}.")
            number = int(number)
        if number != default:
            overrides[key] = number
    from ..nn.config import ModelConfig

    # the model's own checks (n_experts >= 1, capacity_factor > 0, ...); the trainer checks the depth against the preset
    depth = overrides.get("expert_every", SWITCH_DEFAULTS["expert_every"])
    ModelConfig(vocab_size=100, n_layers=depth if isinstance(depth, int) and depth > 0 else 1, **overrides)
    return overrides


def is_switch_run(run_dir) -> bool:
    """Whether the run in `run_dir` was trained with Switch layers (its config.json says ffn "switch")."""
    model = _runs.read_config(Path(run_dir)).get("model")
    return isinstance(model, dict) and model.get("ffn") == "switch"


def switch_runs(jobs: RunStore | None = None, *, home=None) -> list[dict]:
    """`runs_with_weights` rows of the runs trained with Switch layers, newest first."""
    store = jobs if jobs is not None else RunStore(lab_home(home))
    return [row for row in runs_with_weights(store) if is_switch_run(store.run_dir(row["run_id"]))]


def switch_routing(run_dir, sentence: str) -> RoutingView:
    """The expert each token of `sentence` goes to in every Switch layer of a trained run (`RoutingView`: per layer,
    the tokens, their experts and router probabilities), read in evaluation mode. ValueError for a run without
    Switch layers, an RNN run, an empty or too long sentence."""
    return _switch.token_routing(_probe_run_dir(run_dir), sentence)
