"""The header's language switch keeps what the page drew, then draws it again in the new language.

Gradio 6.31 remembers the translation marker of a value it translated and, at the next change of language, puts that
marker's text back, even after an event has replaced the value: Compare's answers turned into the empty note. The
fix (app/gradio_fixes.py, `with_set_data_fix`) forgets the marker when an update sets a value without one. A view
computed by a button (Compare's answers, the Leaderboard's ranking, each Understand view) keeps the inputs it was
computed with and is computed again after the switch (app/display.py `redrawn_on_language_switch`); the browser test
(tests/app/test_browser.py) watches both on a page."""
from __future__ import annotations

import json
import shutil
import subprocess

import gradio as gr
import pytest

from app.display import redrawn_on_language_switch
from app.gradio_fixes import SET_DATA_SHAPE, with_set_data_fix
from app.main import build_app

from tests.support.gradio_bundles import fixed_once

# Gradio 6.31's set_data, as its bundle writes it (SET_DATA_SHAPE), closed so that node can run it
GRADIO_SET_DATA = (b"set_data(e){for(let t in e){let n=e[t],r=D(n)?this._translate_and_store(this.shared_props."
                   b"includes(t)?`shared`:`props`,t,n):n;if(this.shared_props.includes(t)){let e=t;this.shared[e]=r;"
                   b"continue}this.props[t]=r}}")


def test_the_set_data_fix_matches_gradios_method_once_and_nothing_else():
    fixed_once(SET_DATA_SHAPE, with_set_data_fix, "src")
    assert SET_DATA_SHAPE.search(GRADIO_SET_DATA)  # the stand-in below is Gradio's method


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("fixed", [True, False])
def test_a_value_an_event_drew_is_not_put_back_by_the_next_change_of_language(fixed):
    """Gradio's component state, cut to what set_data and a change of language do, run in node: a value drawn from a
    marker, then replaced by an event's answer, then the language changes."""
    method = (with_set_data_fix(GRADIO_SET_DATA) if fixed else GRADIO_SET_DATA).decode()
    script = """
const D = (value) => typeof value === "string" && value.includes("__i18n__");
const texts = {en: {"compare.empty": "Pick runs"}, zh: {"compare.empty": "选择运行"}};
let language = "en";
class Component {
  constructor() { this.props = {}; this.shared = {}; this.shared_props = ["label"]; this.translatable_props = {}; }
  i18n(marker) { return texts[language][JSON.parse(marker.slice(8)).key]; }
  _translate_and_store(scope, name, value) {
    const text = this.i18n(value); this.translatable_props[`${scope}.${name}`] = value; return text; }
  relanguage() {  // Gradio's subscription to its locale: every remembered marker translated again
    for (const [key, marker] of Object.entries(this.translatable_props)) {
      const [scope, name] = key.split("."); this[scope][name] = this.i18n(marker); } }
  %s
}
const output = new Component();
output.set_data({value: '__i18n__{"key":"compare.empty"}'});
const first = output.props.value;
output.set_data({value: "<div>four answers</div>"});
language = "zh"; output.relanguage();
process.stdout.write(JSON.stringify([first, output.props.value]));
""" % method
    run = subprocess.run(["node", "-e", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    first, after_switch = json.loads(run.stdout)
    assert first == "Pick runs"
    assert after_switch == ("<div>four answers</div>" if fixed else "选择运行")  # Gradio's own: the answer lost


def test_a_computed_view_is_computed_again_from_the_inputs_it_was_last_pressed_with():
    calls = []

    def answer(word):
        calls.append(word)
        if word == "bad":
            raise ValueError("not a word")
        return f"<{word}>"

    def rank(word, count):
        return f"{word} x{count}"

    with gr.Blocks() as demo:
        box, count, out = gr.Textbox(), gr.Number(), gr.HTML()
        button, other = gr.Button(), gr.Button()
        redrawn_on_language_switch("view", out, (answer, box, [button.click, box.submit]),
                                   (rank, [box, count], [other.click]))
    events = {dependency.api_name: dependency for dependency in demo.fns.values()}
    kept, kept_other, again = events["view_inputs_kept"], events["view_inputs_kept_1"], events["view_on_language_switch"]
    assert [target[1] for target in kept.targets] == ["click", "submit"]
    assert again.fn(None) == gr.skip() and calls == []  # nothing computed yet: nothing drawn
    assert again.fn(kept.fn("cat")) == "<cat>" and calls == ["cat"]
    assert again.fn(kept_other.fn("cat", 3)) == "cat x3"  # the last button pressed, with its own inputs
    assert again.fn(kept.fn("bad")) == gr.skip()  # failing again leaves the old drawing, with no error


def test_every_computed_view_of_the_page_is_drawn_again_after_the_switch(tmp_path):
    demo = build_app(tmp_path)
    try:
        names = {dependency.api_name for dependency in demo.fns.values()}
    finally:
        demo.lab_jobs.close()
        demo.lab_tokenize_jobs.close()
    views = ["compare_answers", "leaderboard_table", "understand_fill_mask", "understand_similarity",
             "understand_attention", "understand_sentences", "understand_probe", "understand_lens",
             "understand_attributions", "understand_routing"]
    for view in views:  # when its tab is shown at the switch, and when its tab is opened later
        assert {f"{view}_after_language_switch", f"{view}_on_stale_select"} <= names, view
