"""Corpora tab: the built-in corpora, uploads (.txt, .md, .jsonl, .csv), corpora read in place from the server's disk
(any size: a file, a folder, Parquet, a `datasets` save_to_disk folder), a card for each, and tokenizing a corpus ahead
of training with a live progress bar.

Uploads are validated and written atomically by `lab_models.api.import_corpus`; a bad file gets a message in the page.
A corpus on the server is linked by name (`api.link_server_corpus`): its path must lie inside the app's corpus root
(`python app.py --corpus-root DIR`, default `<lab home>/server-corpora`), and nothing is copied; the 200 MB cap is for
uploads only. **Tokenize** runs `python -m lab_models tokenize` in the background (`api.start_tokenizing`) with the
tokenizer a run of the chosen family and preset uses, so that such a run starts training at once; the bar (bytes and
tokens done, MB/s, ETA) is redrawn every second, and **Stop** keeps what is done (a new start continues it).
What the handlers write (the card's headers, field names, source and language mix, the notes, the progress line) is
in the reader's language (app/i18n/language.py `tr`); names, counts and the sample stay as they are.
"""
from __future__ import annotations

import html

import gradio as gr
import pandas as pd

from lab_models import api

from app.display import STATE_COLORS, WAKE_TIMER_JS, format_duration, rest_when_idle
from app.errors import user_errors
from app.i18n.language import marker, text, tr
from app.i18n.messages import translate
from app.tab_parts import TabParts

# The built-in corpora that app/i18n/locales/*/corpora.json "intro" describes; another built-in corpus makes the page
# list them all in `api.BUILTIN_CORPORA`'s English instead (tests/text/test_corpora.py keeps the two in step).
DESCRIBED_CORPORA = ("stdlib-docs", "synthetic", "stories")
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
EXTRA_FIELDS = ("path", "files", "text_column", "tokens")  # shown when the card has them (a linked corpus, shards)
SOURCES = ("builtin", "upload", "path")  # corpora.json "source_<source>"
SCRIPTS = ("latin", "cjk", "other")  # corpora.json "script_<script>": api.corpus_card's language mix
TOKENIZE_REFRESH_S = 1.0
TOKENIZE_FAMILIES = ("gpt", "gpt2", "bert", "roberta", "t5")  # one per tokenizer kind, and the common ones first
PHASES = ("fingerprinting", "sampling", "tokenizer", "tokenizing", "waiting", "done")  # corpora.json "phase_<phase>"
TOKENIZE_STATES = ("running", "finished", "stopped", "failed", "died")  # corpora.json "tokenize_state_<state>"


def corpora_intro():
    """The tab's opening Markdown: the built-in corpora and their descriptions, then the invitation to upload."""
    if tuple(api.BUILTIN_CORPORA) == DESCRIBED_CORPORA:
        return text("corpora.intro")
    descriptions = "\n".join(f"- **{name}**: {about}" for name, about in api.BUILTIN_CORPORA.items())
    return f"Built-in corpora (nothing is downloaded):\n{descriptions}\n\nOr upload your own text below."


def human_bytes(size) -> str:
    """Example: 1536 -> '1.5 KB', 300 * 10**6 -> '300.0 MB'."""
    size = float(size or 0)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{int(size)} B"


def tokenize_progress_html(status: dict | None) -> str:
    """The tokenization's bar: state, bytes done of all, tokens, MB/s and ETA (empty before any start)."""
    if not status:
        return ('<div class="train-progress train-idle"><div class="train-progress-head"><span class="train-state">'
                + text("corpora.tokenize_idle") +
                '</span></div><div class="train-bar"><div class="train-bar-fill" style="width:0%"></div></div></div>')
    state = status.get("state") or "running"
    progress = status.get("progress") or {}
    phase = progress.get("phase") or ("done" if state == "finished" else "")
    fraction = 1.0 if state == "finished" else float(progress.get("fraction") or 0.0)
    state_text = (tr(f"corpora.tokenize_state_{state}") if state in TOKENIZE_STATES else state)
    if state == "running" and phase in PHASES:
        state_text = tr(f"corpora.phase_{phase}")
    parts = [f'<span class="train-state">{html.escape(state_text)}</span>']
    if progress.get("bytes_total"):
        parts.append("<span>" + tr("corpora.tokenize_bytes", done=human_bytes(progress.get("bytes_done")),
                                   total=human_bytes(progress.get("bytes_total")), fraction=f"{fraction:.0%}")
                     + "</span>")
    if progress.get("tokens"):
        parts.append("<span>" + tr("corpora.tokenize_tokens", tokens=f"{progress['tokens'] / 1e6:,.1f}M") + "</span>")
    if progress.get("mb_per_s"):
        parts.append(f"<span>{progress['mb_per_s']:.1f} MB/s</span>")
    if state == "running":
        parts.append("<span>" + tr("train.progress_eta", eta=format_duration(progress.get("eta_s"))) + "</span>")
    color = STATE_COLORS.get({"died": "died", "failed": "failed"}.get(state, state), "#2563eb")
    return (f'<div class="train-progress train-{html.escape(state)}" data-state="{html.escape(state)}" '
            f'data-phase="{html.escape(phase)}"><div class="train-progress-head">{"".join(parts)}</div>'
            f'<div class="train-bar" role="progressbar" aria-valuemin="0" aria-valuemax="100" '
            f'aria-valuenow="{fraction * 100:.0f}"><div class="train-bar-fill" style="width:{fraction * 100:.1f}%;'
            f'background:{color}"></div></div></div>')


def tokenize_status_markdown(status: dict | None) -> str:
    if not status:
        return ""
    message = translate(status.get("message") or "")
    lines = [message] if message and status.get("state") != "running" else []  # while running, the bar says it
    if status.get("state") == "died" and status.get("log"):
        lines.append("```text\n" + str(status["log"]).replace("```", "'''") + "\n```")
    return "\n\n".join(lines)


class CorporaView:
    def __init__(self, home, root=None, tokenize_jobs=None):
        self.home = home
        self.root = root  # the folder server paths must lie in (api.corpus_root), or None: api's default
        self.tokenize_jobs = tokenize_jobs

    def choices(self) -> list[str]:
        return api.list_corpora(home=self.home)

    def corpus_root(self):
        return api.corpus_root(self.root, home=self.home)

    def card(self, name):
        """The corpus card: a table of facts, the language mix and a sample. A linked corpus too big to load is
        described from its files and its beginning (counts that need all of it say so, until it is tokenized)."""
        if not name:
            raise api.LabError("Choose a corpus.")
        card = api.corpus_overview(api.corpus_name(name, home=self.home), home=self.home)
        facts = {k: card[k] for k in CARD_FIELDS if k in card}
        if facts.get("source") in SOURCES:
            facts["source"] = tr(f"corpora.source_{facts['source']}")
        tokenized = card.get("tokenized") or []
        extra = {"path": card.get("path"), "files": card.get("files"), "text_column": card.get("text_column"),
                 "tokens": (f"{tokenized[0]['train_tokens'] + tokenized[0]['validation_tokens']:,} "
                            f"({tokenized[0]['dtype']}, {tokenized[0]['vocab_size']:,})") if tokenized else None}
        facts.update({k: v for k, v in extra.items() if v is not None})
        mix = tr("corpora.list_separator").join(f"{tr(f'corpora.script_{k}') if k in SCRIPTS else k} {v:.0%}"
                                                for k, v in card.get("language_mix", {}).items())
        table = pd.DataFrame({tr("corpora.col_field"): [tr(f"corpora.field_{k}") for k in facts]
                              + [tr("corpora.field_language_mix")],
                              tr("corpora.col_value"): ["—" if v is None else f"{v:,}" if isinstance(v, int) else
                                                        str(v) for v in facts.values()] + [mix]})
        sample = "\n\n".join(f"> {verbatim(s)}" for s in card.get("sample", []))
        note = ""
        if card.get("sampled_bytes") is not None:
            note = "\n\n_" + tr("corpora.sampled_note", size=human_bytes(card["sampled_bytes"])) + "_"
        return table, SAMPLE_HEADING + note + f"\n\n{sample}"

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
            raise api.LabError("Upload a .txt, .md, .jsonl or .csv file first.")
        corpus = api.import_corpus(file_path, name=(name or None), text_column=(column or None), home=self.home)
        table, sample = self.card(corpus.name)
        return (tr("corpora.imported", name=corpus.name, train=len(corpus.train), validation=len(corpus.validation)),
                gr.update(choices=self.choices(), value=corpus.name), table, sample)

    # ------------------------------------------------------------------ a corpus on this server
    def look(self, path, column):
        """What a path inside the corpus root holds: files, size, formats and text columns (nothing read yet)."""
        info = api.inspect_server_corpus(path, root=self.corpus_root(), text_column=(column or None))
        columns = info["columns"]
        return tr("corpora.server_found", files=f"{info['files']:,}", size=human_bytes(info["bytes"]),
                  formats=", ".join(info["formats"]), path=info["path"]) + (
            "\n\n" + tr("corpora.server_columns", columns=", ".join(columns), column=info["text_column"] or "—")
            if columns else "")

    def link(self, path, column, name):
        """Link the path as a named corpus; show its card and select it."""
        meta = api.link_server_corpus(path, root=self.corpus_root(), name=(name or None), text_column=(column or None),
                                      home=self.home)
        table, sample = self.card(meta["name"])
        return (tr("corpora.linked", name=meta["name"], files=f"{meta['files']:,}", size=human_bytes(meta["bytes"])),
                gr.update(choices=self.choices(), value=meta["name"]), table, sample)

    # ------------------------------------------------------------------ tokenizing
    def tokenize(self, name, family, preset):
        if self.tokenize_jobs is None:
            raise api.LabError("This page has no tokenize worker; start the app with python app.py.")
        job_id = api.start_tokenizing(self.tokenize_jobs, name, family=family or "gpt", preset=preset or "tiny")
        return (job_id,) + self.tokenize_view(job_id)

    def tokenize_view(self, job_id):
        """(the progress bar, the status line) of a tokenize job."""
        if not job_id:
            return tokenize_progress_html(None), ""
        status = api.tokenizing_status(self.tokenize_jobs, job_id)
        return tokenize_progress_html(status), tokenize_status_markdown(status)

    def stop_tokenizing(self, job_id):
        if not job_id:
            raise api.LabError("Start a tokenization first.")
        api.stop_tokenizing(self.tokenize_jobs, job_id)
        return self.tokenize_view(job_id)

    def tokenize_tick(self, job_id, signature=None):
        """The timer: redraw the bar only when the job's status changed; then the timer itself, turned off while no
        tokenization of this page runs (app/display.py's rest_when_idle)."""
        if not job_id:
            return gr.skip(), gr.skip(), signature, rest_when_idle(False)
        try:
            status = api.tokenizing_status(self.tokenize_jobs, job_id)
        except ValueError:
            return gr.skip(), gr.skip(), signature, rest_when_idle(False)
        busy = rest_when_idle(status.get("state") in ("queued", "running"))
        now = [status.get("state"), status.get("updated"), status.get("message")]
        if now == signature:
            return gr.skip(), gr.skip(), signature, busy
        return tokenize_progress_html(status), tokenize_status_markdown(status), now, busy


def build(home, corpus_choices: list[str], *, root=None, tokenize_jobs=None, tab=None) -> TabParts:
    """Lay out the tab. `tab`: the gr.Tab it sits in, whose opening draws the chosen corpus's card (in the reader's
    language). For the page: the import and the link, after which the other tabs' corpus pickers follow."""
    view = CorporaView(home, root, tokenize_jobs)
    gr.Markdown(corpora_intro())
    with gr.Row():
        with gr.Column(scale=1):
            corpus = gr.Dropdown(corpus_choices, value=corpus_choices[0] if corpus_choices else None,
                                 label=text("corpora.corpus"), elem_id="corpora-corpus")
            show = gr.Button(text("corpora.show_card"))
            gr.Markdown(text("corpora.upload_heading"))
            upload = gr.File(label=text("corpora.upload"), file_types=[".txt", ".md", ".jsonl", ".csv"],
                             type="filepath")
            upload_note = gr.Markdown()
            column = gr.Dropdown([], label=text("corpora.column"), visible=False, allow_custom_value=False)
            name = gr.Textbox(label=text("corpora.name"), placeholder="my-corpus")
            import_button = gr.Button(text("corpora.import"), variant="primary")
            import_status = gr.Markdown()
            gr.Markdown(text("corpora.server_heading"))
            gr.Markdown(text("corpora.server_intro") + f" `{view.corpus_root()}`")
            server_path = gr.Textbox(label=text("corpora.server_path"), placeholder="web.txt, books/, wiki.parquet",
                                     elem_id="corpora-server-path")
            with gr.Row():
                server_column = gr.Textbox(label=text("corpora.server_column"), placeholder="text")
                server_name = gr.Textbox(label=text("corpora.name"), placeholder="my-web-corpus",
                                         elem_id="corpora-server-name")
            with gr.Row():
                look = gr.Button(text("corpora.server_look"), elem_id="corpora-server-look")
                link = gr.Button(text("corpora.server_link"), variant="primary", elem_id="corpora-server-link")
            server_status = gr.Markdown(elem_id="corpora-server-status")
        with gr.Column(scale=2):
            # headed until a card is drawn (Gradio would head an empty table "1 2")
            card = gr.Dataframe(pd.DataFrame(columns=[tr("corpora.col_field"), tr("corpora.col_value")]),
                                label=text("corpora.card"), interactive=False)
            sample = gr.Markdown()
            gr.Markdown(text("corpora.tokenize_heading"))
            gr.Markdown(text("corpora.tokenize_intro"))
            with gr.Row():
                family = gr.Dropdown([(spec.title, spec.name) for spec in api.trainable_families()
                                      if spec.name in TOKENIZE_FAMILIES], value="gpt",
                                     label=text("corpora.tokenize_family"))
                preset = gr.Dropdown(list(api.TRAINING_PRESETS), value="tiny", label=text("corpora.tokenize_preset"))
            with gr.Row():
                tokenize = gr.Button(text("corpora.tokenize"), variant="primary", elem_id="corpora-tokenize")
                stop = gr.Button(text("corpora.tokenize_stop"), variant="stop", elem_id="corpora-tokenize-stop")
            progress = gr.HTML(tokenize_progress_html(None), elem_id="corpora-tokenize-progress")
            tokenize_status = gr.Markdown(elem_id="corpora-tokenize-status")
    job = gr.State(None)
    signature = gr.State(None)
    timer = gr.Timer(TOKENIZE_REFRESH_S)

    show.click(user_errors(view.card), corpus, [card, sample], api_name="corpus_card")
    corpus.change(user_errors(view.card), corpus, [card, sample], api_name="corpus_card_on_change")
    if tab is not None:
        tab.select(user_errors(view.card), corpus, [card, sample], api_name="corpus_card_on_select",
                   show_progress="hidden")
    upload.change(user_errors(view.inspect), upload, [column, upload_note], api_name="inspect_upload")
    imported = import_button.click(user_errors(view.import_file), [upload, name, column],
                                   [import_status, corpus, card, sample], api_name="import_corpus")
    look.click(user_errors(view.look), [server_path, server_column], server_status, api_name="look_server_corpus")
    linked = link.click(user_errors(view.link), [server_path, server_column, server_name],
                        [server_status, corpus, card, sample], api_name="link_server_corpus")
    tokenize.click(user_errors(view.tokenize), [corpus, family, preset], [job, progress, tokenize_status],
                   api_name="tokenize_corpus").then(None, None, timer, js=WAKE_TIMER_JS,
                                                    api_name="tokenizing_timer_on_start", show_progress="hidden")
    stop.click(user_errors(view.stop_tokenizing), job, [progress, tokenize_status], api_name="stop_tokenizing")
    # cheap when nothing changed (one small file read): outside Gradio's queue, as the Train tab's ticks
    timer.tick(view.tokenize_tick, [job, signature], [progress, tokenize_status, signature, timer],
               api_name="refresh_tokenizing", show_progress="hidden", queue=False)
    return TabParts(corpus_changes=(("", imported), ("_after_link", linked)))
