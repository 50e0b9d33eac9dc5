"""Corpora tab: the built-in corpora, uploads (.txt, .md, .jsonl, .csv) and a card for each corpus.

Uploads are validated and written atomically by `lab_models.api.import_corpus`; a bad file gets a message in the page.
What the handlers write (the card's headers, field names, source and language mix, the upload note, the import
status) is in the reader's language (app/i18n/language.py `tr`); names, counts and the sample stay as they are.
"""
from __future__ import annotations

import pandas as pd
import gradio as gr

from lab_models import api

from app.errors import user_errors
from app.i18n.language import marker, text, tr

# The built-in corpora that app/i18n/locales/*/corpora.json "intro" describes; another built-in corpus makes the page
# list them all in `api.BUILTIN_CORPORA`'s English instead (tests/test_corpora.py keeps the two in step).
DESCRIBED_CORPORA = ("stdlib-docs", "synthetic")
MARKDOWN_PUNCTUATION = set("\\`*_{}[]()<>#+-.!|~")


def verbatim(line: str) -> str:
    """`line` escaped for Markdown, so that a sample reads as it is written (`__debug__` was drawn as a bold "debug").

    >>> verbatim("if __debug__: x = [1]")
    'if \\\\_\\\\_debug\\\\_\\\\_: x = \\\\[1\\\\]'
    """
    return "".join("\\" + char if char in MARKDOWN_PUNCTUATION else char for char in line)


SAMPLE_HEADING = marker("corpora.sample")  # "**Sample**" above the corpus card's sample, in the reader's language
CARD_FIELDS = ("name", "source", "documents", "train_documents", "validation_documents", "lines", "words",
               "characters", "bytes")  # corpora.json "field_<name>"
SOURCES = ("builtin", "upload", "path")  # corpora.json "source_<source>"
SCRIPTS = ("latin", "cjk", "other")  # corpora.json "script_<script>": api.corpus_card's language mix


def corpora_intro():
    """The tab's opening Markdown: the built-in corpora and their descriptions, then the invitation to upload."""
    if tuple(api.BUILTIN_CORPORA) == DESCRIBED_CORPORA:
        return text("corpora.intro")
    descriptions = "\n".join(f"- **{name}**: {about}" for name, about in api.BUILTIN_CORPORA.items())
    return f"Built-in corpora (nothing is downloaded):\n{descriptions}\n\nOr upload your own text below."


class CorporaView:
    def __init__(self, home):
        self.home = home

    def choices(self) -> list[str]:
        return api.list_corpora(home=self.home)

    def card(self, name):
        """The corpus card: a table of facts, the language mix and a sample."""
        if not name:
            raise ValueError("Choose a corpus.")
        card = api.corpus_card(api.load_named_corpus(name, home=self.home))
        facts = {k: card[k] for k in CARD_FIELDS if k in card}
        if facts.get("source") in SOURCES:
            facts["source"] = tr(f"corpora.source_{facts['source']}")
        mix = tr("corpora.list_separator").join(f"{tr(f'corpora.script_{k}') if k in SCRIPTS else k} {v:.0%}"
                        for k, v in card.get("language_mix", {}).items())
        table = pd.DataFrame({tr("corpora.col_field"): [tr(f"corpora.field_{k}") for k in facts]
                              + [tr("corpora.field_language_mix")],
                              tr("corpora.col_value"): [str(v) for v in facts.values()] + [mix]})
        sample = "\n\n".join(f"> {verbatim(s)}" for s in card.get("sample", []))
        return table, SAMPLE_HEADING + f"\n\n{sample}"

    def inspect(self, file_path):
        """After an upload: which text columns the file has (for .csv / .jsonl)."""
        if not file_path:
            return gr.update(choices=[], value=None, visible=False), ""
        info = api.inspect_file(file_path)
        columns = info.get("columns") or []
        note = tr("corpora.detected_pick_column" if columns else "corpora.detected", format=info["format"],
                  bytes=f"{info['bytes']:,}")
        return gr.update(choices=columns, value=info.get("suggested_column"), visible=bool(columns)), note

    def import_file(self, file_path, name, column):
        if not file_path:
            raise ValueError("Upload a .txt, .md, .jsonl or .csv file first.")
        corpus = api.import_corpus(file_path, name=(name or None), text_column=(column or None), home=self.home)
        table, sample = self.card(corpus.name)
        return (tr("corpora.imported", name=corpus.name, train=len(corpus.train), validation=len(corpus.validation)),
                gr.update(choices=self.choices(), value=corpus.name), table, sample)

    def refresh(self, current=None):
        choices = self.choices()
        return gr.update(choices=choices, value=current if current in choices else (choices[0] if choices else None))


def build(home, corpus_choices: list[str], tab=None):
    """Lay out the tab; return (the corpus dropdown, the import event) so other tabs can follow new corpora. `tab`:
    the gr.Tab it sits in, whose opening draws the chosen corpus's card (in the reader's language)."""
    view = CorporaView(home)
    gr.Markdown(corpora_intro())
    with gr.Row():
        with gr.Column(scale=1):
            corpus = gr.Dropdown(corpus_choices, value=corpus_choices[0] if corpus_choices else None,
                                 label=text("corpora.corpus"))
            show = gr.Button(text("corpora.show_card"))
            gr.Markdown(text("corpora.upload_heading"))
            upload = gr.File(label=text("corpora.upload"), file_types=[".txt", ".md", ".jsonl", ".csv"],
                             type="filepath")
            upload_note = gr.Markdown()
            column = gr.Dropdown([], label=text("corpora.column"), visible=False, allow_custom_value=False)
            name = gr.Textbox(label=text("corpora.name"), placeholder="my-corpus")
            import_button = gr.Button(text("corpora.import"), variant="primary")
            import_status = gr.Markdown()
        with gr.Column(scale=2):
            # headed until a card is drawn (Gradio would head an empty table "1 2")
            card = gr.Dataframe(pd.DataFrame(columns=[tr("corpora.col_field"), tr("corpora.col_value")]),
                                label=text("corpora.card"), interactive=False)
            sample = gr.Markdown()

    show.click(user_errors(view.card), corpus, [card, sample], api_name="corpus_card")
    corpus.change(user_errors(view.card), corpus, [card, sample], api_name="corpus_card_on_change")
    if tab is not None:
        tab.select(user_errors(view.card), corpus, [card, sample], api_name="corpus_card_on_select",
                   show_progress="hidden")
    upload.change(user_errors(view.inspect), upload, [column, upload_note], api_name="inspect_upload")
    imported = import_button.click(user_errors(view.import_file), [upload, name, column],
                                   [import_status, corpus, card, sample], api_name="import_corpus")
    return corpus, imported, view
