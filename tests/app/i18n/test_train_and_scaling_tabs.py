"""What the server writes into the Train and Scaling tabs (and the demo zoo panel), in the reader's language: figures'
titles, axes, legends, hover texts and empty-plot notes, table headers and the words in their cells, status and
progress lines, and the backend's sentences (a run's status message, what a setting does) through the catalogue
app/i18n/locales/zh/messages/status_train.json. Under `reading_language("zh")` they are Chinese; without it they are the
English the page always wrote; data (run ids, family and objective names, numbers) stays as it is; and the tables the
page reads back (the settings table, the runs table's clicked row) are read the same in both languages."""
from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pandas as pd
import pytest
from gradio_client import Client

from app.explorer import zoo_panel
from app.i18n.language import reading_language
from app.i18n.messages import catalogue, translate
from app.scaling import figures as scaling_figures
from app.train import addon_figures, figures as train_figures, import_panel, switch_figures
from app.train.tab import SETTINGS_HEADERS, TrainView, settings_overrides
from app.understand import routing_figures, similarity_figures
from lab_models import api

HAN = re.compile(r"[\u4e00-\u9fff]")

ROWS = [
    {"step": 1, "loss": 3.0, "losses": {"mlm": 2.0, "nsp": 1.0}, "lr": 1e-3, "stage": 1,
     "stage_name": "general LM pretraining", "lrs": {"g0": 1e-3, "g1": 5e-4}},
    {"step": 2, "loss": 2.5, "losses": {"mlm": 1.8, "nsp": 0.7}, "lr": 2e-3, "stage": 2, "stage_name": "LM fine-tuning",
     "lrs": {"g0": 1e-3, "g1": 0.0}},
    {"split": "val", "step": 2, "loss": 2.7, "bits_per_byte": 1.2, "topic_gap": 0.1, "alignment": 0.5,
     "uniformity": -2.0, "bleu_en_zh": 3.0},
    {"step": 3, "loss": 2.0, "lr": 1e-3, "switch": {"layers": ["layer 2", "decoder layer 1"], "n_experts": 2,
                                                      "routed": [[0.7, 0.3], [0.5, 0.5]],
                                                      "dropped": [[0.1, 0.0], [0.0, 0.0]], "tokens": [64, 64]}},
]
SWEEP = {"sweep_id": "gpt-sweep-20260101-120000-ab12",
         "config": {"family": "gpt", "switch": False, "sizes": ["16x1", "32x1"]},
         "status": {"state": "stopped", "step": 2, "total_steps": 2, "message": api.Message(
             "stopped: {summary}", summary=api.Message("{finished} of {total} runs finished", finished=2, total=2))},
         "points": [{"variant": "dense", "size": "16x1", "state": "finished", "bits_per_byte": 2.0,
                     "non_embedding": 1000, "train_flops": 1e9},
                    {"variant": "dense", "size": "32x1", "state": "finished", "bits_per_byte": 1.5,
                     "non_embedding": 4000, "train_flops": 4e9}],
         "fits": {"dense": {"parameters": {"exponent": 0.2, "coefficient": 8.0, "r2": 1.0, "points": 2},
                            "flops": {}}}}


def both(build):
    """`build()` for an English reader and for a Chinese one."""
    english = build()
    with reading_language("zh"):
        chinese = build()
    return english, chinese


def figure_texts(figure) -> dict:
    """A figure's words: title, axis titles, trace names, hover templates, annotations (subplot titles, notes)."""
    layout = figure.layout
    axes = {name: layout[name].title.text for name in layout if name.startswith(("xaxis", "yaxis"))
            and layout[name].title.text}
    return {"title": layout.title.text, "axes": axes, "names": [trace.name for trace in figure.data],
            "hover": [trace.hovertemplate for trace in figure.data],
            "notes": [annotation.text for annotation in layout.annotations]}


def test_the_loss_lr_and_comparison_figures():
    english, chinese = both(lambda: figure_texts(train_figures.loss_figure(ROWS, title="bert-tiny-1")))
    assert english["axes"] == {"xaxis": "step", "yaxis": "loss (nats per target)"}
    assert chinese["axes"] == {"xaxis": "步", "yaxis": "损失（每个目标的 nats）"}
    assert english["names"] == ["train loss (total)", "train mlm", "train nsp", "validation loss"]
    assert chinese["names"] == ["训练损失（总计）", "训练 mlm", "训练 nsp", "验证损失"]  # objective names stay
    assert chinese["title"] == english["title"] == "bert-tiny-1"  # a run id is data
    # ULMFiT's stages: the band's label, the backend's stage name through the catalogue
    assert english["notes"] == ["stage 1: general LM pretraining", "stage 2: LM fine-tuning"]
    assert chinese["notes"] == ["阶段 1：通用语言模型预训练", "阶段 2：语言模型微调"]

    english, chinese = both(lambda: figure_texts(train_figures.lr_figure(ROWS, title="x")))
    assert (english["names"], english["axes"]["yaxis"]) == (["lr g0", "lr g1"], "learning rate")
    assert (chinese["names"], chinese["axes"]["yaxis"]) == (["学习率 g0", "学习率 g1"], "学习率")

    english, chinese = both(lambda: figure_texts(train_figures.compare_figure({"run-a": ROWS}, "val_bits_per_byte")))
    assert english["axes"]["yaxis"] == "validation bits/byte" and chinese["axes"]["yaxis"] == "验证每字节比特"
    assert chinese["names"] == ["run-a"]

    for empty in (lambda: train_figures.loss_figure([]), lambda: train_figures.lr_figure([]),
                  lambda: train_figures.compare_figure({}), lambda: addon_figures.addon_figure([]),
                  lambda: switch_figures.routing_figure([]), lambda: scaling_figures.scaling_figure([])):
        english, chinese = both(lambda: figure_texts(empty())["notes"])
        assert english[0].startswith(("No ", "Pick runs")) and not HAN.search(english[0])
        assert HAN.search(chinese[0]) and not re.search(r"\b(the|a|yet|runs?)\b", chinese[0]), chinese


def test_the_progress_bar_and_the_status_line():
    running = {"run_id": "bert-tiny-1", "state": "running", "step": 5, "total_steps": 10, "tokens_per_s": 1234.5,
               "eta_s": 100, "mfu": None, "flops_per_token": 1e7, "family": "bert", "preset": "tiny", "loss": 2.0,
               "losses": {"mlm": 1.0, "nsp": 1.0}, "val_loss": 2.1,
               "message": api.Message("tokenizing: training the tokenizer")}  # as the trainer writes it
    english, chinese = both(lambda: train_figures.progress_html(running))
    assert "running" in english and "step <b>5</b> / 10 (50%)" in english and "ETA 1 min 40 s" in english
    assert "运行中" in chinese and "第 <b>5</b> / 10 步（50%）" in chinese and "预计剩余 1 min 40 s" in chinese
    assert "MFU 未知" in chinese and "model FLOPs utilisation" in english and "模型 FLOPs 利用率" in chinese
    english, chinese = both(lambda: train_figures.status_markdown(running))
    assert english.startswith("**Run** `bert-tiny-1` · bert · preset tiny · corpus preset default · device auto — "
                              "**running**")
    assert chinese.startswith("**运行** `bert-tiny-1` · bert · 预设 tiny · 语料库 预设默认 · 设备 auto — **运行中**")
    assert "_tokenizing: training the tokenizer_" in english and "_分词中：训练分词器_" in chinese  # the backend's
    assert "mlm 1.0000" in chinese and "验证损失 **2.1000**" in chinese

    failed = {"run_id": "r", "state": "failed",
              "message": api.Message("the trainer exited with code {code}: {last_line}", code=3, last_line="boom")}
    english, chinese = both(lambda: train_figures.status_markdown(failed, "Traceback\nboom"))
    assert "**The run failed:** the trainer exited with code 3: boom" in english and "End of its log:" in english
    assert "**运行失败：**训练器以退出码 3 退出：boom" in chinese and "日志末尾：" in chinese
    # a message the catalogue does not know stays as it is, with no "untranslated" lead in a status line
    with reading_language("zh"):
        assert translate("zzz qqq, nothing like it") == "zzz qqq, nothing like it"
    for state, chinese_label in (({"state": "queued", "queue_position": 2}, "排队中（第 2 位）"),
                                 ({"state": "running", "stopping": True}, "正在停止…"),
                                 ({"state": "stopped", "interrupted": True}, "已停止（被中断）"),
                                 ({"state": "died"}, "意外终止"), ({"state": "weird"}, "weird")):
        with reading_language("zh"):
            assert train_figures.state_label(state) == chinese_label


def test_the_runs_table_and_its_clicked_row():
    rows = [{"run_id": "gpt-tiny-1", "family": "gpt", "preset": "tiny", "corpus": None, "state": "finished",
             "step": 50, "total_steps": 50, "loss": 2.0, "tokens_per_s": 900.0}]
    english, chinese = both(lambda: train_figures.runs_table(rows))
    assert list(english.columns) == train_figures.RUNS_COLUMNS
    assert list(chinese.columns) == ["运行 ID", "模型家族", "预设", "语料库", "状态", "步数 / 总步数", "损失", "验证损失",
                                     "验证 bits/byte", "tokens/s"]
    assert english.values[0].tolist()[:5] == ["gpt-tiny-1", "gpt", "tiny", "(preset default)", "finished"]
    assert chinese.values[0].tolist()[:5] == ["gpt-tiny-1", "gpt", "tiny", "（预设默认）", "已完成"]
    # a click on a row of the Chinese table selects the run: the row is read by position
    clicked = SimpleNamespace(row_value=chinese.values[0].tolist())
    assert TrainView.select_from_table(chinese, clicked) == "gpt-tiny-1"


def test_the_settings_table_reads_back_in_both_languages():
    view = TrainView(None, None)
    english, chinese = both(lambda: view.family_defaults("bert"))
    english_table, chinese_table = english[-2]["value"], chinese[-2]["value"]
    assert list(english_table.columns) == SETTINGS_HEADERS
    assert list(chinese_table.columns) == ["设置项", "值", "默认值", "作用"]
    help_of = dict(zip(chinese_table.iloc[:, 0], chinese_table.iloc[:, 3]))
    assert help_of["mask_rate"] == "被选中用于预测的词元比例"  # what it does, through the catalogue
    assert dict(zip(english_table.iloc[:, 0], english_table.iloc[:, 3]))["mask_rate"] == (
        "fraction of tokens picked for prediction")
    for table in (english_table, chinese_table):  # the user edits a value; the page sends the table back
        edited = table.copy()
        edited.iloc[0, 1] = "0.2"
        assert settings_overrides(edited) == {"mask_rate": "0.2"}
        sent = {"headers": list(edited.columns), "data": edited.values.tolist()}  # as an API client sends it
        assert settings_overrides(sent) == {"mask_rate": "0.2"}
    # the family note and the tokenizer choices (the paper's reference stays as it is cited)
    assert english[-1].startswith("**BERT** · encoder · tokenizer WordPiece (BERT) · Devlin")
    assert chinese[-1].startswith("**BERT** · 编码器 · 分词器 WordPiece (BERT) · Devlin")
    gpt2 = both(lambda: view.family_defaults("gpt2")[0]["choices"][0])
    assert gpt2 == (("default: Byte-level BPE", ""), ("默认：字节级 BPE", ""))


def test_every_setting_explanation_has_its_chinese():
    """The settings table's "what it does" column is the backend's English: each family's has a translation (a new
    setting's comment needs one in app/i18n/locales/zh/messages/status_train.json)."""
    known = catalogue("zh")
    missing = {text for spec in api.trainable_families() for text in api.family_settings_help(spec.name).values()
               if text not in known}
    assert not missing, sorted(missing)


def test_the_addon_and_sentence_similarity_figures():
    english, chinese = both(lambda: figure_texts(addon_figures.addon_figure(ROWS, title="add-on objectives · r")))
    assert english["notes"] == ["sentence space (held-out synthetic sentences)",
                                "translation of held-out pairs (0-100)"]
    assert chinese["notes"] == ["句子空间（留出的合成句子）", "留出句对的翻译（0-100）"]
    assert chinese["names"] == ["主题差距（同主题减不同主题的余弦，↑）", "对齐度（↓）", "均匀性（↓）", "BLEU en→zh"]
    assert english["axes"]["xaxis"] == "step" and chinese["axes"]["xaxis"] == "步"
    result = SimpleNamespace(run_id="bert-1", family="bert", step=1000, pooling="mean", auc=0.7, same=0.5,
                             different=0.3, gap=0.2, matrix=[[1.0, 0.5], [0.5, 1.0]], topics=["a", "b"])
    english, chinese = both(lambda: figure_texts(similarity_figures.topic_similarity_figure([result])))
    assert "step 1,000 · mean pooling" in english["notes"][0] and "<b>gap +0.200</b>" in english["notes"][0]
    assert "第 1,000 步 · mean 池化" in chinese["notes"][0] and "<b>差距 +0.200</b>" in chinese["notes"][0]
    assert chinese["hover"] == ["%{y} 与 %{x}：平均余弦 %{z:.3f}<extra></extra>"]
    english, chinese = both(lambda: figure_texts(similarity_figures.topic_gap_figure([result])))
    assert english["names"] == ["same topic", "different topics"] and chinese["names"] == ["同主题", "不同主题"]


def test_the_switch_routing_figure_chips_and_table():
    english, chinese = both(lambda: figure_texts(switch_figures.routing_figure(ROWS, title="routing · r")))
    assert english["notes"][0] == "layer 2: solid = routed to the expert, dotted = dropped there"
    assert chinese["notes"][:2] == ["第 2 层：实线 = 路由到该专家，点线 = 在该专家处被丢弃",
                                    "解码器第 1 层：实线 = 路由到该专家，点线 = 在该专家处被丢弃"]
    assert "balanced" in english["notes"] and "均衡" in chinese["notes"]
    assert english["names"][:2] == ["expert 0", "expert 1"] and chinese["names"][:2] == ["专家 0", "专家 1"]
    assert chinese["hover"][0] == "专家 0 路由 %{y:.3f}<extra></extra>"
    assert english["hover"][0] == "expert 0 routed %{y:.3f}<extra></extra>"
    assert chinese["axes"]["yaxis"] == "词元比例" and chinese["axes"]["xaxis2"] == "步"
    layer = SimpleNamespace(label="generator shared layer", tokens=["the"], experts=[1], probabilities=[0.9],
                            kept=[False])
    view = SimpleNamespace(run_id="electra-1", family="electra", step=10, n_experts=2, layers=[layer])
    english, chinese = both(lambda: (routing_figures.routing_chips_html(view), routing_figures.routing_table(view)))
    assert "1 tokens on 1 of 2 experts" in english[0] and "· dropped" in english[0]
    assert "生成器共享层" in chinese[0] and "1 个词元，用到 2 个专家中的 1 个" in chinese[0] and "已丢弃" in chinese[0]
    assert list(english[1].columns) == ["layer", "position", "token", "expert", "probability"]
    assert list(chinese[1].columns) == ["层", "位置", "词元", "专家", "概率"]
    assert chinese[1].values[0].tolist()[:3] == ["生成器共享层", 0, "the"]


def test_the_import_summary_files_and_zoo_progress():
    summary = {"architecture": "ElectraForPreTraining", "model_type": "electra", "family": "electra", "d_model": 16,
               "n_layers": 2, "n_heads": 2, "d_ff": 64, "vocab_size": 1000, "max_positions": 32,
               "activation": "gelu", "parameters": 123456, "weights_size": "1.0 MB", "pickled": False,
               "objectives": {"mlm": 1.0, "rtd": 50.0}, "generator": None,
               "tokenizer": {"source": "vocab.txt", "kind": "wordpiece", "size": 1000, "roles": {"[MASK]": "[MASK]"},
                             "added": [], "sentinels": 0}}
    english, chinese = both(lambda: import_panel.summary_markdown(summary))
    assert english.splitlines()[0] == "**ElectraForPreTraining** (`model_type` electra) becomes a lab **electra** run."
    assert "- parameters: 0.1M (1.0 MB of weights)" in english and "- no generator folder given" in english
    assert chinese.splitlines()[0] == "**ElectraForPreTraining**（`model_type` electra）将成为实验室的一个 **electra** 运行。"
    assert "- 参数量：0.1M（权重共 1.0 MB）" in chinese and "- 未提供生成器文件夹" in chinese
    english, chinese = both(lambda: list(import_panel.files_frame([("config.json", 665)]).columns))
    assert (english, chinese) == (["file", "size"], ["文件", "大小"])

    runs = [SimpleNamespace(run_id="gpt-1", title="GPT", state="queued", queue_position=3, step=0, total_steps=10,
                            loss=None, val_bits_per_byte=None, message="", fraction=0.0, seed=0),
            SimpleNamespace(run_id="bert-1", title="BERT", state="failed", queue_position=None, step=5,
                            total_steps=10, loss=2.0, val_bits_per_byte=None,
                            message=api.Message("the trainer exited with code {code}", code=1),
                            fraction=0.5, seed=0)]
    progress = SimpleNamespace(fraction=0.5, name="tiny", finished=0, runs=runs)
    english, chinese = both(lambda: zoo_panel.zoo_progress_html(progress))
    assert "zoo tiny" in english and "queued (3)" in english and "loss 2.00" in english
    assert "模型库 tiny" in chinese and "排队中（第 3 位）" in chinese and "损失 2.00" in chinese
    assert 'title="训练器以退出码 1 退出"' in chinese and ">GPT<" in chinese  # a family's title is a name
    assert zoo_panel.RUNS_FINISHED in chinese  # a marker: the page translates it
    # the head's share is of all steps, not of runs, and says so
    assert "</b> / 2 " in english and " · 50% of all steps done</span>" in english
    assert " · 已完成全部步数的 50%</span>" in chinese


def test_the_scaling_figure_fits_table_and_status():
    english, chinese = both(lambda: figure_texts(scaling_figures.scaling_figure([SWEEP])))
    assert english["notes"] == ["bits per byte against parameters", "bits per byte against compute"]
    assert chinese["notes"] == ["bits per byte 随参数量的变化", "bits per byte 随计算量的变化"]
    assert english["axes"] == {"xaxis": "non-embedding parameters N", "xaxis2": "training FLOPs C = 6 N T",
                               "yaxis": "validation bits per byte"}
    assert chinese["axes"] == {"xaxis": "非嵌入参数量 N", "xaxis2": "训练 FLOPs C = 6 N T", "yaxis": "验证 bits per byte"}
    assert english["names"][1] == "gpt dense: L ∝ x^-0.200 (R² 1.00, 2 points) vs N"
    assert chinese["names"][1] == "gpt dense：L ∝ x^-0.200（R² 1.00，2 个点） vs N"
    assert chinese["hover"][0].startswith("%{text}：在 %{x:.3s} 处为 %{y:.4f} bits/byte<extra>")

    english, chinese = both(lambda: scaling_figures.fits_markdown([SWEEP]))
    assert english.endswith("**dense**: against parameters N: **α = 0.200** (R² 1.00, 2 points); against compute C: "
                            "no fit (no points)")
    assert chinese.endswith("**dense**：对参数量 N：**α = 0.200**（R² 1.00，2 个点）；对计算量 C：无拟合（没有数据点）")

    english, chinese = both(lambda: scaling_figures.status_html([SWEEP]))
    assert "· stopped · 2 of 2 runs · stopped: 2 of 2 runs finished" in english
    assert "· 已停止 · 2 / 2 个运行 · 已停止：2 / 2 个运行已完成" in chinese
    english, chinese = both(lambda: scaling_figures.sweep_label(SWEEP))
    assert english.endswith("· dense · stopped 2/2") and chinese.endswith("· dense · 已停止 2/2")

    message = api.Message("ran past the {minutes:g}-minute limit (--max-minutes): stopped {where}", minutes=5,
                          where=api.Message("at step {step} of {steps}", step=7, steps=300))
    frame = pd.DataFrame([{"sweep": "s", "variant": "dense", "size": "16x1", "state": "failed", "non_embedding": 1000,
                           "active_non_embedding": 1000, "train_flops": 1e9, "tokens": 5000, "bits_per_byte": None,
                           "seconds": 3.0}])
    frame["message"] = pd.Series([message], dtype=object)  # as api.sweep_points gives it: the message, not its text
    english, chinese = both(lambda: scaling_figures.points_table(frame))
    assert list(english.columns) == scaling_figures.TABLE_COLUMNS
    assert list(chinese.columns)[:5] == ["扫描", "变体", "规模", "状态", "N（非嵌入参数）"]
    assert english.values[0].tolist()[3] == "failed" and chinese.values[0].tolist()[3] == "失败"
    assert chinese.values[0].tolist()[-1] == "超出了 5 分钟的时间限制（--max-minutes）：在第 7 / 300 步时停止"


def test_a_chinese_browser_reads_the_train_and_scaling_tabs_in_chinese(running_app):
    """The running app: the same endpoints in English without a language, in Chinese for a Chinese browser's
    Accept-Language (the page's load event, the runs table, the settings table, the sweeps, a command's reason)."""
    url, _ = running_app
    readers = {"en": Client(url, verbose=False),
               "zh": Client(url, headers={"Accept-Language": "zh-CN,zh;q=0.9"}, verbose=False)}
    seen = {}
    for language, client in readers.items():
        table, *_ = client.predict([], "loss", api_name="/list_runs")
        loaded = client.predict([], "loss", "bert", "", api_name="/list_runs_on_load")
        # (runs table, run picker, compared runs, comparison, start-from picker, tokenizer, settings, note, loss, lr,
        # add-ons, routing, files): the client leaves the signature (a gr.State) out
        settings, note, files = loaded[6]["value"], loaded[7], loaded[12]  # the settings: an update (and visible)
        loss_note = json.loads(loaded[8]["plot"])["layout"]["annotations"][0]["text"]
        status, plot, fits, points = client.predict([], api_name="/show_sweeps")
        sweep_note = json.loads(plot["plot"])["layout"]["annotations"][0]["text"]
        no_settings = {"headers": SETTINGS_HEADERS, "data": []}
        command = client.predict("gpt", "tiny", "", "", 0, 0, "auto", no_settings, True, -1, False, 0, False, 0, False,
                                 0, api_name="/training_command")  # a negative weight: no command, the reason why
        seen[language] = (table["headers"], settings["headers"], note, loss_note, files["headers"],
                          points["headers"], sweep_note, command)
    english, chinese = seen["en"], seen["zh"]
    assert english[0] == train_figures.RUNS_COLUMNS and chinese[0][:3] == ["运行 ID", "模型家族", "预设"]
    assert english[1] == SETTINGS_HEADERS and chinese[1] == ["设置项", "值", "默认值", "作用"]
    assert "· encoder ·" in english[2] and "· 编码器 ·" in chinese[2]
    assert english[3].startswith("No metrics yet") and HAN.search(chinese[3])
    assert english[4] == ["file", "size"] and chinese[4] == ["文件", "大小"]
    assert english[5] == scaling_figures.TABLE_COLUMNS and chinese[5][0] == "扫描"
    assert english[6].startswith("No finished sweep point yet") and HAN.search(chinese[6])
    assert english[7] == "# The weight of clm must be 0 or more, got -1; untick an objective to turn it off."
    assert chinese[7].startswith("# ") and HAN.search(chinese[7]) and "clm" in chinese[7]


@pytest.mark.parametrize("area", sorted(  # every tab and panel
    path.stem for path in (Path(__file__).resolve().parents[3] / "app" / "i18n" / "locales" / "en").glob("*.json")))
def test_each_chinese_text_has_the_fields_of_its_english(area):
    """`tr(key, **fields)` fills the Chinese with the English's fields: a field missing or misspelt in the Chinese
    would fail only in a Chinese reader's page."""
    from string import Formatter

    from app.i18n.language import translations

    def fields(text):
        return sorted(name for _, name, _, _ in Formatter().parse(text) if name)

    english, chinese = translations()["en"][area], translations()["zh"][area]
    for key, text in english.items():
        if "%{" in text:  # a plotly hover template: no fields of ours
            continue
        # the Chinese may leave out a field that only English grammar needs (a plural "s") or use one twice, but a
        # field the English lacks would be a KeyError in a Chinese reader's page
        assert set(fields(chinese[key])) <= set(fields(text)), (area, key)
        assert set(fields(text)) - set(fields(chinese[key])) <= {"s", "es", "plural", "are"}, (area, key)


def test_after_the_language_switch_the_live_views_are_drawn_again_in_the_new_language(monkeypatch):
    """The live ticks skip a redraw while nothing changed, but the reader's language is part of what they compare:
    after the header's switch the next tick draws the run, its learning-rate plot and the runs table again."""
    summary = {"run_id": "gpt-tiny-1", "family": "gpt", "state": "finished", "step": 2, "total_steps": 2,
               "preset": "tiny", "corpus": "synthetic", "device": "cpu"}
    monkeypatch.setattr(api, "training_status", lambda jobs, run_id: dict(summary))
    monkeypatch.setattr(api, "run_metrics", lambda jobs, run_id: ROWS[:2])
    monkeypatch.setattr(api, "list_runs", lambda jobs: [dict(summary)])
    monkeypatch.setattr(api, "training_log", lambda jobs, run_id, lines=20: "")
    view = TrainView(None, None)
    *_, run_signature = view.show("gpt-tiny-1")
    _, schedule_signature = view.schedule("gpt-tiny-1")
    table_signature = view.overview([], "loss")[4]  # (table, run, compared, comparison, signature, start-from)
    # the same reader: nothing to redraw
    assert all(part is gr.skip() or part == gr.skip() for part in view.tick("gpt-tiny-1", run_signature))
    assert view.schedule_tick("gpt-tiny-1", schedule_signature)[0] == gr.skip()
    assert view.overview([], "loss", table_signature)[0] == gr.skip()
    with reading_language("zh"):
        redrawn = view.tick("gpt-tiny-1", run_signature)
        assert HAN.search(str(redrawn[0])) and HAN.search(str(redrawn[1]))  # the progress bar and the status line
        schedule_figure, _ = view.schedule_tick("gpt-tiny-1", schedule_signature)
        assert HAN.search(schedule_figure.layout.title.text)
        table = view.overview([], "loss", table_signature)[0]
        assert HAN.search(" ".join(table.columns))
        # the switch's redraw of the tab (its load event) draws the picked run's bar and status line in Chinese
        *_, progress, status = view.on_load([], "loss", "gpt", "gpt-tiny-1")
        assert "已完成" in str(progress) and "gpt-tiny-1" in str(status) and "未选择" not in str(progress)
        *_, progress, status = view.on_load([], "loss", "gpt", "")
        assert "progress_idle" in str(progress)  # no run: a translation marker, which the browser writes in Chinese
