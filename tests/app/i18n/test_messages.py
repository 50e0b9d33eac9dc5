"""What the server writes, in the reader's language (app/i18n/language.py `tr`, `current_language`;
app/i18n/messages.py): every message the code raises has its Chinese, the Chinese keeps each message's fields, the
language comes from the page's cookie or the browser's Accept-Language, and a Chinese reader of the running page gets
Chinese errors."""
from __future__ import annotations

import json
import re
import string

import gradio as gr
import pytest
from gradio_client import Client

from app.errors import user_errors
from app.i18n import language as i18n
from app.i18n import messages
from tests.support.message_templates import all_templates

HAN = re.compile(r"[\u4e00-\u9fff]")
FAMILY_NAMES = ("GPT-2", "BERT", "RoBERTa", "ALBERT", "SpanBERT", "ELECTRA", "XLNet", "MPNet", "UniLM", "MASS", "GLM",
                "T5", "ELMo", "CoVe", "ULMFiT", "CVT")


def _fields(translation: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(translation) if name is not None]


def test_every_raised_message_has_its_chinese():
    known = messages.catalogue("zh")
    missing = {path: [t for t in templates if t not in known and messages.fixed_chars(t) >= messages.MIN_FIXED_CHARS]
               for path, templates in all_templates().items()}  # "{}: {}" says nothing of its own to translate
    missing = {path: templates for path, templates in missing.items() if templates}
    assert sum(len(t) for t in all_templates().values()) > 500  # the extractor still finds the backend's messages
    assert not missing, ("English messages with no Chinese (add them to app/i18n/locales/zh/messages/*.json; "
                         f"`python -m tests.support.message_templates --missing` lists them): {json.dumps(missing)[:3000]}")


def test_each_translation_is_chinese_keeps_the_fields_and_the_family_names():
    for path in messages.catalogue_files("zh"):
        for template, translation in json.loads(path.read_text(encoding="utf-8")).items():
            where = f"{path.name}: {template!r}"
            assert HAN.search(translation), where
            fields = _fields(translation)
            assert len(fields) == template.count(messages.FIELD), where
            assert all(f == "" for f in fields) or sorted(fields) == [str(i) for i in range(len(fields))], where
            translation.format(*(["x"] * len(fields)))  # no stray brace
            for family in FAMILY_NAMES:
                if re.search(rf"(?<![\w-]){re.escape(family)}(?![\w-])", template):
                    assert family in translation, (where, family)


def test_a_message_is_translated_with_its_fields_and_a_nested_message():
    catalogue = messages.catalogue("zh")
    template = "{} must be a whole number from {} to {}, got {}."
    assert template in catalogue
    chinese = messages.translate_message("Steps must be a whole number from 1 to 10,000, got 2.5.", "zh")
    assert chinese == "步数必须是 1 到 10,000 之间的整数，收到的是 2.5。"  # the control's name is translated too
    # a message behind a name (a run's, a family's) keeps the name; a message inside a message is translated
    assert messages.translate_message("BERT: Tick at least one family to draw.", "zh") == "BERT：请至少勾选一个模型家族来绘制。"
    nested = messages.translate_message("Nothing was started. gpt-1: Choose a corpus.", "zh")
    assert nested == "没有启动任何微调。gpt-1：请选择一个语料库。"
    # English readers (and API clients that send no language) read the message as the backend wrote it
    english = "Steps must be a whole number from 1 to 10,000, got 2.5."
    assert messages.translate_message(english, "en") == english


def test_a_message_with_no_template_keeps_its_english_behind_a_chinese_lead():
    text = messages.translate_message("zzz qqq: nothing like this is raised anywhere", "zh")
    assert text.endswith("zzz qqq: nothing like this is raised anywhere") and HAN.search(text)


def test_the_language_comes_from_the_cookie_then_accept_language():
    class Request:
        def __init__(self, cookies=None, headers=None):
            self.cookies, self.headers = cookies or {}, headers or {}

    assert i18n.request_language(None) == "en"
    assert i18n.request_language(Request()) == "en"
    assert i18n.request_language(Request(headers={"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"})) == "zh"
    assert i18n.request_language(Request(headers={"accept-language": "en-US,zh;q=0.5"})) == "en"
    assert i18n.request_language(Request({"lab_language": "en"}, {"Accept-Language": "zh-CN"})) == "en"
    assert i18n.request_language(Request({"lab_language": "zh"})) == "zh"
    assert i18n.request_language(Request({"lab_language": "fr"})) == "en"


def test_tr_writes_the_readers_language():
    assert i18n.tr("header.tab_train") == "Train"
    with i18n.reading_language("zh"):
        assert i18n.tr("header.tab_train") == "训练"
        assert "boom" in i18n.tr("header.unexpected_error", handler="h", error="boom")
    with pytest.raises(ValueError, match="Unknown language"):
        with i18n.reading_language("fr"):
            pass


@pytest.mark.slow
def test_a_chinese_reader_of_the_running_page_gets_chinese_errors():
    """A real Gradio server: the same handler's error in English without a language, in Chinese with the page's
    cookie or a Chinese browser's Accept-Language (queued and unqueued events alike)."""
    def steps(value):
        from app.inputs import whole_number
        return whole_number(value, "Steps", 5, 1, 100)

    with gr.Blocks() as demo:
        box, out = gr.Textbox(), gr.Number()
        box.submit(user_errors(steps), box, out, api_name="steps")
        box.change(user_errors(steps), box, out, api_name="steps_unqueued", queue=False)
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
    try:
        for headers, chinese in (({}, False), ({"Cookie": "lab_language=zh"}, True),
                                 ({"Accept-Language": "zh-CN,zh;q=0.9"}, True),
                                 ({"Cookie": "lab_language=en", "Accept-Language": "zh-CN"}, False)):
            client = Client(demo.local_url, headers=headers, verbose=False)
            for api_name in ("/steps", "/steps_unqueued"):
                with pytest.raises(Exception) as caught:
                    client.predict("2.5", api_name=api_name)
                message = str(caught.value)
                assert "2.5" in message, message
                assert bool(HAN.search(message)) == chinese, (headers, api_name, message)
                assert ("must be a whole number" in message) != chinese, message
    finally:
        demo.close()


def test_every_template_is_the_one_its_own_messages_pick():
    """A message made from a template (its fields filled with a marker) is translated by that template's Chinese:
    no more general template takes it first (the matcher prefers the most fixed text)."""
    catalogue = messages.catalogue("zh")
    wrong = []
    for template, chinese in catalogue.items():
        if messages.fixed_chars(template) < messages.MIN_FIXED_CHARS:
            continue
        sample = template.replace(messages.FIELD, "Q7x")
        if messages.translate_message(sample, "zh") != chinese.format(*(["Q7x"] * template.count(messages.FIELD))):
            wrong.append(template)
    assert len(catalogue) > 100 and not wrong, wrong[:20]


def test_each_template_has_one_home():
    """A template in two catalogue files would get whichever Chinese loads last: each lives in one file."""
    homes: dict[str, str] = {}
    for path in messages.catalogue_files("zh"):
        for template in json.loads(path.read_text(encoding="utf-8")):
            assert template not in homes, (template, homes.get(template), path.name)
            homes[template] = path.name
