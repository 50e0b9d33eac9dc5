"""The family registry: every pretraining family the lab knows, as data. It imports nothing of the lab but its messages
(lab_models/messages.py) and every stage may import it (the bottom of the stack, beside `batch` and `home`).

Each family has a title, a kind (decoder, encoder, encoder-decoder, two-stream or rnn), its default tokenizer kind,
the citation of its paper, and its own objectives with their default weights (0 = opt-in). What a family *does* lives
elsewhere: its batch builder and loss in `objectives/<family>.py` (or `models/rnn/<family>.py` for the RNN era), its
structure in `models/`. The record the page and the API show, with every objective's default settings and the
add-on objectives, is `objectives.specs.FamilySpec`. A family added here (and to objectives/ and models/) appears in
the page without UI code.
"""
from __future__ import annotations

from dataclasses import dataclass

from lab_models.messages import LabError, Message


@dataclass(frozen=True)
class FamilyRecord:
    """One family of the registry."""

    name: str  # lower case, e.g. "bert"
    title: str  # e.g. "BERT"
    kind: str  # decoder | encoder | encoder-decoder | two-stream | rnn
    tokenizer: str  # default tokenizer kind: bpe | byte_bpe | wordpiece | unigram
    paper: str  # the citation
    objectives: tuple[tuple[str, float], ...]  # the family's own objectives and their default weights


# objective name -> one line for the UI (the family-specific details are in objectives/<family>.py)
OBJECTIVE_DESCRIPTIONS: dict[str, Message] = {
    "translation": Message("translation: English -> Chinese on the corpus's own sentence pairs (synthetic or "
                           "stories; the synthetic ones for any other corpus; off at weight 0)"),
    "forward_lm": Message("ELMo's forward LSTM language model (predicts the next token); 0.5 + 0.5 = the mean of both"),
    "backward_lm": Message("ELMo's backward LSTM language model (predicts the previous token)"),
    "nmt": Message("CoVe's English -> Chinese translation of the corpus's own sentence pairs (synthetic or stories; "
                   "the synthetic ones for any other corpus; its only objective)"),
    "lm": Message("ULMFiT's AWD-LSTM language model: stage 1 on the corpus, stage 2 on the task's texts"),
    "classifier": Message("ULMFiT's stage 3: the task's classifier (concat pooling, gradual unfreezing)"),
    "labelled": Message("CVT: the primary tagger's cross-entropy on labelled sentences (odd steps)"),
    "unlabelled": Message("CVT: auxiliary views matching the primary's predictions on unlabelled text (even steps)"),
}

# name -> (title, kind, tokenizer, paper, objective names with weights)
_FAMILIES: dict[str, tuple[str, str, str, str, tuple[tuple[str, float], ...]]] = {
    "gpt": ("GPT", "decoder", "bpe",
            "Radford, Narasimhan, Salimans, Sutskever (2018). Improving Language Understanding by Generative Pre-Training.",
            (("clm", 1.0),)),
    "gpt2": ("GPT-2", "decoder", "byte_bpe",
             "Radford, Wu, Child, Luan, Amodei, Sutskever (2019). Language Models are Unsupervised Multitask Learners.",
             (("clm", 1.0),)),
    "bert": ("BERT", "encoder", "wordpiece",
             "Devlin, Chang, Lee, Toutanova (2019). BERT: Pre-training of Deep Bidirectional Transformers for Language "
             "Understanding. NAACL.", (("mlm", 1.0), ("nsp", 1.0))),
    "roberta": ("RoBERTa", "encoder", "byte_bpe",
                "Liu et al. (2019). RoBERTa: A Robustly Optimized BERT Pretraining Approach. arXiv:1907.11692.",
                (("mlm", 1.0),)),
    "albert": ("ALBERT", "encoder", "unigram",
               "Lan et al. (2020). ALBERT: A Lite BERT for Self-supervised Learning of Language Representations. ICLR.",
               (("mlm", 1.0), ("sop", 1.0))),
    "spanbert": ("SpanBERT", "encoder", "wordpiece",
                 "Joshi et al. (2020). SpanBERT: Improving Pre-training by Representing and Predicting Spans. TACL.",
                 (("mlm", 1.0), ("sbo", 1.0))),
    "electra": ("ELECTRA", "encoder", "wordpiece",
                "Clark, Luong, Le, Manning (2020). ELECTRA: Pre-training Text Encoders as Discriminators Rather Than "
                "Generators. ICLR.", (("mlm", 1.0), ("rtd", 50.0))),
    "xlnet": ("XLNet", "two-stream", "unigram",
              "Yang et al. (2019). XLNet: Generalized Autoregressive Pretraining for Language Understanding. NeurIPS.",
              (("plm", 1.0),)),
    "mpnet": ("MPNet", "two-stream", "wordpiece",
              "Song, Tan, Qin, Lu, Liu (2020). MPNet: Masked and Permuted Pre-training for Language Understanding. "
              "NeurIPS.", (("mplm", 1.0),)),
    "unilm": ("UniLM", "encoder", "wordpiece",
              "Dong et al. (2019). Unified Language Model Pre-training for Natural Language Understanding and "
              "Generation. NeurIPS.", (("cloze", 1.0),)),
    "mass": ("MASS", "encoder-decoder", "byte_bpe",
             "Song, Tan, Qin, Lu, Liu (2019). MASS: Masked Sequence to Sequence Pre-training for Language Generation. "
             "ICML.", (("seq2seq", 1.0), ("translation", 0.0))),
    "glm": ("GLM", "decoder", "unigram",
            "Du et al. (2022). GLM: General Language Model Pretraining with Autoregressive Blank Infilling. ACL.",
            (("blank_infilling", 1.0),)),
    "t5": ("T5", "encoder-decoder", "unigram",
           "Raffel et al. (2020). Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer. "
           "JMLR.", (("span_corruption", 1.0), ("translation", 0.0))),
    # the RNN era (lab_models/models/rnn/): LSTM backbones, the same runs, curves and comparisons
    "elmo": ("ELMo", "rnn", "bpe",
             "Peters et al. (2018). Deep contextualized word representations. NAACL.",
             (("forward_lm", 0.5), ("backward_lm", 0.5))),
    "cove": ("CoVe", "rnn", "bpe",
             "McCann, Bradbury, Xiong, Socher (2017). Learned in Translation: Contextualized Word Vectors. NeurIPS.",
             (("nmt", 1.0),)),
    "ulmfit": ("ULMFiT", "rnn", "bpe",
               "Howard & Ruder (2018). Universal Language Model Fine-tuning for Text Classification. ACL.",
               (("lm", 1.0), ("classifier", 1.0))),
    "cvt": ("CVT", "rnn", "wordpiece",
            "Clark, Luong, Manning, Le (2018). Semi-Supervised Sequence Modeling with Cross-View Training. EMNLP.",
            (("labelled", 1.0), ("unlabelled", 1.0))),
}

FAMILY_NAMES: tuple[str, ...] = tuple(_FAMILIES)
RNN_FAMILIES: tuple[str, ...] = tuple(name for name, row in _FAMILIES.items() if row[1] == "rnn")


def family_record(name: str) -> FamilyRecord:
    """The registry's record of `name`; ValueError for a family the lab does not know.

    >>> family_record("bert").objectives, family_record("t5").kind
    ((('mlm', 1.0), ('nsp', 1.0)), 'encoder-decoder')
    """
    if name not in _FAMILIES:
        raise LabError("Unknown family {name!r}: choose one of {families}.", name=name, families=', '.join(_FAMILIES))
    title, kind, tokenizer, paper, objectives = _FAMILIES[name]
    return FamilyRecord(name, title, kind, tokenizer, paper, objectives)
