"""HTML and tables for the Understand tab's Switch routing section: the expert each token of a sentence goes to, in
every Switch layer of a trained run, as token chips coloured by expert, and as a table.

Presentation only: the numbers are `api.switch_routing`'s `RoutingView` (lab_models/models/switch.py). Paper: Fedus,
Zoph, Shazeer (2022), Switch Transformers; no deviation (nothing is computed here). Every word drawn here is in the
reader's language (`app.i18n.language.tr`, keys `switch.*`); layer labels are translated word by word ("layer 2": 第 2 层,
`app.display.layer_label`), tokens and numbers stay as they are. The experts' colours are the Train tab's routing
plot's (`app.display.expert_color`).
"""
from __future__ import annotations

import html

from app.display import expert_color, layer_label
from app.i18n.language import tr

ROUTING_COLUMN_KEYS = ("col_layer", "col_position", "col_token", "col_expert", "col_probability")


def routing_chips_html(view) -> str:
    """A `RoutingView` as one row of token chips per Switch layer, each chip coloured by its expert (hover: expert
    and router probability; a faded chip is a token routed with low confidence), with a legend of the experts."""
    legend = "".join(f'<span class="tok-chip" style="background:{expert_color(e)};color:#fff">'
                     f'{html.escape(tr("switch.expert", expert=e))}</span>' for e in range(view.n_experts))
    rows = []
    for layer in view.layers:
        chips = []
        for token, expert, probability, kept in zip(layer.tokens, layer.experts, layer.probabilities, layer.kept):
            tooltip = tr("switch.chip_tooltip", token=repr(token), expert=expert, probability=f"{probability:.2f}")
            if not kept:
                tooltip += tr("switch.chip_dropped")
            opacity = 0.45 + 0.55 * min(1.0, max(0.0, (probability - 1.0 / view.n_experts) /
                                                 max(1e-9, 1.0 - 1.0 / view.n_experts)))
            style = (f"background:{expert_color(expert)};color:#fff;opacity:{opacity:.2f}"
                     + (";text-decoration:line-through" if not kept else ""))
            chips.append(f'<span class="tok-chip switch-chip" data-expert="{expert}" style="{style}" '
                         f'title="{html.escape(tooltip)}">{html.escape(token)}<sub>{expert}</sub></span>')
        used = len(set(layer.experts))
        counts = tr("switch.chips_counts", tokens=len(layer.tokens), used=used, experts=view.n_experts)
        rows.append(f'<div class="tok-row switch-layer"><div class="tok-title"><b>'
                    f'{html.escape(layer_label(layer.label))}</b> <span class="tok-sub">{html.escape(counts)}'
                    f'</span></div><div class="tok-chips">{"".join(chips)}</div></div>')
    head = tr("switch.chips_head", family=view.family, step=f"{view.step:,}", experts=view.n_experts)
    return (f'<div class="switch-routing" id="switch-routing-chips"><div class="tok-row"><div class="tok-title">'
            f'<b>{html.escape(view.run_id)}</b> <span class="tok-sub">{html.escape(head)}</span></div>'
            f'<div class="tok-chips">{legend}</div></div>{"".join(rows)}</div>')


def routing_table(view):
    """The view as a table: layer, position, token, expert, probability (pandas; headers and layer labels in the
    reader's language; the table is only shown, never read back)."""
    import pandas as pd

    records = [[layer_label(layer.label), position, token, expert, probability]
               for layer in view.layers
               for position, (token, expert, probability) in enumerate(zip(layer.tokens, layer.experts,
                                                                             layer.probabilities))]
    return pd.DataFrame(records, columns=[tr(f"switch.{key}") for key in ROUTING_COLUMN_KEYS])
