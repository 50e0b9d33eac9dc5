"""The page's two languages (app/i18n/language.py, app/i18n/locales/): every text the UI code asks for exists in English
and in Chinese, both languages have the same texts, and the I18n handed to `launch` carries them."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import gradio as gr
import pytest

from app.i18n import language as i18n

APP = Path(__file__).resolve().parents[3] / "app"


def _keys_used_in_app() -> dict[str, str]:
    """Every literal key passed to `text(...)`, `marker(...)` or `tr(...)` in app/ (its packages too) -> the file that
    uses it."""
    used = {}
    for path in sorted(APP.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("text", "marker", "tr")
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                used[node.args[0].value] = str(path.relative_to(APP))
    return used


def _all_keys(language: str) -> set[str]:
    return {f"{area}.{name}" for area, entries in i18n.translations()[language].items() for name in entries}


def test_every_key_the_page_uses_is_in_both_languages():
    used = _keys_used_in_app()
    assert len(used) >= 10  # the header alone asks for ten
    for language in i18n.LANGUAGES:
        missing = sorted(f"{key} ({where})" for key, where in used.items() if key not in _all_keys(language))
        assert not missing, f"{language} lacks: {missing}"


def test_both_languages_have_the_same_texts_and_none_is_empty():
    english, chinese = _all_keys("en"), _all_keys("zh")
    assert english == chinese, {"only English": sorted(english - chinese), "only Chinese": sorted(chinese - english)}
    for language in i18n.LANGUAGES:
        for area, entries in i18n.translations()[language].items():
            assert all(value.strip() for value in entries.values()), (language, area)


def test_chinese_texts_are_chinese_and_keep_the_paper_terms():
    chinese = i18n.translations()["zh"]
    assert re.search(r"[\u4e00-\u9fff]", chinese["header"]["tab_train"])
    for area, entries in chinese.items():
        for name, value in entries.items():
            english = i18n.translations()["en"][area][name]
            # a family name in the English stays as the paper writes it in the Chinese
            for family in ("GPT-2", "BERT", "RoBERTa", "ELECTRA", "XLNet", "UniLM", "T5", "Switch"):
                if re.search(rf"\b{re.escape(family)}\b", english):
                    assert family in value, (area, name, family)


def test_text_refuses_a_key_english_lacks():
    with pytest.raises(KeyError, match="app/i18n/locales/en/header.json"):
        i18n.text("header.no_such_text")


def test_launch_gets_both_languages_for_every_chinese_browser_tag():
    from app.main import launch_kwargs

    table = launch_kwargs()["i18n"].translations_dict
    assert table["en"]["header"]["tab_train"] == "Train"
    for tag in ("zh", "zh-CN", "zh-TW"):
        assert table[tag]["header"]["tab_train"] == "训练"


def test_locale_files_are_flat_objects_of_text(tmp_path, monkeypatch):
    (tmp_path / "en").mkdir()
    (tmp_path / "en" / "bad.json").write_text(json.dumps({"nested": {"a": "b"}}), encoding="utf-8")
    monkeypatch.setattr(i18n, "LOCALES", tmp_path)
    with pytest.raises(ValueError, match="one JSON object of name -> text"):
        i18n._read_language("en")


@pytest.mark.slow
def test_every_page_load_redraw_runs_again_after_the_language_switch(tmp_path):
    """What the server draws when the page loads (the Mask Explorer, the runs and settings tables, empty plots, the
    modes table, ...) is drawn again after the header's switch, so a page never keeps both languages: the header at
    once, a tab's views by its hidden redraw button, which the switch clicks for the shown tab, and again (another
    button) when a tab drawn in the other language is selected."""
    from app.main import build_app

    demo = build_app(tmp_path)
    try:
        names = {dependency.api_name: dependency for dependency in demo.fns.values() if dependency.api_name}
        switch = names["switch_language"]._id
        on_load = {name for name, dependency in names.items() if name.endswith("_on_load") and dependency.fn}
        assert {"explore_masks_on_load", "list_runs_on_load", "zoo_panel_on_load", "header_on_load"} <= on_load
        clicker = names["redraw_shown_tab_after_language_switch"]
        assert clicker.fn is None and clicker.trigger_after == switch and "-redraw-now" in clicker.js
        for name in on_load:
            base = name.removesuffix("_on_load")
            again = names[base + "_after_language_switch"]
            assert again.fn is names[name].fn and list(again.outputs) == list(names[name].outputs)
            if name == "header_on_load":  # outside every tab: right after the switch
                assert again.trigger_after == switch
                continue
            (button_id, event), = again.targets
            button = demo.blocks[button_id]
            assert event == "click" and isinstance(button, gr.Button)
            (now_class,) = button.elem_classes
            assert now_class.endswith("-redraw-now") and button.elem_id.startswith(now_class + "-")
            panel = now_class.removesuffix("-redraw-now")
            assert json.dumps(panel) in clicker.js  # the switch clicks it when its tab is shown
            # one trigger per event: Gradio runs one trigger's listeners one after another
            assert [d.api_name for d in demo.fns.values() if (button_id, "click") in d.targets] == [again.api_name]
            stale = names[base + "_on_stale_select"]
            assert stale.fn is names[name].fn and list(stale.outputs) == list(names[name].outputs)
            (stale_id, _), = stale.targets
            assert stale_id != button_id and demo.blocks[stale_id].elem_classes == [f"{panel}-redraw-stale"]
            assert names[f"redraw_{panel.replace('-', '_')}_if_stale"].js.count(f".{panel}-redraw-stale") == 1
        # a tab's own select events run on its select anyway: only the switch reruns them, never a stale select
        assert "compare_runs_on_select_after_language_switch" in names
        assert "compare_runs_on_select_on_stale_select" not in names
    finally:
        demo.lab_jobs.close()
        demo.lab_tokenize_jobs.close()


def test_the_header_names_the_device_in_the_readers_language():
    from app.main import header_html_for_reader

    assert "compute device: CPU (" in header_html_for_reader() and " threads)" in header_html_for_reader()
    with i18n.reading_language("zh"):
        assert re.search(r"计算设备：CPU（\d+ 个线程）", header_html_for_reader())


def test_an_examples_table_is_written_in_the_readers_language_and_keeps_its_values():
    """Gradio shows an examples table's headers and a Radio's choice labels as built (English, not raw markers); the
    load event's update writes them in the reader's language, and the values a click sends stay the same."""
    with gr.Blocks():
        prompt = gr.Textbox(label=i18n.text("compare.prompt_label"))
        mode = gr.Radio([(i18n.text("compare.mode_continue"), "continuation")], label=i18n.text("compare.mode_label"))
        examples = gr.Examples([["the cat", "continuation"]], [prompt, mode])
        for_reader = i18n.reader_examples(examples)
    assert examples.dataset.headers == [i18n.english("compare.prompt_label"), i18n.english("compare.mode_label")]
    with i18n.reading_language("zh"):
        update = for_reader()
    assert update.headers == [i18n.translations()["zh"]["compare"]["prompt_label"],
                              i18n.translations()["zh"]["compare"]["mode_label"]]
    assert update.component_props[1]["choices"] == [(i18n.translations()["zh"]["compare"]["mode_continue"],
                                                     "continuation")]
    assert examples.dataset.samples == [["the cat", "continuation"]]
    json.dumps(update.component_props)  # plain JSON, as an API client's /call/ route sends it (no marker objects)
    assert update.component_props[0]["label"] == i18n.translations()["zh"]["compare"]["prompt_label"]
