"""Mask Explorer tab: who may attend to whom, and what is predicted, for several families side by side.

Every heatmap is drawn from `api.anatomy`, which runs the family's real batch builder; nothing here decides a mask.
The sentence is split on whitespace with each Chinese/Japanese/Korean character (and emoji) a token of its own (a
Chinese sentence has no spaces: whitespace alone would give one token), per character, or by a tokenizer; the note
under the sentence says which split was used (`api.explorer_split`). `/explore_masks` returns the four family slots
(header, figure, table) and then that note.

What the handler writes is in the reader's language (app/i18n/language.py `tr`): figure titles, axes and hover texts,
table headers, the header's density and choices lines, the split note; the batch builder's rule (a `lab_models`
sentence) through the message catalogue (app/i18n/locales/zh/messages/status_other.json). Tokens, family titles and
choice names stay as they are. The page draws on load (app/main.py), so the first drawing is in the reader's language
too.
"""
from __future__ import annotations

import re

import gradio as gr

from lab_models import api

from app.display import tokenizer_kind_choices, tokenizer_title
from app.errors import CLEARED_ON_ERROR, user_errors
from app.explorer.figures import anatomy_figure, anatomy_table, stream_density
from app.i18n.language import current_language, marker, text, tr
from app.i18n.messages import translate
from app.tab_parts import PageLoad, TabParts

MAX_FAMILIES = 4  # app/i18n/locales/*/explorer.json "families" says "up to 4"
DEFAULT_SENTENCE = "the quick brown fox jumps over the lazy dog"
DEFAULT_FAMILIES = ["bert", "unilm", "xlnet", "glm"]
EXPLORER_TOKENIZER_CORPUS = "stdlib-docs"
EXPLORER_TOKENIZER_VOCAB = 4000
MLM_FAMILIES = {"bert", "roberta", "albert", "spanbert", "electra"}
FAMILY_KINDS = ("decoder", "encoder", "encoder-decoder", "two-stream", "rnn")  # explorer.json "kind_<kind>"
# Notes the handler writes into a Markdown value: Gradio's i18n markers, which the page shows in the reader's language.
LEAK_NOTE = marker("explorer.leak_note")  # "**Two streams off: the leak.** One stream only, ..."
SPLIT_USED = marker("explorer.split_used")  # "**Split used:**", then the rule and the token count


def parse_positions(text: str) -> list[int] | None:
    """"1, 4" -> [1, 4]; blank -> None (sample as in training)."""
    if not text or not text.strip():
        return None
    try:
        return [int(part) for part in re.split(r"[,\s]+", text.strip()) if part]
    except ValueError:
        raise api.LabError("Positions must be whole numbers separated by commas, e.g. 1, 4; got {text!r}.",
                           text=text) from None


def parse_spans(text: str) -> list[tuple[int, int]] | None:
    """"1:3, 5:6" -> [(1, 3), (5, 6)] (0-based, end excluded); blank -> None (sample as in training)."""
    if not text or not text.strip():
        return None
    spans = []
    for part in [p for p in re.split(r"[,;\s]+", text.strip()) if p]:
        match = re.fullmatch(r"(-?\d+)\s*[:\-]\s*(-?\d+)", part)
        if not match:
            raise api.LabError("Write spans as start:end (0-based, end excluded), e.g. 1:3, 5:6; could not read "
                               "{part!r}.", part=part)
        spans.append((int(match.group(1)), int(match.group(2))))
    return spans


def family_choices(family: str, accepted: tuple[str, ...], *, masked, mode, src_len, order, num_predict, spans,
                   shuffle) -> dict:
    """The user's controls translated into the `api.anatomy` choices that `family` accepts."""
    choices: dict = {}
    if "masked" in accepted:
        positions = parse_positions(masked)
        if positions is None and family == "spanbert" and spans:
            positions = sorted({i for start, end in parse_spans(spans) for i in range(start, end)})
        if positions is not None:
            choices["masked"] = positions
    if "mode" in accepted and mode:
        choices["mode"] = mode
        if mode == "seq2seq" and src_len:
            choices["src_len"] = int(src_len)
    if "order" in accepted and parse_positions(order) is not None:
        choices["order"] = parse_positions(order)
    if "num_predict" in accepted and num_predict:
        choices["num_predict"] = int(num_predict)
    parsed_spans = parse_spans(spans)
    if "spans" in accepted and parsed_spans is not None:
        choices["spans"] = parsed_spans
    if "span" in accepted and parsed_spans is not None:
        choices["span"] = parsed_spans[0]
    if "shuffle" in accepted and shuffle is not None:
        choices["shuffle"] = bool(shuffle)
    return choices


def kind_title(kind: str) -> str:
    """A family's kind ("two-stream") in the reader's language; an unknown kind as it is."""
    return tr(f"explorer.kind_{kind.replace('-', '_')}") if kind in FAMILY_KINDS else kind


def split_rule_text(split, text: str, tokenizer_kind: str | None = None) -> str:
    """Which split was used, in the reader's language: `api.explorer_split`'s note (`WordSplit.note`), written again
    from its mode (the English is the same words)."""
    if split.mode == "whitespace":
        return tr("explorer.note_whitespace")
    if split.mode == "characters":
        return tr("explorer.note_characters")
    if split.mode == "whitespace+wide":
        words = len(text.split())
        return tr("explorer.note_wide", words=words, s="s" if words != 1 else "")
    if split.mode == "tokenizer" and tokenizer_kind in api.TOKENIZER_KINDS:
        return tr("explorer.note_tokenizer", tokenizer=tokenizer_title(tokenizer_kind))
    return translate(split.note)


class MaskExplorer:
    def __init__(self, home):
        self.home = home
        self.specs = {spec.name: spec for spec in api.families() if spec.has_anatomy}

    def split(self, text: str, tokenizer_kind: str):
        """The sentence's tokens and the rule used (`api.explorer_split`)."""
        if tokenizer_kind in (None, "", "whitespace", "characters"):
            return api.explorer_split(text, split=tokenizer_kind or "whitespace")
        corpus = api.load_corpus(EXPLORER_TOKENIZER_CORPUS, home=self.home)
        result = api.cached_tokenizer(tokenizer_kind, corpus.train, EXPLORER_TOKENIZER_VOCAB,
                                      corpus_fingerprint=corpus.fingerprint, home=self.home)
        return api.explorer_split(text, result.path)

    def tokens(self, text: str, tokenizer_kind: str) -> list[str]:
        return self.split(text, tokenizer_kind).tokens

    @staticmethod
    def limit_families(families):
        """A tick beyond MAX_FAMILIES is taken back at once, with a note, instead of failing on Draw (the ticks keep
        their order, so the newest goes)."""
        if not isinstance(families, list) or len(families) <= MAX_FAMILIES:
            return gr.skip()
        gr.Warning(tr("explorer.families_limit", count=MAX_FAMILIES))
        return gr.update(value=families[:MAX_FAMILIES])

    def explore(self, text, tokenizer_kind, families, seed, masked, mode, src_len, order, num_predict, spans,
                shuffle, two_stream=True):
        families = list(families or [])
        if not families:
            raise api.LabError("Tick at least one family to draw.")
        if len(families) > MAX_FAMILIES:
            raise api.LabError("Pick at most {max_families} families to compare side by side.",
                               max_families=MAX_FAMILIES)
        unknown = [f for f in families if f not in self.specs]
        if unknown:
            raise api.LabError("Unknown family {unknown!r}: choose from {specs}.",
                               unknown=unknown[0], specs=', '.join(self.specs))
        split = self.split(text, tokenizer_kind)
        tokens = split.tokens
        outputs = []
        for family in families:
            spec = self.specs[family]
            choices = family_choices(family, spec.anatomy_choices, masked=masked, mode=mode, src_len=src_len,
                                     order=order, num_predict=num_predict, spans=spans, shuffle=shuffle)
            leak = family == "xlnet" and two_stream is False
            if leak:
                choices["settings"] = {"two_stream": False}
            try:
                anatomy = api.anatomy(family, tokens, seed=int(seed or 0), **choices)
            except ValueError as error:  # the family's name, then what it says
                raise api.LabError("{title}: {error}", title=spec.title, error=error) from error
            densities = " · ".join(f"{s}: {stream_density(m):.2f}" for s, m in anatomy.attention.items())
            # a choice the drawn mode does not use (UniLM's src_len outside seq2seq) is None: not shown
            used = (", ".join(f"{k}={v}" for k, v in anatomy.choices.items() if v is not None)
                    or tr("explorer.choices_none"))
            header = (tr("explorer.header_title", title=spec.title, kind=kind_title(spec.kind)) + "\n"
                      + translate(anatomy.rule) + "\n\n" + tr("explorer.header_density", densities=densities)
                      + "  \n" + tr("explorer.header_choices", used=used))
            if leak:
                header += "\n\n" + LEAK_NOTE
            outputs += [gr.update(value=header, visible=True), gr.update(value=anatomy_figure(anatomy), visible=True),
                        gr.update(value=anatomy_table(anatomy), visible=True)]
        for _ in range(MAX_FAMILIES - len(families)):
            outputs += [gr.update(visible=False)] * 3
        note = split_rule_text(split, text, tokenizer_kind)
        return outputs + [SPLIT_USED + " " + tr("explorer.split_line", note=note, count=len(tokens))]

    @staticmethod
    def resample(seed):
        return int(seed or 0) + 1


def build(home) -> TabParts:
    """Lay out the tab. The page draws the default families when it loads (`/explore_masks_on_load`), in the
    reader's language."""
    explorer = MaskExplorer(home)
    names = [(spec.title, name) for name, spec in explorer.specs.items()]
    gr.Markdown(text("explorer.intro"))
    with gr.Row():
        sentence = gr.Textbox(DEFAULT_SENTENCE, label=text("explorer.sentence"), scale=3)
        tokenizer = gr.Dropdown([(text("explorer.split_whitespace"), "whitespace"),
                                 (text("explorer.split_characters"), "characters")]
                                + tokenizer_kind_choices(),
                                value="whitespace", label=text("explorer.split_with"), scale=1,
                                min_width=380)  # its longest choice reads in full, clear of the arrow
    # the split line describes the sentence typed: emptied when drawing it fails (app/errors.py)
    split_note = gr.Markdown("", elem_id="explorer-split-note", elem_classes=[CLEARED_ON_ERROR])
    families = gr.CheckboxGroup(names, value=DEFAULT_FAMILIES, label=text("explorer.families"))
    with gr.Accordion(text("explorer.choices"), open=False):
        with gr.Row():
            seed = gr.Number(0, precision=0, label=text("explorer.seed"))
            resample = gr.Button(text("explorer.resample"))
        with gr.Row():
            masked = gr.Textbox(label=text("explorer.masked"),
                                placeholder=text("explorer.masked_placeholder"))
            spans = gr.Textbox(label=text("explorer.spans"), placeholder=text("explorer.spans_placeholder"))
            shuffle = gr.Checkbox(True, label=text("explorer.shuffle"))
        with gr.Row():
            mode = gr.Radio([(text("explorer.mode_bidirectional"), "bidirectional"),
                             (text("explorer.mode_left_to_right"), "left_to_right"),
                             (text("explorer.mode_right_to_left"), "right_to_left"),
                             (text("explorer.mode_seq2seq"), "seq2seq")], value=None,
                            label=text("explorer.mode"))
            src_len = gr.Number(None, precision=0, label=text("explorer.src_len"))
        with gr.Row():
            order = gr.Textbox(label=text("explorer.order"), placeholder=text("explorer.order_placeholder"))
            num_predict = gr.Number(None, precision=0, label=text("explorer.num_predict"))
            two_stream = gr.Checkbox(True, label=text("explorer.two_stream"),
                                     info=text("explorer.two_stream_info"))
    draw = gr.Button(text("explorer.draw"), variant="primary")
    slots = []
    with gr.Row():
        for _ in range(MAX_FAMILIES // 2):
            with gr.Column():
                # the heading above names the family: no "Plot" label on the heatmap
                slots.append((gr.Markdown(visible=False), gr.Plot(visible=False, show_label=False),
                              gr.Dataframe(visible=False)))
    with gr.Row():
        for _ in range(MAX_FAMILIES - MAX_FAMILIES // 2):
            with gr.Column():
                # the heading above names the family: no "Plot" label on the heatmap
                slots.append((gr.Markdown(visible=False), gr.Plot(visible=False, show_label=False),
                              gr.Dataframe(visible=False)))
    outputs = [component for slot in slots for component in slot] + [split_note]
    inputs = [sentence, tokenizer, families, seed, masked, mode, src_len, order, num_predict, spans, shuffle,
              two_stream]
    handler = user_errors(explorer.explore)
    families.input(explorer.limit_families, families, families, api_name="explorer_families_limit",
                   show_progress="hidden")
    draw.click(handler, inputs, outputs, api_name="explore_masks", concurrency_limit=None)
    sentence.submit(handler, inputs, outputs, api_name="explore_masks_on_submit")
    resample.click(explorer.resample, seed, seed, api_name="resample_seed").then(
        handler, inputs, outputs, api_name="explore_masks_after_resample")
    return TabParts(loads=(PageLoad("explore_masks_on_load", handler, inputs, outputs),))
