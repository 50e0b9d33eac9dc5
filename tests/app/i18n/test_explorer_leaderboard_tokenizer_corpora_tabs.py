"""What the server writes into the Mask Explorer, Leaderboard, Tokenizer Lab and Corpora tabs and the fine-tuning panel,
in the reader's language (app/i18n/language.py `tr`, app/i18n/messages.py): Chinese under `reading_language("zh")`, the
English of before without it (API clients that send no language), and the same handlers behind a real Gradio server for
a Chinese browser. Tables that the page reads back work whatever language their headers are in."""
from __future__ import annotations

import re
from types import SimpleNamespace

import gradio as gr
import pandas as pd
import pytest
from gradio_client import Client

from app.corpora import tab as corpora_tab
from app.errors import user_errors
from app.explorer import tab as mask_explorer_tab
from app.i18n.language import reading_language
from app.i18n.messages import UNTRANSLATED_LEAD, translate
from app.leaderboard import figures as leaderboard_figures, tab as leaderboard_tab
from app.tokenizer_lab import tab as tokenizer_tab
from app.tokenizer_lab.figures import overlap_figure, token_length_figure
from app.understand import finetune_figures
from app.understand.finetune_panel import FinetuneView
from lab_models import api
from lab_models.inference.generation.context import unsupported_reason
from lab_models.inference.generation.generate import fill_mask_refusal

from tests.support.launching import launch

HAN = re.compile(r"[\u4e00-\u9fff]")
UNTRANSLATED = UNTRANSLATED_LEAD["zh"].split("{}")[0]  # the lead of a message the catalogue does not know
NO_CHOICES = ("", None, None, "", None, "", True, True)  # masked, mode, src_len, order, num_predict, spans, ...


def explore(explorer, sentence, families, split="whitespace", **choices):
    args = dict(zip(("masked", "mode", "src_len", "order", "num_predict", "spans", "shuffle", "two_stream"),
                    NO_CHOICES))
    args.update(choices)
    return explorer.explore(sentence, split, families, 0, *args.values())


# ------------------------------------------------------------------------------------------------ Mask Explorer
def test_the_mask_explorer_writes_chinese_for_a_chinese_reader_and_the_same_english_otherwise(tmp_path):
    explorer = mask_explorer_tab.MaskExplorer(tmp_path)
    english = explore(explorer, "the cat sat on the mat", ["bert", "t5"])
    assert english[0]["value"] == (
        "### BERT <small>(encoder)</small>\nbidirectional: every x_i may attend every x_j; each picked x_i predicts "
        "its original token\n\n**Density** (fraction of allowed pairs): self: 1.00  \n**Choices used:** "
        + english[0]["value"].split("**Choices used:** ")[1])
    assert english[-1].endswith(" split on whitespace (6 tokens).")
    figure = english[1]["value"]
    assert figure.layout.annotations[0].text == "self-attention · density 1.00"
    assert (figure.layout.xaxis.title.text, figure.layout.yaxis.title.text) == ("key j (attended)",
                                                                               "query i (attending)")
    assert figure.data[0].text[0][1].startswith("x0 the may attend x1 ")
    assert list(english[5]["value"].columns) == ["side", "i", "token", "position", "target"]
    assert set(english[5]["value"]["side"]) == {"encoder", "decoder"}

    with reading_language("zh"):
        chinese = explore(explorer, "the cat sat on the mat", ["bert", "t5"])
    header = chinese[0]["value"]
    assert header.startswith("### BERT <small>（编码器）</small>\n双向：")
    assert "**密度**（允许注意的位置对所占比例）：self: 1.00" in header and "**所用选项**：" in header
    assert "may attend" not in header and "Choices used" not in header
    assert chinese[-1].endswith(" 按空白切分（共 6 个 token）。")
    figure = chinese[1]["value"]
    assert figure.layout.annotations[0].text == "自注意力 · 密度 1.00"
    assert (figure.layout.xaxis.title.text, figure.layout.yaxis.title.text) == ("键 j（被注意的位置）",
                                                                               "查询 i（发出注意的位置）")
    assert figure.data[0].text[0][1].startswith("x0 the 可以注意 x1 ")
    t5_figure = chinese[4]["value"]
    assert [a.text.split(" · ")[0] for a in t5_figure.layout.annotations] == [
        "编码器自注意力", "解码器自注意力（因果）", "交叉注意力（解码器 → 编码器）"]
    table = chinese[5]["value"]
    assert list(table.columns) == ["所在侧", "i", "token", "位置", "目标"]
    assert set(table["所在侧"]) == {"编码器", "解码器"} and "cat" in set(table["token"])  # tokens stay as they are
    assert HAN.search(chinese[3]["value"])  # T5's header: its rule in Chinese


def test_every_batch_builders_rule_and_every_split_note_reads_chinese(tmp_path):
    for spec in api.families():
        if spec.has_anatomy:
            rule = api.anatomy(spec.name, "a b c d e f".split()).rule
            chinese = translate(rule, "zh")
            assert HAN.search(chinese) and not chinese.startswith(UNTRANSLATED), (spec.name, rule)
    words = [f"{a}{b}{c}" for a in "abcdefghij" for b in "klmnopqrst" for c in "uvwxyz"]
    tokenizer = api.train_tokenizer("bpe", [" ".join(words[i:i + 12]) for i in range(0, len(words), 12)], 300)
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    cases = [("the cat", {"split": "whitespace"}), ("小猫 cat", {"split": "whitespace"}),
             ("猫", {"split": "whitespace"}), ("猫 cat", {"split": "characters"}),
             ("the cat", {"tokenizer_path": tmp_path / "tokenizer.json"})]
    for sentence, how in cases:
        split = api.explorer_split(sentence, **how)
        kind = "bpe" if "tokenizer_path" in how else how["split"]
        # the English the page writes is the backend's note itself
        assert mask_explorer_tab.split_rule_text(split, sentence, kind) == split.note
        with reading_language("zh"):
            assert HAN.search(mask_explorer_tab.split_rule_text(split, sentence, kind)), split.note


def test_a_bad_choice_names_the_family_and_reads_chinese(tmp_path):
    explorer = mask_explorer_tab.MaskExplorer(tmp_path)
    with pytest.raises(ValueError, match=r"^BERT: "):
        explore(explorer, "a b c", ["bert"], masked="7")
    with reading_language("zh"), pytest.raises(gr.Error) as caught:  # as the page shows it (app/errors.py)
        explore(SimpleNamespace(explore=user_errors(explorer.explore)), "a b c", ["bert"], masked="7")
    assert caught.value.message.startswith("BERT：") and "7" in caught.value.message and HAN.search(
        caught.value.message.split("：", 1)[1])


@pytest.mark.slow
def test_a_chinese_browser_gets_the_mask_explorer_in_chinese_from_the_running_page(tmp_path):
    with gr.Blocks() as demo:
        mask_explorer_tab.build(tmp_path)
    launch(demo, prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
    try:
        for headers, chinese in (({}, False), ({"Accept-Language": "zh-CN,zh;q=0.9"}, True),
                                 ({"Cookie": "lab_language=zh"}, True)):
            client = Client(demo.local_url, headers=headers, verbose=False)
            outputs = client.predict("the cat sat", "whitespace", ["gpt"], 0, "", None, None, "", None, "", True,
                                     True, api_name="/explore_masks")
            header, note = outputs[0]["value"], outputs[-1]
            assert ("（解码器）" in header) == chinese and ("(decoder)" in header) != chinese, header
            assert bool(HAN.search(note)) == chinese, note
    finally:
        demo.close()


# ------------------------------------------------------------------------------------------------ Tokenizer Lab
def test_the_vocabulary_proposal_is_the_backends_sentence_in_english_and_chinese_for_a_chinese_reader():
    for known in ({"bpe": 351, "wordpiece": 317}, {"byte_bpe": 257, "unigram": 400}, {"bpe": 120}):
        proposal = api.propose_vocab_size(list(known), [], 300, known=known)
        assert tokenizer_tab.proposal_text(proposal) == proposal.message()
    proposal = api.propose_vocab_size(["bpe", "byte_bpe"], [], 300, known={"bpe": 351, "byte_bpe": 317})
    with reading_language("zh"):
        assert tokenizer_tab.proposal_text(proposal) == ("这个语料库需要比 300 更大的词表：BPE (GPT) 至少需要 351 个 token，"
                                                         "字节级 BPE (GPT-2) 需要 317 个。351 是对每种分词器都可用的最小词表大小。")
        assert tokenizer_tab.use_size_label(351) == "使用词表大小 351"
    assert tokenizer_tab.use_size_label(351) == tokenizer_tab.USE_SIZE_LABEL.format(size=351)


@pytest.mark.slow
def test_the_tokenizer_lab_trains_and_reports_in_the_readers_language(tmp_path):
    lab = tokenizer_tab.TokenizerLab(tmp_path)
    descriptions = []

    def progress(fraction, desc=None):
        descriptions.append(desc)

    with reading_language("zh"):
        status, table, lengths, overlap, chips, _, button, _ = lab.train("synthetic", 400, ["bpe", "wordpiece"],
                                                                         "the cat", progress=progress)
    assert status.startswith("已在 **synthetic** 上以词表大小 400 训练了 2 个分词器。")
    assert descriptions == ["正在训练 BPE (GPT)（1/2）", "正在训练 WordPiece (BERT)（2/2）", "完成"]
    assert list(table.columns)[:3] == ["类型", "词表大小", "token 数"] and list(table.iloc[:, 0]) == ["bpe", "wordpiece"]
    assert list(table["来自缓存"]) == ["否", "否"]
    assert lengths.layout.title.text == "词表：token 长度分布" and lengths.layout.yaxis.title.text == "词表条目数"
    assert overlap.layout.title.text == "词表重叠（Jaccard）"
    assert "词表 400" in chips and button["visible"] is False

    descriptions.clear()
    status, table, lengths, overlap, chips, _, _, _ = lab.train("synthetic", 400, ["bpe", "wordpiece"], "the cat",
                                                                progress=progress)
    assert status == ("Trained 2 tokenizer(s) on **synthetic** at vocabulary size 400. Statistics are measured on "
                      "the corpus's validation split.")
    assert descriptions == ["Training BPE (GPT) (1/2)", "Training WordPiece (BERT) (2/2)", "Done"]
    assert list(table.columns) == ["kind", "vocab_size", "tokens", "tokens_per_word", "tokens_per_char",
                                   "unknown_rate", "avg_token_chars", "train_seconds", "cached"]
    assert (lengths.layout.title.text, overlap.layout.title.text) == ("Vocabulary: token length distribution",
                                                                      "Vocabulary overlap (Jaccard)")
    assert "vocab 400" in chips and list(table["cached"]) == [True, True]  # English: the booleans, as before

    with reading_language("zh"):
        status, *_, button, proposed = lab.train("synthetic", 300, ["bpe"], "", progress=progress)
    assert status.startswith("没有在 **synthetic** 上以词表大小 300 训练出任何分词器。")
    assert f"点击“**使用词表大小 {proposed}**”" in status and button["value"] == f"使用词表大小 {proposed}"


def test_figures_draw_english_without_a_language():
    assert token_length_figure({"bpe": {1: 3}}).layout.xaxis.title.text == "token length (characters, markers removed)"
    frame = pd.DataFrame([[1.0]], index=["bpe"], columns=["bpe"])
    assert overlap_figure(frame).layout.title.text == "Vocabulary overlap (Jaccard)"


# ------------------------------------------------------------------------------------------------ Corpora
def test_the_corpus_card_upload_note_and_import_status_read_chinese(tmp_path):
    view = corpora_tab.CorporaView(tmp_path)
    english, _ = view.card("synthetic")
    assert list(english.columns) == ["field", "value"]
    assert list(english["field"])[:3] == ["name", "source", "documents"] and english["value"][1] == "builtin"
    assert english["value"].iloc[-1].startswith("latin ")
    table_file = tmp_path / "reviews.csv"
    table_file.write_text("text,label\n" + "".join(f"review {i},pos\n" for i in range(30)), encoding="utf-8")
    _, english_note = view.inspect(str(table_file))
    assert english_note.endswith(" bytes. Pick the column that holds the text.")
    upload = tmp_path / "notes.txt"
    upload.write_text("\n\n".join(f"note number {i} about cats and dogs." for i in range(40)), encoding="utf-8")
    with reading_language("zh"):
        table, _ = view.card("synthetic")
        _, note = view.inspect(str(upload))
        _, table_note = view.inspect(str(table_file))
        status, *_ = view.import_file(str(upload), "my-notes", None)
    assert list(table.columns) == ["字段", "值"]
    assert list(table["字段"]) == ["名称", "来源", "文档数", "训练集文档数", "验证集文档数", "行数", "词数", "字符数",
                                  "字节数", "文字构成"]
    assert table["值"][0] == "synthetic" and table["值"][1] == "内置"
    assert table["值"].iloc[-1].startswith("拉丁字母 ") and "，中日韩文字 " in table["值"].iloc[-1]
    assert note.startswith("检测到一个 **txt** 文件") and note.endswith("字节。")
    assert table_note.startswith("检测到一个 **csv** 文件") and table_note.endswith("字节。请选择存放文本的那一列。")
    assert status.startswith("已导入 **my-notes**：") and "个训练文档" in status


# ------------------------------------------------------------------------------------------------ Leaderboard
def leaderboard_frame() -> pd.DataFrame:
    """A frame shaped like api.leaderboard's: gpt (no fill-mask, no infill), bert (no infill), a tagger (nothing)."""
    nan = float("nan")
    frame = pd.DataFrame({
        "run_id": ["gpt-a", "bert-a", "cvt-a"], "family": ["gpt", "bert", "cvt"], "preset": ["tiny"] * 3,
        "corpus": ["synthetic"] * 3, "steps": [50, 50, 50], "training_tokens": [1000, 1000, 1000],
        "training_flops": [9.2e8, 1.6e9, nan],
        "parameters": [12345, 23456, 3456], "val_bits_per_byte": [2.5, 3.1, nan],
        "fill_mask_accuracy": [nan, 0.25, nan], "infill_exact_match": [nan, nan, nan], "accuracy_topic": [0.5, 0.75, nan],
        # the notes as the backend writes them (lab_models/inference/leaderboard.py): messages, in object columns
        "fill_mask_note": pd.Series([api.Message("{reason}.", reason=fill_mask_refusal(family))
                                     if family != "bert" else "" for family in ("gpt", "bert", "cvt")], dtype=object),
        "infill_note": pd.Series([unsupported_reason(family, "infill") for family in ("gpt", "bert", "cvt")],
                                 dtype=object)})
    frame.attrs.update(computed=["gpt-a"], cached=["bert-a", "cvt-a"], seconds={"gpt-a": 1.25},
                       settings={"max_examples": 64, "seed": 0})
    return frame


def test_a_zoo_ranking_shows_each_score_with_its_interval_and_what_it_cannot_tell_apart(monkeypatch, tmp_path):
    """Two seeds of BERT and RoBERTa, one of GPT: means with t intervals over the seeds, GPT's bits per byte without
    one, and BERT and RoBERTa (whose fill-mask intervals overlap) marked as not told apart; the same in Chinese."""
    nan = float("nan")
    frame = pd.DataFrame({
        "run_id": ["b0", "b1", "r0", "r1", "g0"], "family": ["bert", "bert", "roberta", "roberta", "gpt"],
        "preset": ["tiny"] * 5, "corpus": ["stories"] * 5, "steps": [50] * 5, "training_tokens": [1000] * 5,
        "training_flops": [1e9] * 5, "parameters": [1000] * 5, "seed": [0, 1, 0, 1, 0],
        "val_bits_per_byte": [1.0, 1.2, 1.1, 1.3, 0.9], "fill_mask_accuracy": [0.30, 0.34, 0.31, 0.33, nan],
        "fill_mask_examples": [64] * 4 + [0], "infill_exact_match": [nan] * 5, "infill_examples": [0] * 5,
        "probe_accuracy": [nan] * 5})
    frame.attrs.update(computed=[], cached=list(frame["run_id"]), seconds={}, settings={"max_examples": 64, "seed": 0})
    monkeypatch.setattr(api, "leaderboard", lambda *args, **kwargs: frame)
    view = leaderboard_tab.LeaderboardView(api.lab_home(tmp_path / "home"))
    notes = view.rank_zoo("tiny-stories")[2]
    lines = notes.splitlines()
    assert lines[0] == "**Scores with their 95% intervals**"
    assert lines[2] == "| family | seeds | bits per byte | fill-mask | infill | not told apart on fill-mask from |"
    assert lines[4] == "| bert | 2 | 1.100 [-0.171, 2.371] | 0.320 [0.066, 0.574] | — | roberta |"
    assert lines[6] == "| gpt | 1 | 0.900 | — | — | — |"
    with reading_language("zh"):
        chinese = view.rank_zoo("tiny-stories")[2].splitlines()
    assert chinese[0] == "**各项分数及其 95% 区间**"
    assert chinese[2] == "| 模型家族 | 种子数 | 每字节比特 | 填空 | 补全 | 在填空上无法区分的家族 |"


def test_the_leaderboard_writes_chinese_headers_notes_status_and_figure():
    frame = leaderboard_frame()
    english_notes = leaderboard_figures.notes_markdown(frame)
    assert english_notes.splitlines()[:2] == [
        "**Why some scores are missing**",
        "- (1) fill-mask, **gpt-a**: GPT reads left to right only and cannot fill a [MASK]; use a BERT-style run (or "
        "generate with mode='continue')."]
    assert "- (4) bits per byte, **cvt-a**: no validation bits per byte" in english_notes
    assert leaderboard_tab.status_markdown(frame, "synthetic").startswith(
        "**3 runs** on **synthetic** · 1 evaluated now (1.2 s), 2 from the cache · fill-mask and infill: up to 64")
    assert list(leaderboard_figures.display_table(frame).columns)[-4:] == ["val bits/byte ↓", "fill-mask acc ↑",
                                                                           "infill EM ↑", "topic acc ↑"]
    with reading_language("zh"):
        table = leaderboard_figures.display_table(frame)
        notes = leaderboard_figures.notes_markdown(frame)
        status = leaderboard_tab.status_markdown(frame, "synthetic")
        figure = leaderboard_figures.leaderboard_figure(frame)
        empty = leaderboard_figures.leaderboard_figure(frame.iloc[0:0])
        zoo = leaderboard_tab.zoo_choices([{"name": "tiny", "runs": 17, "finished": 5}])
    assert list(table.columns) == ["运行", "模型家族", "比特/字节所基于的预测", "预设", "语料库", "步数",
                                   "训练 token 数 · FLOPs", "参数量", "验证 bits/byte ↓", "fill-mask 准确率 ↑", "infill 完全匹配 ↑",
                                   "topic 准确率 ↑"]
    assert list(table["运行"]) == ["gpt-a", "bert-a", "cvt-a", "平凡基线"]  # data stays as it is; then the baselines
    # the compute each run had beside its tokens, where the trainer counted it
    assert list(table["训练 token 数 · FLOPs"])[:3] == ["1,000 · 9.2e8", "1,000 · 1.6e9", "1,000"]
    lines = notes.splitlines()
    assert lines[0] == "**为什么有些得分缺失**"
    assert lines[1] == ("- (1) fill-mask，**gpt-a**：GPT 只从左往右读，无法填充 [MASK]；请使用 BERT 式的运行"
                        "（或用 mode='continue' 生成）。")
    assert "- (4) 每字节比特，**cvt-a**：没有验证集每字节比特" in notes
    assert not any(line.split("：", 1)[-1].startswith(UNTRANSLATED) for line in lines)  # every reason has its Chinese
    assert status.startswith("**synthetic** 上的 **3 个运行** · 1 个刚刚评估（1.2 s），2 个来自缓存 · ")
    titles = [annotation.text for annotation in figure.layout.annotations]
    assert titles == ["验证集每字节比特（越低越好）<br>只在同一组内比较：各目标预测的词元不同", "fill-mask 准确率<br>（越高越好）",
                      "infill 完全匹配<br>（越高越好）", "topic 准确率<br>（越高越好）"]
    assert figure.layout.legend.title.text == "模型家族"
    assert "无 (1)" in [text for trace in figure.data if trace.type == "scatter" for text in trace.text]
    assert HAN.search(empty.layout.annotations[0].text)
    assert zoo == [("tiny（17 个运行中已完成 5 个）", "tiny")]


def test_the_leaderboard_placeholder_is_redrawn_for_the_reader_and_a_computed_table_stays(tmp_path):
    view = leaderboard_tab.LeaderboardView(tmp_path)
    with reading_language("zh"):
        table, figure = view.placeholder(pd.DataFrame(columns=["run", "family", "val bits/byte ↓"]))
        # the computed table's headers, so that its columns are as wide before and after
        assert list(table.columns)[:3] == ["运行", "模型家族", "比特/字节所基于的预测"] and len(table.columns) == 13
        assert list(table.columns)[8] == "验证 bits/byte ↓" and list(table.columns)[-1] == "最佳探针层"
        assert figure.layout.annotations[0].text == "选择一个语料库，然后点击“计算”。"
        assert view.placeholder(pd.DataFrame([[""] * len(table.columns)], columns=list(table.columns)))[0] is not None
        shown = leaderboard_figures.display_table(leaderboard_frame())  # Chinese headers: read by its rows only
    for table_shown in (shown, leaderboard_figures.display_table(leaderboard_frame())):
        assert all(update == gr.skip() for update in view.placeholder(table_shown))
    english, figure = view.placeholder(None)
    assert list(english.columns)[:2] == ["run", "family"] and list(english.columns)[8] == "val bits/byte ↓"
    assert figure.layout.annotations[0].text == "Pick a corpus and press Compute."


# ------------------------------------------------------------------------------------------------ fine-tuning panel
def finetune_frame() -> pd.DataFrame:
    return pd.DataFrame([{"finetune": "bert-a--topic--0", "pretrained run": "bert-a", "family": "bert",
                          "task": "topic", "pooling": "first", "accuracy": 0.8, "macro F1": 0.7,
                          "majority baseline": 0.2, "steps": 30, "seconds": 1.23, "state": "finished", "λ": 0.0,
                          "adversarial": "none"}], columns=api.FINETUNE_LEADERBOARD_COLUMNS)


def test_the_finetuning_panel_draws_chinese_for_a_chinese_reader():
    topic = api.FINETUNE_TASKS["topic"]
    running = {"finetune_id": "ft", "state": "running", "step": 5, "total_steps": 10, "run_id": "bert-a",
               "family": "bert", "task": "topic", "val_accuracy": 0.5, "val_step": 4, "train_accuracy": 0.6}
    with reading_language("zh"):
        task = finetune_figures.task_markdown(topic)
        table = finetune_figures.leaderboard_table(finetune_frame())
        figure = finetune_figures.accuracy_figure(finetune_frame(), {"topic": finetune_figures.task_title("topic")})
        progress = finetune_figures.progress_html([running, {"finetune_id": "gone", "error": "boom"}])
        idle = finetune_figures.progress_html([])
        defaults = finetune_figures.defaults_markdown([{"run_id": "g", "family": "gpt", "pooling": "last",
                                                        "lm_aux_weight": 0.5}])
        queued = finetune_figures.progress_html([{**running, "state": "queued", "queue_position": 2}])
    assert task.startswith("**主题（5 类）** · 每个句子一个标签 · 标签：animals, food, city, school, sports  \n")
    assert HAN.search(task.splitlines()[1]) and not task.splitlines()[1].startswith(UNTRANSLATED)
    assert list(table.columns) == ["预训练运行", "模型家族", "任务", "准确率", "macro F1", "多数类基线", "池化", "λ",
                                   "对抗训练", "步数", "秒", "状态", "微调 ID"]
    assert list(table.iloc[0][["预训练运行", "任务", "状态"]]) == ["bert-a", "topic", "已完成"]
    assert figure.layout.title.text == "验证准确率（每个运行在每个任务上最好的一次微调）"
    assert figure.layout.yaxis.title.text == "准确率" and list(figure.data[0].x) == ["主题（5 类）"]
    assert [trace.name for trace in figure.data][1:] == ["多数类基线", "多数类基线"]
    assert "第 <b>5</b> / 10 步（50%）" in progress and "验证准确率 <b>0.500</b>（第 4 步）" in progress
    assert 'data-state="running"' in progress and ">运行中<" in progress and ">错误<" in progress
    assert "没有微调" in idle and "排队中（第 2 位）" in queued
    assert defaults.splitlines()[0] == "| 运行 | 模型家族 | auto 时的池化 | 留空时的 λ |"
    assert "last（最后一个 token 的状态；GPT §3.3）" in defaults
    for spec in api.finetune_tasks():  # every built-in task's description has its Chinese
        assert not translate(spec.description, "zh").startswith(UNTRANSLATED), spec.name
    # and English for everyone else, as before
    english = finetune_figures.progress_html([running])
    assert "step <b>5</b> / 10 (50%)" in english and "validation accuracy <b>0.500</b> (step 4)" in english
    assert list(finetune_figures.leaderboard_table(finetune_frame()).columns) == finetune_figures.TABLE_COLUMNS
    assert finetune_figures.accuracy_figure(finetune_frame()).layout.title.text.startswith("Validation accuracy")


def test_a_finetuning_that_cannot_start_says_why_in_the_readers_language(tmp_path):
    class Jobs(api.RunStore):
        start_command = None  # looks like the app's job manager; nothing is started: the run does not exist

    view = FinetuneView(tmp_path, Jobs(tmp_path))
    args = (["no-such-run"], "topic", None, "", "", "", "auto", "", 10, 8, "", 0)
    with pytest.raises(ValueError, match=r"^Nothing was started\. no-such-run: "):
        view.start(*args)
    with reading_language("zh"), pytest.raises(gr.Error) as caught:  # as the page shows it (app/errors.py)
        user_errors(view.start)(*args)
    assert caught.value.message.startswith("没有启动任何微调。no-such-run：")
    with reading_language("zh"):
        defaults, task = view.notes(["no-such-run"], "sentiment")
    assert "不是已知模型家族的运行" in defaults and task.startswith("**情感（3 类）**")


def test_the_best_probe_layer_is_written_in_the_readers_language_from_its_parts():
    from app.leaderboard.figures import probe_layer_cell

    rows = [{"best_probe_stream": "self", "best_probe_layer_name": "block 2", "best_probe_depth": 1.0},
            {"best_probe_stream": "content", "best_probe_layer_name": "block 1", "best_probe_depth": 0.5},
            {"best_probe_stream": "decoder", "best_probe_layer_name": "decoder block 2", "best_probe_depth": 1.0},
            {"best_probe_stream": "self", "best_probe_layer_name": "embeddings", "best_probe_depth": 0.0},
            {"best_probe_layer": "self: block 2 (depth 1.00)", "best_probe_layer_name": ""},  # no parts: its English
            {}]
    with reading_language("zh"):
        assert [probe_layer_cell(row) for row in rows] == ["第 2 层", "内容流：第 1 层", "解码器 第 2 层", "嵌入层",
                                                           "self: block 2 (depth 1.00)", "—"]
    assert [probe_layer_cell(row) for row in rows[:4]] == ["block 2", "content stream: block 1", "decoder block 2",
                                                           "embeddings"]
