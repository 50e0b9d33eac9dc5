"""What several tabs show alike: blank figures that say what to do, the figures' colours and font (one colour per
family, the same in every figure), a run's state and a duration in words, a Switch expert's colour and a Switch
layer's name, a tokenizer kind's title, and the live views' timers (they tick only while their tab is shown:
`follow_tabs`, see "Live views" below).

Each helper here is used by more than one tab (the Mask Explorer and the Tokenizer Lab share the tokenizer kinds; the
Train tab, the Scaling tab and the demo zoo share the run states; ...); what one tab alone draws lives in that tab's
package. Every word is written in the reader's language (`app.i18n.language.tr`); names and numbers stay as they are.
"""
from __future__ import annotations

import html
import json
import logging
import re
import textwrap

import gradio as gr
import plotly.graph_objects as go

from lab_models import api

from app.i18n.language import current_language, text, tr
from app.inputs import finite

logger = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------------------ colours and font

# One colour per family, the same in every figure that draws runs (the Leaderboard, the Train tab's comparison, the
# Understand tab's fill-mask, similarity and fine-tuning figures, the Scaling plot): 17 colours far enough apart to
# tell in a legend, the causal LMs blues, the MLMs reds and oranges, the seq2seq models greens and browns, the
# permutation LMs purples, the RNN era greys.
FAMILY_COLORS = {
    "gpt": "#1f4e9c", "gpt2": "#4a90d9", "bert": "#d62728", "roberta": "#ff7f0e", "albert": "#e6a817",
    "spanbert": "#8c2d04", "electra": "#ff9896", "unilm": "#b5179e", "xlnet": "#7b2cbf", "mpnet": "#a78bfa",
    "mass": "#2ca02c", "glm": "#17becf", "t5": "#0b6e4f", "elmo": "#7f7f7f", "cove": "#a0785a", "ulmfit": "#3d3d3d",
    "cvt": "#bcbd22",
}
OTHER_FAMILY_COLOR = "#94a3b8"
LINE_DASHES = ("solid", "dash", "dot", "dashdot", "longdash")  # a family's second, third, ... run in one figure
BAR_PATTERNS = ("", "/", ".", "x", "\\")
STATE_COLORS = {"queued": "#94a3b8", "running": "#2563eb", "finished": "#16a34a", "stopped": "#d97706",
                "failed": "#dc2626", "died": "#991b1b"}
# plotly's own font list, then CJK fonts: the synthetic corpus is English + Chinese, so predicted tokens and token
# labels may be Chinese characters, which the default list leaves as empty boxes in some browsers
FONT = ('"Open Sans", verdana, arial, "Noto Sans CJK SC", "WenQuanYi Micro Hei", "Microsoft YaHei", "PingFang SC", '
        'sans-serif')
MARGIN = {"l": 50, "r": 20, "t": 60, "b": 40}  # the margins of the figures drawn in FONT


def family_color(family) -> str:
    """A family's colour, the same in every figure of the lab (FAMILY_COLORS); grey for a name it does not know.

    >>> family_color("bert"), family_color("BERT") == family_color("bert"), family_color(None)
    ('#d62728', True, '#94a3b8')
    """
    return FAMILY_COLORS.get(str(family or "").strip().lower(), OTHER_FAMILY_COLOR)


def run_styles(families: dict) -> dict:
    """{run: (colour, the run's rank among the runs of its family)} for runs drawn in one figure ({run: family}):
    every run takes its family's colour; a family's second, third, ... run is told apart by its rank (a figure gives
    it LINE_DASHES[rank] or BAR_PATTERNS[rank]).

    >>> run_styles({"a": "gpt", "b": "bert", "c": "gpt"})["c"]
    ('#1f4e9c', 1)
    """
    seen: dict[str, int] = {}
    styles = {}
    for run, family in families.items():
        key = str(family or "").strip().lower()
        styles[run] = (family_color(key), seen.get(key, 0))
        seen[key] = seen.get(key, 0) + 1
    return styles


# ------------------------------------------------------------------------------------------------ empty figures
# characters per line of an empty figure's note (plotly does not wrap an annotation itself): at 14 px a line reads in
# full in a figure 320 pixels wide, a phone's or a 400-pixel window's (64 were cut at both sides there)
NOTE_WIDTH = 40


def wrapped_note(message: str, width: int = NOTE_WIDTH) -> str:
    """A note broken into lines for a plotly annotation (`<br>`), at spaces, or every width/2 characters in a text
    without spaces (Chinese, whose characters are twice as wide).

    >>> wrapped_note("one two three four", 9)
    'one two<br>three<br>four'
    >>> wrapped_note("一二三四五六七八九十", 8)
    '一二三四<br>五六七八<br>九十'
    """
    lines = []
    for paragraph in str(message).split("\n"):
        if " " in paragraph.strip() or not paragraph:
            lines += textwrap.wrap(paragraph, width) or [""]
        else:
            half = max(1, width // 2)
            lines += [paragraph[i:i + half] for i in range(0, len(paragraph), half)]
    return "<br>".join(lines)




def empty_figure(message: str, height: int) -> go.Figure:
    """A blank figure with a grey note in its middle: what to do, or why there is nothing to draw (the Train tab's
    plots, its Switch routing plot, the Scaling plot)."""
    figure = go.Figure()
    figure.add_annotation(text=wrapped_note(message), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                          font={"size": 14, "color": "#64748b"})
    figure.update_layout(height=height, template="plotly_white", margin={"l": 50, "r": 20, "t": 40, "b": 40},
                         xaxis={"visible": False}, yaxis={"visible": False})
    return figure


def compact_empty_figure(message: str, height: int = 300) -> go.Figure:
    """`empty_figure` with a smaller note and narrower margins (the add-on objectives' numbers on the Train tab, the
    sentence similarity plots on the Understand tab)."""
    figure = go.Figure()
    figure.add_annotation(text=wrapped_note(message), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                          font={"size": 13, "color": "#64748b"})
    figure.update_layout(height=height, template="plotly_white", margin={"l": 40, "r": 20, "t": 30, "b": 30},
                         xaxis={"visible": False}, yaxis={"visible": False})
    return figure


def cjk_empty_figure(message: str, height: int = 320) -> go.Figure:
    """`empty_figure` for the figures drawn in FONT (the Understand tab, its Fine-tune section, the Leaderboard): the
    note is escaped (it may quote a token or a backend message) and written in FONT, within MARGIN."""
    figure = go.Figure()
    figure.add_annotation(text=wrapped_note(html.escape(message)), showarrow=False, x=0.5, y=0.5, xref="paper",
                          yref="paper",
                          font={"size": 14, "color": "#64748b"})
    figure.update_layout(height=height, template="plotly_white", font={"family": FONT}, margin=MARGIN,
                         xaxis={"visible": False}, yaxis={"visible": False})
    return figure


# ------------------------------------------------------------------------------------------------ runs

RUN_STATES = ("queued", "running", "finished", "stopped", "failed", "died", "unknown", "not started")


def state_word(state: str) -> str:
    """A run's state ("running", "not started", ...) as a word in the reader's language; an unknown one as it is."""
    return tr("train.state_" + state.replace(" ", "_")) if state in RUN_STATES else state


def format_duration(seconds) -> str:
    """A short human duration.

    >>> format_duration(42), format_duration(190), format_duration(7260), format_duration(None)
    ('42 s', '3 min 10 s', '2 h 01 min', '—')
    """
    seconds = finite(seconds)
    if seconds is None or seconds < 0:
        return "—"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


# ------------------------------------------------------------------------------------------------ Switch experts

# 16 distinguishable colours (Tableau 10 + 6): experts beyond 16 reuse them
EXPERT_COLORS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                 "#9c755f", "#bab0ac", "#1f77b4", "#17becf", "#bcbd22", "#8c564b", "#e377c2", "#7f7f7f")
LAYER_LABEL = re.compile(r"(generator )?(shared )?(encoder |decoder )?layer(?: (\d+))?")


def expert_color(expert: int) -> str:
    """A Switch expert's colour, the same in the Train tab's routing plot and the Understand tab's routing chips."""
    return EXPERT_COLORS[expert % len(EXPERT_COLORS)]


def layer_label(label: str) -> str:
    """A Switch layer's label as lab_models/nn/moe.py writes it ("layer 2", "decoder layer 2", "shared layer",
    "generator layer 1") in the reader's language (第 2 层, 解码器第 2 层, ...); English, or another label, as it is.

    >>> layer_label("decoder layer 2"), layer_label("whatever")
    ('decoder layer 2', 'whatever')
    """
    match = LAYER_LABEL.fullmatch(label)
    if match is None or current_language() == "en":
        return label
    generator, shared, stack, number = match.groups()
    parts = [tr("switch.layer_generator")] if generator else []
    if stack:
        parts.append(tr(f"switch.layer_{stack.strip()}"))
    parts.append(tr("switch.layer_shared") if shared or not number else tr("switch.layer_number", number=number))
    return "".join(parts)


# ------------------------------------------------------------------------------------------------ tokenizer kinds


def tokenizer_title(kind: str) -> str:
    """A tokenizer kind's title in the reader's language ("bpe" -> "BPE (GPT)"; `api.TOKENIZER_KINDS`' English for a
    kind that has no text in app/i18n/locales/*/tokenizer.json)."""
    known = ("bpe", "byte_bpe", "wordpiece", "unigram")
    return tr(f"tokenizer.kind_{kind}") if kind in known else api.TOKENIZER_KINDS.get(kind, kind)


def tokenizer_kind_choices() -> list[tuple]:
    """(label, kind) for every tokenizer kind, each label in the reader's language (`api.TOKENIZER_KINDS`' English
    for a kind that has no text in app/i18n/locales/*/tokenizer.json yet)."""
    labels = {"bpe": text("tokenizer.kind_bpe"), "byte_bpe": text("tokenizer.kind_byte_bpe"),
              "wordpiece": text("tokenizer.kind_wordpiece"), "unigram": text("tokenizer.kind_unigram")}
    return [(labels.get(kind, title), kind) for kind, title in api.TOKENIZER_KINDS.items()]


# ------------------------------------------------------------------------------------------------ live views
# Live views that cost nothing while nobody looks at them: every `gr.Timer` on the page ticks only while the tab that
# holds it is shown.
#
# Why: Gradio's frontend pays for every event the page runs, not only for what it draws. Each time an event starts or
# ends, it writes the loading status of *every* component that any event of the session has touched so far, and doing
# so takes a deep copy (Svelte's `$state.snapshot`, i.e. `structuredClone`) of each one's value: its plots, tables and
# JSON panels (Gradio 6.31, `update_loading_stati_state` in Blocks.js). So after a reader has visited every tab, one
# timer tick costs the browser tens of milliseconds, whatever it returns, and eight timers ticking every 1.5 to 5 s
# kept half a core busy. (Gradio's run history cost the rest: it re-serialised its whole saved list into
# localStorage on every recorded event; `app/main.py` turns it off.)
#
# How: `follow_tabs(demo)`, called once at the end of the page's `with gr.Blocks()` block, finds every timer and the
# `gr.Tab`s that hold it (nested tabs too) and
# - starts each timer active only when all its tabs are the ones shown first (the first tab of each tab bar);
# - adds to every tab's `select` event a browser-only step (JavaScript, no server call, so the order of the clicks is
#   the order of the results) that sets each timer active exactly when the tab panel holding it is displayed;
# - moves each timer of a tab to the page's root in the layout (a timer draws nothing), because Gradio's frontend
#   holds back an update to a component of a hidden tab until that tab shows again: the "off" would never arrive.
#
# A live view therefore follows one rule: make a `gr.Timer` inside the tab it belongs to, with a tick handler that
# returns `gr.skip()` for every output whose data did not change (`changed(...)` below), and nothing else. A view that
# must be drawn at once when its tab is opened also listens to the tab's `select` event, as the tabs already do. Timers
# outside every tab (none today) keep ticking.
#
# Deviation from a server-push design: the page still polls, one request per shown tab every few seconds; the server
# answers in about a millisecond when nothing changed and the browser then writes no output.

# The least width of a picker with a button beside it (Compare's and Scaling's runs, the Leaderboard's zoo): in a
# narrower window the button goes below the picker, whose chips ("run id · family · step N") broke over five lines
# beside it at 400 pixels (the zoo's choice was cut under its arrow)
PICKER_MIN_WIDTH = 480

TAB_ELEMENT_PREFIX = "lab-tab-"


def tabs_holding(block) -> list:
    """The `gr.Tab`s that hold `block`, outermost first (an empty list for a block outside every tab)."""
    chain = []
    parent = getattr(block, "parent", None)
    while parent is not None:
        if isinstance(parent, gr.Tab):
            chain.append(parent)
        parent = getattr(parent, "parent", None)
    return chain[::-1]


def shown_first(tab) -> bool:
    """Whether `tab` is the tab its tab bar shows when the page opens: the bar's `selected` one, else its first."""
    bar = getattr(tab, "parent", None)
    if not isinstance(bar, gr.Tabs):
        return True
    tabs = [child for child in bar.children if isinstance(child, gr.Tab)]
    if bar.selected is not None:
        return tab.id == bar.selected or tabs.index(tab) == bar.selected
    return bool(tabs) and tabs[0] is tab


def element_id(tab) -> str:
    """The DOM id of `tab`'s panel: its `elem_id`, given one here when it has none."""
    if not tab.elem_id:
        tab.elem_id = f"{TAB_ELEMENT_PREFIX}{tab.id if tab.id is not None else tab._id}"
    return tab.elem_id


def activity_js(panels: list[str | None], selected: str | None = None) -> str:
    """The browser-only step run after the tab with the panel `selected` is selected: one `gr.Timer` update per timer,
    active when the panel with the given id is displayed (None: a timer outside every tab, always active). It first
    waits (up to 2 s, frame by frame) until the selected panel is displayed, so that the panel just left is hidden."""
    return """
async () => {
  const shown = (id) => {
    if (id === null) { return true; }
    const panel = document.getElementById(id);
    return panel !== null && panel.getClientRects().length > 0;
  };
  const selected = %s;
  for (let frame = 0; frame < 120 && selected !== null && !shown(selected); frame++) {
    await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  }
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  return %s.map((id) => ({"__type__": "update", "active": shown(id)}));
}
""" % (json.dumps(selected), json.dumps(panels))


def follow_tabs(demo: gr.Blocks) -> list[gr.Timer]:
    """Make every timer of `demo` tick only while its tab is shown (see "Live views" above). Call it inside
    `with demo:`, after every tab is built. Returns the timers it follows."""
    timers = [block for block in demo.blocks.values() if isinstance(block, gr.Timer)]
    if not timers:
        return []
    panels = []
    for timer in timers:
        holders = tabs_holding(timer)
        timer.active = bool(timer.active) and all(shown_first(tab) for tab in holders)
        panels.append(element_id(holders[-1]) if holders else None)
        if holders:
            # Drawn at the page's root (it has nothing to show): Gradio 6.31's frontend applies an update to a
            # component of a hidden tab only once that tab shows again, so a timer left in its tab kept ticking after
            # the tab was left. Its `parent` stays the tab's (tabs_holding: the view it belongs to).
            timer.parent.children.remove(timer)
            demo.children.append(timer)
    for tab in [block for block in demo.blocks.values() if isinstance(block, gr.Tab)]:
        tab.select(None, None, timers, js=activity_js(panels, element_id(tab)),
                   api_name=f"live_views_on_{element_id(tab).replace('-', '_')}", show_progress="hidden")
    return timers


def changed(now, before) -> bool:
    """Whether a live view's data changed since its last drawing: its signature `now` differs from `before`.

    >>> changed([3, "running"], [3, "running"]), changed([4, "running"], [3, "running"]), changed([0], None)
    (False, True, True)
    """
    return before is None or now != before


def one_event(*handlers) -> tuple:
    """(fn, inputs, outputs) for one Gradio event that runs several handlers, each given as (fn, inputs, outputs), in
    order: a tab's select that refreshes several pickers. Every event costs the browser a walk over the page (Gradio
    6.31) and waits in the queue behind the others, so six events made opening a tab take seconds while a run
    trained; one event with the same outputs does the same work. A handler's error ends the event, as it would have
    ended its own.

    >>> fn, inputs, outputs = one_event((lambda a: a + 1, ["a"], ["x"]), (lambda b, c: (b, c), ["b", "c"], ["y", "z"]))
    >>> inputs, outputs, fn(1, 2, 3)
    (['a', 'b', 'c'], ['x', 'y', 'z'], (2, 2, 3))
    """
    inputs, outputs, parts = [], [], []
    for fn, handler_inputs, handler_outputs in handlers:
        handler_inputs, handler_outputs = _as_list(handler_inputs), _as_list(handler_outputs)
        parts.append((fn, len(inputs), len(handler_inputs), len(handler_outputs)))
        inputs += handler_inputs
        outputs += handler_outputs

    def run(*values):
        results = []
        for fn, first, n_inputs, n_outputs in parts:
            result = fn(*values[first:first + n_inputs])
            if n_outputs:  # a handler without outputs returns nothing to send
                results.extend([result] if n_outputs == 1 else list(result))
        return results[0] if len(results) == 1 else tuple(results)

    return run, inputs, outputs


LANGUAGE_SWITCH_SUFFIX = "_on_language_switch"  # app/main.py redraws these after the header's switch


def redrawn_on_language_switch(name: str, outputs, *computed_by) -> None:
    """A view computed by a button (an answer, a ranking, a probe) drawn again in the new language after the header's
    switch. Each of `computed_by` is (fn, inputs, triggers), e.g. (view.generate, [runs, prompt], [button.click,
    box.submit]): its triggers also keep which one was pressed and with what inputs in the page's session (a
    `gr.State`, a listener that only copies them), and an event `<name>_on_language_switch` runs the last one pressed
    on those inputs again, to `outputs`. app/main.py `redraw_after_language_switch` runs it when its tab is shown
    after a switch (or when its tab is next opened); it changes nothing before the view was first computed, or when
    running it again fails (the old drawing stays: a switch shows no error). It computes again rather than translating
    the old drawing: the lab's answers are deterministic for their inputs (seeded), and most are cached."""
    outputs = _as_list(outputs)
    pressed = gr.State(None)  # [which of computed_by, its inputs]
    for index, (_, inputs, triggers) in enumerate(computed_by):
        gr.on(triggers, lambda *values, index=index: [index, list(values)], _as_list(inputs), pressed,
              api_name=f"{name}_inputs_kept" + (f"_{index}" if index else ""), show_progress="hidden", queue=False)

    def again(last):
        unchanged = gr.skip() if len(outputs) == 1 else (gr.skip(),) * len(outputs)
        if not last:
            return unchanged
        index, values = last
        try:
            return computed_by[index][0](*values)
        except Exception as error:  # noqa: BLE001 - the old drawing stays; the reader asked for a language only
            logger.info("%s was not drawn again in the new language: %s", name, error)
            return unchanged

    redraw = gr.Button(visible="hidden", elem_id=f"{name.replace('_', '-')}-language-redraw")
    redraw.click(again, pressed, outputs, api_name=f"{name}{LANGUAGE_SWITCH_SUFFIX}", show_progress="hidden")


def _as_list(components) -> list:
    if components is None:
        return []
    return list(components) if isinstance(components, (list, tuple, set)) else [components]


# A live view that follows a job (the demo zoo, a tokenization, a sweep, a fine-tuning) has nothing to redraw while
# no job moves, yet each tick is an event the browser pays for. Its tick therefore also answers for its own timer: left
# as it is while work is queued or running, turned off otherwise (`rest_when_idle`). Opening the tab turns it on again
# (follow_tabs) and so does the view's own start button (`WAKE_TIMER_JS`, a browser-only step after the start), so a
# job started elsewhere (the CLI, another page) shows up when the tab is next opened.
WAKE_TIMER_JS = '() => ({"__type__": "update", "active": true})'


def rest_when_idle(busy: bool):
    """The tick's output for its own `gr.Timer`: unchanged while `busy`, else turned off.

    >>> rest_when_idle(False) == {"__type__": "update", "active": False}
    True
    """
    return gr.skip() if busy else gr.update(active=False)
