"""What the server writes, in the reader's language (app/i18n/language.py `tr`, `current_language`;
app/i18n/messages.py): every message the code builds is a literal template with its Chinese, the Chinese keeps each
template's named fields, a message is translated before it is formatted (its nested messages and a control's name
too), the language comes from the page's cookie or the browser's Accept-Language, and a Chinese reader of the running
page gets Chinese errors and Chinese status lines written by the trainer."""
from __future__ import annotations

import ast
import json
import re
import string
import subprocess
import sys

import gradio as gr
import pytest
from gradio_client import Client

from app.errors import user_errors
from app.i18n import language as i18n
from app.i18n import messages
from lab_models import api
from tests.support.launching import launch
from tests.support.message_templates import ROOT, all_sites, code_templates, message_classes, tree_sites

HAN = re.compile(r"[\u4e00-\u9fff]")
LETTERS = re.compile(r"[A-Za-z]")
FAMILY_NAMES = ("GPT-2", "BERT", "RoBERTa", "ALBERT", "SpanBERT", "ELECTRA", "XLNet", "MPNet", "UniLM", "MASS", "GLM",
                "T5", "ELMo", "CoVe", "ULMFiT", "CVT")


def fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def literal_text(template: str) -> str:
    return "".join(literal for literal, _, _, _ in string.Formatter().parse(template))


def sites_of(source: str, path: str = "lab_models/example.py"):
    """The message sites of a small example source (with the project's message classes)."""
    tree = ast.parse(source)
    names, own_init = message_classes({path: tree})
    return tree_sites(path, tree, names, own_init)


def raised_value_errors(tree: ast.AST) -> list[int]:
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
            and getattr(node.exc.func, "id", None) == "ValueError"]


def missing_chinese(templates, known) -> list[str]:
    return sorted(template for template in templates if template not in known)


def stale_chinese(known, templates) -> list[str]:
    return sorted(template for template in known if template not in templates)


CODE_TEMPLATES = code_templates()


# ------------------------------------------------------------------------------------------------ completeness
def test_every_message_template_is_a_string_literal():
    """A template built at run time (a variable, an f-string, a `+`) would escape the scan: the scan finds every
    message-building call and each has a literal template."""
    sites = all_sites()
    assert len(sites) > 1000 and sum("lab_models/" in site.path for site in sites) > 800  # the scan reads the code
    assert not [site for site in sites if site.template is None]
    example = sites_of('''
class TooBig(LabError):
    def __init__(self, size):
        super().__init__("{size} is too big", size=size)

def check(text, name):
    raise LabError(text)

def refuse(name):
    raise api.LabError(f"Unknown {name}", )

def noted(name):
    return Message("{name} is fine", name=name), TooBig(3), LabError.of(Message("ok")), Joined([], "; ")
''')
    assert sorted((site.line, site.template or "") for site in example) == [
        (4, "{size} is too big"), (7, ""), (10, ""), (13, "ok"), (13, "{name} is fine")]


def test_no_valueerror_is_raised_in_lab_models():
    """Bad input in the lab raises a LabError (a ValueError that keeps its template), never a bare ValueError."""
    found = {str(path.relative_to(ROOT)): lines for path in sorted((ROOT / "lab_models").rglob("*.py"))
             if (lines := raised_value_errors(ast.parse(path.read_text(encoding="utf-8"))))}
    assert found == {}
    assert raised_value_errors(ast.parse('def f(x):\n    raise ValueError(f"bad {x}")\n')) == [2]


def test_every_template_has_its_chinese_and_every_chinese_template_is_built_somewhere():
    known = messages.catalogue("zh")
    assert len(CODE_TEMPLATES) > 1000 and len(known) > 1000
    missing = missing_chinese(CODE_TEMPLATES, known)
    assert not missing, ("templates with no Chinese (add them to app/i18n/locales/zh/messages/*.json; "
                         f"`python -m tests.support.message_templates --missing` lists them): {json.dumps(missing)[:3000]}")
    stale = stale_chinese(known, CODE_TEMPLATES)
    assert not stale, f"Chinese for templates that no code builds (delete them): {json.dumps(stale)[:3000]}"
    assert missing_chinese({"Choose a corpus.", "zzz {x} never translated"}, known) == ["zzz {x} never translated"]
    assert stale_chinese({**known, "zzz {x} built nowhere": "某"}, CODE_TEMPLATES) == ["zzz {x} built nowhere"]


def test_the_settings_help_is_found_with_the_code():
    """Each setting's help is its Settings field's comment, a message too: it is found and has its Chinese."""
    assert "settings help: bert.mask_rate" in CODE_TEMPLATES["fraction of tokens picked for prediction"]
    assert sum(any(where.startswith("settings help:") for where in places) for places in CODE_TEMPLATES.values()) > 50


# ------------------------------------------------------------------------------------------------ the catalogue
def translation_problems(template: str, translation: str) -> list[str]:
    """What is wrong with one catalogue entry: no Chinese, other fields than the template's, a stray brace or a spec
    the fields cannot take, a family name dropped."""
    problems = []
    if LETTERS.search(literal_text(template)) and not HAN.search(translation):
        problems.append("no Chinese")
    try:
        if fields(translation) != fields(template):
            problems.append(f"fields {sorted(fields(translation))} != {sorted(fields(template))}")
        messages.FORMATTER.format(translation, **{name: SampleField() for name in fields(template)})
    except (KeyError, IndexError, ValueError) as error:
        problems.append(f"does not format: {error}")
    problems += [f"drops {family}" for family in FAMILY_NAMES
                 if re.search(rf"(?<![\w-]){re.escape(family)}(?![\w-])", literal_text(template))
                 and family not in translation]
    return problems


def test_each_translation_is_chinese_keeps_the_fields_and_the_family_names():
    wrong = [(path.name, template, problems) for path in messages.catalogue_files("zh")
             for template, translation in json.loads(path.read_text(encoding="utf-8")).items()
             if (problems := translation_problems(template, translation))]
    assert not wrong, wrong[:20]
    assert translation_problems("{run}: {error}", "{run}：{error}") == []  # punctuation only: no Chinese needed
    assert translation_problems("Choose {run}.", "请选择 {run}。") == []
    assert translation_problems("Choose {run}.", "Choose {run}.") == ["no Chinese"]
    assert translation_problems("BERT needs {run}.", "需要 {runs}。") == ["fields ['runs'] != ['run']",
                                                                      "does not format: 'runs'", "drops BERT"]
    assert translation_problems("{count:,} steps", "{count:,} 步 {")[0].startswith("does not format")


class SampleField(int):
    """A field value that every conversion and format spec of the catalogue accepts (a number that is also text)."""

    def __new__(cls):
        return super().__new__(cls, 1)

    def __format__(self, spec):
        try:
            return super().__format__(spec)
        except ValueError:
            return format("x", spec if spec != messages.CAPITALIZED else "")


def test_the_field_check_finds_a_lost_and_a_foreign_field():
    assert fields("{run}：{error}") == fields("{run}: {error}")
    assert fields("{run}：没有错误") != fields("{run}: {error}")
    assert fields("{run}：{errors}") != fields("{run}: {error}")


def test_each_template_has_one_home():
    """A template in two catalogue files would get whichever Chinese loads last: each lives in one file."""
    homes: dict[str, str] = {}
    for path in messages.catalogue_files("zh"):
        for template in json.loads(path.read_text(encoding="utf-8")):
            assert template not in homes, (template, homes.get(template), path.name)
            homes[template] = path.name


# ------------------------------------------------------------------------------------------------ translating
def test_a_message_is_translated_before_it_is_formatted_with_a_control_name_and_a_nested_message():
    error = api.LabError("{name} must be a whole number from {low:,} to {high:,}, got {value!r}.",
                         name=api.Message("Steps"), low=1, high=10_000, value=2.5)
    assert messages.translate(error, "en") == "Steps must be a whole number from 1 to 10,000, got 2.5." == str(error)
    assert messages.translate(error, "zh") == "步数必须是 1 到 10,000 之间的整数，收到的是 2.5。"
    # a message inside a message, behind a run's name, in a list joined the language's way
    refused = api.LabError("Choose a corpus.")
    nothing = api.LabError("Nothing was started. {problems}", problems=api.Joined(
        [api.Message("{run}: {error}", run="gpt-1", error=refused), api.Message("{run}: {error}", run="bert-2",
                                                                                 error=refused)], " "))
    assert str(nothing) == "Nothing was started. gpt-1: Choose a corpus. bert-2: Choose a corpus."
    assert messages.translate(nothing, "zh") == "没有启动任何微调。gpt-1：请选择一个语料库。bert-2：请选择一个语料库。"
    # a field that only looks like a message (what the user typed) stays as it is
    typed = api.LabError("Unknown family {name!r}: choose one of {families}.", name="Choose a corpus.",
                         families="gpt")
    assert messages.translate(typed, "zh") == "未知的模型家族 'Choose a corpus.'：可选 gpt。"


def test_explanations_are_joined_with_the_languages_joiner():
    explanation = api.Joined([api.Message("greedy"), api.Message("stopped at {token}", token="[EOS]")], "; ")
    assert messages.translate(explanation, "en") == "greedy; stopped at [EOS]"
    assert messages.translate(explanation, "zh") == "贪心；在 [EOS] 处停止"


def test_a_plain_text_is_looked_up_whole_and_a_library_error_keeps_its_english_behind_a_lead():
    assert messages.translate("general LM pretraining", "zh") == "通用语言模型预训练"  # a stage name from metrics.jsonl
    assert messages.translate("zzz qqq: nothing like this", "zh") == "zzz qqq: nothing like this"  # shown as it is
    library = messages.translate(KeyError("missing_key"), "zh")
    assert library.endswith("'missing_key'") and library.startswith("出错了（原文为英文）")
    assert messages.translate(KeyError("missing_key"), "en") == "'missing_key'"
    wrapped = messages.translate(api.LabError.of("expected str, got int"), "zh")
    assert wrapped == "出错了（原文为英文）：expected str, got int"


def test_a_message_keeps_its_template_through_a_file_and_a_pickle():
    import pickle

    message = api.Message("{what} is empty: type some text for the model to start from", what=api.Message("the prompt"))
    restored = api.Message.from_record(json.loads(json.dumps(message.to_record())))
    assert restored == message and restored.template == message.template
    assert messages.translate(restored, "zh") == messages.translate(message, "zh") and HAN.search(
        messages.translate(restored, "zh"))
    error = pickle.loads(pickle.dumps(api.LabError.of(message)))
    assert isinstance(error, api.LabError) and messages.translate(error, "zh") == messages.translate(message, "zh")


# ------------------------------------------------------------------------------------------------ the language
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


# ------------------------------------------------------------------------------------------------ the running page
@pytest.mark.slow
def test_a_chinese_reader_of_the_running_page_gets_chinese_errors():
    """A real Gradio server: the same handlers' errors in English without a language, in Chinese with the page's
    cookie or a Chinese browser's Accept-Language (queued and unqueued events alike): a control's name translated
    inside the message, and a run's failure nested in another message."""
    def steps(value):
        from app.inputs import whole_number
        return whole_number(value, api.Message("Steps"), 5, 1, 100)

    def start(value):
        problem = api.Message("{run}: {error}", run="gpt-1", error=api.LabError("Choose a corpus."))
        raise api.LabError("Nothing was started. {problems}", problems=api.Joined([problem], " "))

    with gr.Blocks() as demo:
        box, out = gr.Textbox(), gr.Number()
        box.submit(user_errors(steps), box, out, api_name="steps")
        box.change(user_errors(steps), box, out, api_name="steps_unqueued", queue=False)
        box.blur(user_errors(start), box, out, api_name="start")
    launch(demo, prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
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
                assert ("步数必须是 1 到 100 之间的整数" in message) == chinese, (headers, api_name, message)
                assert ("Steps must be a whole number" in message) != chinese, message
            with pytest.raises(Exception) as caught:
                client.predict("x", api_name="/start")
            expected = "没有启动任何微调。gpt-1：请选择一个语料库。" if chinese else \
                "Nothing was started. gpt-1: Choose a corpus."
            assert expected in str(caught.value), (headers, str(caught.value))
    finally:
        demo.close()


@pytest.mark.slow
def test_a_status_line_the_trainer_writes_reads_chinese(tmp_path):
    """The trainer, a process of its own, writes status.json; the page reads it back with the message's template and
    shows it in Chinese. A status file with no record (an older lab's) still reads, in English."""
    home = tmp_path / "home"
    run_dir = home / "runs" / "gpt-tiny-status"
    done = subprocess.run([sys.executable, "-m", "lab_models", "train", "--family", "gpt", "--preset", "tiny",
                           "--steps", "2", "--eval-every", "1000", "--device", "cpu", "--out", str(run_dir),
                           "--home", str(home)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env={**__import__("os").environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads((run_dir / "status.json").read_text(encoding="utf-8"))
    assert written["message"] == "finished 2 steps" and written["message_record"]["template"] == \
        "finished {steps} steps"
    status = api.RunStore(home).status(run_dir.name)
    assert messages.translate(status["message"], "en") == "finished 2 steps"
    assert messages.translate(status["message"], "zh") == "已完成 2 步"
    written.pop("message_record")
    (run_dir / "status.json").write_text(json.dumps(written), encoding="utf-8")
    old = api.RunStore(home).status(run_dir.name)["message"]
    assert old == "finished 2 steps" and messages.translate(old, "zh") == "finished 2 steps"
