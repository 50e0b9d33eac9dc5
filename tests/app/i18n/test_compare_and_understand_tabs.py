"""What the server writes into the Compare and Understand tabs, in the reader's language (app/i18n/language.py `tr`,
app/i18n/messages.py): figures' titles, axes, hover texts and empty-plot notes, table headers, column texts,
progress lines, picker entries and the backend's explanations read Chinese for a Chinese reader and exactly as before
for everyone else. Unit tests of the builders first, then the endpoints of a running app with and without the page's
language cookie."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from gradio_client import Client

from app.compare import figures as compare_figures, tab as compare_tab
from app.i18n.messages import translate
from app.i18n.language import reading_language
from app.tokenizer_lab import figures as chips
from app.understand import routing_panel, similarity_panel as sentence_similarity_panel, tab as understand_tab
from lab_models import api

from app.understand.figures import (attention_figure, fill_mask_figure, fill_mask_table, layer_title,
                                    projection_figure, run_label, similarity_figure, similarity_table, stream_title)

from tests.support.tiny_runs import SENTENCE, train_tiny_runs

HAN = re.compile(r"[\u4e00-\u9fff]")
# as the backend writes it (lab_models/inference/generation/): clauses, each a message
EXPLANATION = api.Joined([api.Message("left to right {cache}, after [EOS] (a document start)",
                                      cache=api.Message("with a KV cache")),
                          api.Message("greedy"), api.Message("stopped at {token}", token="[EOS]")], "; ")
TOO_LONG = api.Message("{what} is {n} tokens long, but this {title} model can read at most {limit} tokens here (it has "
                       "{max_positions} positions): shorten it", what=api.Message("the prompt"), n=300, title="GPT",
                       limit=126, max_positions=128)


def generation(**changes):
    """An `api.Generation` as the Compare tab's columns read it."""
    fields = dict(run_id="gpt-x", family="gpt", mode="continue", supported=True, explanation=EXPLANATION,
                  prompt="the cat", text="the cat sees a", new_text=" sees a", tokens=[" sees", " a"],
                  probs=[0.5, 0.25], seconds=0.01, ms_per_token=3.1, step=300)
    return SimpleNamespace(**{**fields, **changes})


# ------------------------------------------------------------------------------------------------ Compare
def test_a_compare_column_reads_chinese_for_a_chinese_reader_and_as_before_otherwise():
    english = compare_figures.generation_column_html(generation(), title="GPT", val_bits_per_byte=1.5884)
    assert "step 300 · val <b>1.588</b> bits/byte" in english and 'title="run id"' in english
    assert "<b>2</b> tokens · <b>3.1</b> ms/token" in english and f">{EXPLANATION}</div>" in english
    assert '<span class="cmp-mode">continuation</span>' in english
    with reading_language("zh"):
        chinese = compare_figures.generation_column_html(generation(), title="GPT", val_bits_per_byte=1.5884)
        grid = compare_figures.grid_html([chinese], prompt="the cat")
        empty = compare_figures.grid_html([])
    assert "第 300 步 · 验证 <b>1.588</b> bits/byte" in chinese and 'title="运行 ID"' in chinese
    assert "<b>2</b> 个 token · <b>3.1</b> ms/token" in chinese
    assert ">从左到右，使用 KV 缓存，从 [EOS]（文档开头）之后开始；贪心；在 [EOS] 处停止</div>" in chinese
    assert '<span class="cmp-mode">续写</span>' in chinese and "gpt-x" in chinese and "GPT" in chinese
    assert "<span>提示</span> the cat" in grid and "每个生成的 token 被选中时的概率" in grid
    assert '<span class="cmp-context">灰色</span> = 你的提示' in grid
    assert "hover" not in grid and "probability" not in grid  # no English word of the app's left
    assert "选择最多 4 个运行" in empty


def test_a_refusing_family_and_a_refused_input_explain_themselves_in_chinese():
    refusal = generation(mode="infill", supported=False, tokens=[], probs=[], text="",
                         explanation=api.Message("{title} reads left to right only and never sees the text after a "
                                                 "blank; try Continue.", title="GPT"))
    message = TOO_LONG
    english = compare_figures.generation_column_html(refusal, title="GPT")
    assert "<b>GPT cannot do infilling.</b> GPT reads left to right only" in english
    assert "The prompt is 300 tokens long" in compare_figures.error_column_html("gpt-x", message, title="GPT")
    with reading_language("zh"):
        chinese = compare_figures.generation_column_html(refusal, title="GPT")
        error = compare_figures.error_column_html("gpt-x", message, title="GPT", step=300)
        unknown = compare_figures.error_column_html("gpt-x", api.as_message("zzz: nothing like this is written "
                                                                            "anywhere"))  # a library's error
    assert "<b>GPT 不支持“填空”模式。</b> GPT 只从左往右读，看不到空后面的文本；请试试“续写”。" in chinese
    assert "提示词有 300 个 token，但这个 GPT 模型在这里最多只能读 126 个 token（它有 128 个位置）：请缩短" in error
    assert "第 300 步" in error and "尚无验证结果" in error
    # a message with no Chinese keeps its English behind a Chinese lead; the fallback title is a word too
    assert HAN.search(unknown) and "zzz: nothing like this is written anywhere" in unknown and ">运行<" in unknown


def test_when_every_run_refuses_the_same_way_the_pages_error_is_translated_before_its_capital():
    """The backend's messages may start in lower case: the page's error capitalizes the English (its template's
    `capitalized` field), and its translation is the message's Chinese."""
    english = compare_tab.refusal(TOO_LONG)
    assert isinstance(english, ValueError) and str(english).startswith("The prompt is 300 tokens long")
    assert translate(english, "zh").startswith("提示词有 300 个 token")


def test_the_modes_table_and_the_picker_entries_speak_the_readers_language():
    rows = [("GPT", ["continue"]), ("T5", ["infill", "translate"])]
    modes = ["continue", "infill", "mask_predict", "translate"]
    assert compare_figures.modes_table_markdown(rows, modes).splitlines()[0] == \
        "| family | continuation | infilling | mask-predict | translation |"
    row = {"run_id": "r", "family": "gpt", "step": 1500, "weights_step": 1400}
    assert compare_tab.run_label(row) == "r · gpt · step 1,500"
    with reading_language("zh"):
        table = compare_figures.modes_table_markdown(rows, modes).splitlines()
        assert table[0] == "| 模型家族 | 续写 | 填空 | mask-predict | 翻译 |"
        assert table[3] == "| T5 | · | ✓ 默认 | · | ✓ |"
        assert compare_tab.run_label(row) == "r · gpt · 第 1,500 步"
        assert run_label(row) == "r · gpt · 第 1,400 步的检查点"  # its weights are a checkpoint behind its step
        assert run_label(dict(row, weights_step=1500)) == "r · gpt · 第 1,500 步"
        assert "| 模型家族 |" in compare_tab.modes_markdown()


def test_a_refused_decoding_value_names_the_control_the_reader_sees():
    with pytest.raises(ValueError, match="^Temperature must be a number"):
        compare_tab.decoding_options("sample", "hot", 0, 1.0, 4, 20, 0, 10, 0)
    with reading_language("zh"), pytest.raises(ValueError, match="^温度 must be a number") as caught:
        compare_tab.decoding_options("sample", "hot", 0, 1.0, 4, 20, 0, 10, 0)
    assert "'hot'" in str(caught.value)


# ------------------------------------------------------------------------------------------------ explanations
def test_explanations_are_translated_clause_by_clause():
    assert translate(EXPLANATION) == str(EXPLANATION) == ("left to right with a KV cache, after [EOS] (a document "
                                                          "start); greedy; stopped at [EOS]")  # outside a handler
    with reading_language("zh"):
        # a field that is a message is translated too (the plan's cache text, the model part of a probe note)
        note = api.Message("{view}. UniLM's bidirectional mode.", view=api.Message(
            "{part}, full attention (every token sees every token)", part=api.Message("the model")))
        assert translate(note) == "模型，全注意力（每个 token 都看到所有 token）。UniLM 的双向模式。"
        # a clause that is no message keeps its English, with no lead-in; the messages around it are translated
        clauses = api.Joined([api.Message("greedy"), "zzz unknown clause",
                              api.Message("stopped after {n} tokens (max_new_tokens)", n=7)], "; ")
        assert translate(clauses) == "贪心；zzz unknown clause；写了 7 个 token 后停止（max_new_tokens）"
        # clauses inside clauses (a plan's own several) read as one list
        plan = api.Joined([api.Message("English -> Chinese: the encoder reads the English{prefix}, the decoder writes "
                                       "from {start} until [EOS], {cache}", prefix="", start="[BOS]",
                                       cache=api.Message("with a KV cache")),
                           api.Message("this run trained translation (weight {weight:g})", weight=1.0)], "; ")
        decoded = api.Joined([plan, api.Message("beam search with {beam_size} beams", beam_size=4),
                              api.Message("stopped at {token}", token="[EOS]")], "; ")
        assert str(decoded).startswith("English -> Chinese: the encoder reads the English, the decoder writes from "
                                       "[BOS] until [EOS], with a KV cache; this run trained translation (weight 1); ")
        assert translate(decoded) == ("英译中：编码器读取英文，解码器从 [BOS] 写到 [EOS]，使用 KV 缓存；这个运行训练过翻译（权重 1）；"
                                      "束搜索，4 个束；在 [EOS] 处停止")
    assert translate(EXPLANATION, "zh").endswith("在 [EOS] 处停止")


# ------------------------------------------------------------------------------------------------ Understand
FILL_RESULTS = [{"run_id": "bert-x", "family": "bert", "title": "BERT", "step": 30, "slots": [[[" cat", 0.5]]]},
                {"run_id": "gpt-x", "family": "gpt", "title": "GPT", "step": 30,
                 "error": api.Message("{title} cannot fill a [MASK]; use a BERT-style run", title="GPT")}]


def _annotations(figure) -> str:
    """The figure's notes as one text, their line breaks undone (a Chinese line breaks between two characters)."""
    text = " ".join(annotation.text for annotation in figure.layout.annotations)
    return re.sub(r"(?<=[\u3000-\u9fff\uff00-\uffef])<br>(?=[\u3000-\u9fff\uff00-\uffef])", "", text).replace("<br>", " ")


def test_fill_mask_figure_and_table_in_chinese_keep_the_data():
    assert "BERT · bert-x · step 30" in _annotations(fill_mask_figure(FILL_RESULTS))
    assert list(fill_mask_table(FILL_RESULTS).columns) == ["slot", "rank", "bert-x", "gpt-x"]
    with reading_language("zh"):
        figure = fill_mask_figure(FILL_RESULTS)
        table = fill_mask_table(FILL_RESULTS)
        empty = fill_mask_figure([])
    texts = _annotations(figure)
    assert "BERT · bert-x · 第 30 步" in texts and "[MASK] 1" in texts
    assert "GPT 无法填充 [MASK]；请使用 BERT 式的运行" in texts.replace("<br>", "")
    assert list(table.columns) == ["空位", "名次", "bert-x", "gpt-x"]  # run ids stay: they are data
    assert table.iloc[0]["bert-x"] == "cat (0.500)" and table.iloc[0]["gpt-x"].startswith("GPT 无法填充")
    assert "选择最多 4 个运行" in _annotations(empty)


def _similarity_frame() -> pd.DataFrame:
    return pd.DataFrame([["bert-x", "bert", 0, "embeddings", 1.0, "apple", "apple"],
                         ["bert-x", "bert", 1, "block 1", 0.8, "apple", "apple"]],
                        columns=["run", "family", "layer", "layer_name", "cosine", "pieces_a", "pieces_b"])


def test_similarity_figure_and_table_in_chinese():
    english = similarity_figure(_similarity_frame(), "apple")
    assert english.layout.title.text == "Similarity of “apple” in A and B, layer by layer"
    assert english.layout.xaxis.title.text == "layer (0 = embeddings)"
    assert list(similarity_table(_similarity_frame()).columns) == ["run", "family", "embeddings", "block 1"]
    with reading_language("zh"):
        figure = similarity_figure(_similarity_frame(), "apple")
        table = similarity_table(_similarity_frame())
        assert layer_title("biLSTM 2") == "biLSTM 2" and layer_title("ELMo (scalar mix)") == "ELMo（标量混合）"
    assert figure.layout.title.text == "“apple”在 A 和 B 中的逐层相似度"
    assert figure.layout.xaxis.title.text == "层（0 = 嵌入层）" and figure.layout.yaxis.title.text == "余弦相似度"
    assert list(figure.layout.xaxis.ticktext) == ["嵌入层", "第 1 层"]
    assert "余弦相似度 %{y:.3f}" in figure.data[0].hovertemplate and figure.data[0].name == "bert-x (bert)"
    assert list(table.columns) == ["运行", "模型家族", "嵌入层", "第 1 层"]
    assert table.iloc[0].tolist() == ["bert-x", "bert", 1.0, 0.8]


def test_projection_and_attention_figures_in_chinese():
    frame = pd.DataFrame({"run": ["bert-x"] * 2, "family": ["bert"] * 2, "sentence": [0, 0], "position": [0, 1],
                          "token": ["an", "apple"], "x": [0.0, 1.0], "y": [1.0, 0.0], "is_word": [False, True]})
    frame.attrs["explained_variance"] = [0.6, 0.3]
    maps = SimpleNamespace(run_id="gpt-x", family="gpt", step=30, weights={"self": torch.full((2, 2, 3, 3), 1 / 3)},
                           masks={"self": torch.ones(3, 3, dtype=torch.bool).tril()},
                           streams={"self": (["a", "b", "c"], ["a", "b", "c"])})
    assert attention_figure(maps, "self", 1).layout.title.text == \
        "gpt-x · self-attention · layer 1 of 2 · rows attend, columns are attended; grey = masked"
    with reading_language("zh"):
        projection = projection_figure([frame], ["I ate an apple"], "apple")
        attention = attention_figure(maps, "self", 1)
        assert stream_title("query") == "查询流" and stream_title("odd") == "odd"
    assert projection.layout.title.text == "最后一层的 token 向量，前两个主成分（★ = “apple”）"
    assert "（第 %{customdata} 个 token）" in projection.data[0].hovertemplate
    assert attention.layout.title.text == "gpt-x · 自注意力 · 第 1 层（共 2 层）· 行发出注意力，列被注意；灰色 = 被掩码"
    assert _annotations(attention) == "注意力头 1 注意力头 2"
    assert "<extra>注意力头 1</extra>" in attention.data[0].hovertemplate


def test_the_empty_views_drawn_on_load_are_in_the_readers_language():
    figure, table, *_ = understand_tab.placeholders()
    assert "press Fill" in _annotations(figure) and list(table.columns) == ["slot", "rank"]
    assert list(sentence_similarity_panel.placeholders()[2].columns) == sentence_similarity_panel.TABLE_COLUMNS
    with reading_language("zh"):
        fill, fill_table, similarity, similarity_frame, projection, attention = understand_tab.placeholders()
        heatmaps, _, sentences = sentence_similarity_panel.placeholders()
        routing = routing_panel.empty_table()
    assert "点击“填充”" in _annotations(fill) and list(fill_table.columns) == ["空位", "名次"]
    assert "比较上下文" in _annotations(similarity) and list(similarity_frame.columns) == ["运行", "模型家族"]
    assert "投影会显示在这里" in _annotations(projection) and "显示注意力" in _annotations(attention)
    assert "比较句子" in _annotations(heatmaps)
    assert list(sentences.columns)[:4] == ["运行", "模型家族", "步数", "池化方式"] and "AUC" in sentences.columns
    assert list(routing.columns) and routing.empty  # app/understand/routing_figures.py's headers, no rows


def test_token_chips_words_in_chinese():
    piece = SimpleNamespace(text="cat", display="cat", id=7, start=0, end=3, is_unknown=False, is_special=False)
    unknown = SimpleNamespace(text="[UNK]", display="猫", id=1, start=4, end=5, is_unknown=True, is_special=True)
    english = chips.chips_html("BPE", [piece, unknown])
    assert "2 tokens, <b class='tok-unk-count'>1 unknown</b>" in english and "covers &#x27;cat&#x27; [0:3]" in english
    assert "after <b>2</b> of 5 merges · 3 pieces" in chips.pieces_html([["c", "at"], ["x"]], 2, 5)
    with reading_language("zh"):
        chinese = chips.chips_html("BPE", [piece, unknown])
        replay = chips.pieces_html([["c", "at"], ["x"]], 2, 5)
    assert "2 个 token，<b class='tok-unk-count'>1 个未知</b>" in chinese and "覆盖 &#x27;cat&#x27; [0:3]" in chinese
    assert "· 未知" in chinese and ">cat<" in chinese
    assert "5 次合并中的前 <b>2</b> 次之后 · 3 个片段" in replay


# ------------------------------------------------------------------------------------------------ the running app
@pytest.fixture(scope="module")
def runs(lab_home_dir):
    return {family: path.name for family, path in train_tiny_runs(lab_home_dir, ("gpt", "bert")).items()}


@pytest.fixture(scope="module")
def clients(running_app, runs):
    url, _ = running_app
    return (Client(url, verbose=False),
            Client(url, headers={"Cookie": "lab_language=zh"}, verbose=False))


def test_a_chinese_reader_of_the_running_app_reads_chinese_there(clients, runs):
    english, chinese = clients
    inputs = ([runs["gpt"], runs["bert"]], "the cat sees", "continue", "greedy", 1.0, 0, 1.0, 4, 6, 0, 4, 0)
    page, _ = chinese.predict(*inputs, api_name="/compare_generate")
    assert "BERT 不支持“续写”模式。" in page and "贪心" in page and "bits/byte" in page
    assert "BERT cannot do continuation." in english.predict(*inputs, api_name="/compare_generate")[0]
    modes = chinese.predict(api_name="/compare_modes_table_on_load")
    assert modes.startswith("| 模型家族 | 续写 |")
    assert english.predict(api_name="/compare_modes_table_on_load").startswith("| family | continuation |")

    fill = ([runs["bert"], runs["gpt"]], "the girl eats a red [MASK] .", 3)
    _, table, results = chinese.predict(*fill, api_name="/understand_fill_mask")
    assert table["headers"] == ["空位", "名次", runs["bert"], runs["gpt"]]
    assert results[1]["error"].startswith("GPT reads left to right")  # the raw results stay as the backend wrote
    assert english.predict(*fill, api_name="/understand_fill_mask")[1]["headers"][:2] == ["slot", "rank"]

    stream, _, plot, note, _ = chinese.predict(runs["gpt"], SENTENCE, "self", 1, api_name="/understand_attention")
    assert stream["choices"][0][0] == "自注意力" and "流：自注意力" in note and "因果注意力" in note
    assert json.loads(plot["plot"])["layout"]["title"]["text"].startswith(f"{runs['gpt']} · 自注意力 · 第 1 层")
    placeholders = chinese.predict(api_name="/understand_placeholders_on_load")
    assert placeholders[1]["headers"] == ["空位", "名次"] and placeholders[3]["headers"] == ["运行", "模型家族"]
    assert english.predict(api_name="/understand_placeholders_on_load")[1]["headers"] == ["slot", "rank"]

    picker, _, _ = chinese.predict([], [], None, api_name="/understand_runs_list")
    labels = dict((value, label) for label, value in picker["choices"])
    assert labels[runs["gpt"]].startswith(f"{runs['gpt']} · gpt · 第 ")
    # a refused input: the page's error in Chinese
    with pytest.raises(Exception, match="请至少选择一个运行"):
        chinese.predict([], "the [MASK] .", 3, api_name="/understand_fill_mask")

