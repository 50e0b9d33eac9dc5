"""text: from files on disk to token ids. The bottom of the stack, beside `nn/`.

    corpora.py          the built-in corpora, uploads imported into the lab home, linked paths, a card per corpus
    corpus_files.py     reading an uploaded file: the size cap, .txt/.md/.jsonl/.csv, UTF-8 text, the text column
    corpus_streams.py   reading a corpus of any size in constant memory: text, JSONL, CSV, Parquet, datasets folders
    corpus_sources.py   a corpus as a run reads it: fingerprint, (split, document) stream, the tokenizer's sample
    token_shards.py     tokenize once, to disk: memory-mapped token shards in the lab home, resumable and cached
    synthetic.py        the synthetic corpus: a seeded grammar of English sentences, their Chinese, labels, tags
    stories.py          the stories corpus: a seeded language where context decides, its Chinese, labels, parser
    story_tasks.py      the stories language's context tasks, split as its corpus is, and their trivial baselines
    stdlib_docs.py      the stdlib-docs corpus: English prose from the documentation inside CPython
    tasks.py            labelled tasks for fine-tuning: the built-in ones and a user's CSV
    tokenization.py     training and caching the four subword tokenizers (BPE, byte-level BPE, WordPiece, Unigram)
    tokenizer_kinds.py  the four kinds, their special tokens and markers, and the argument checks they share
    tokenizer_inspect.py looking inside a tokenizer: surface texts, merge replay, statistics, vocabulary overlap
    vocab.py            a tokenizer prepared for training: the lab's special tokens, `VocabInfo`, bytes per token
    vocab_fit.py        vocabulary sizes that fit a corpus's script, and a corpus's tokenizer at a size it supports
    framing.py          how a run frames a text: bare for the lab's runs, as its tokenizer does for a checkpoint
    streams.py          documents to one token stream, d1 [EOS] d2 [EOS] ... (RoBERTa's FULL-SENTENCES packing), and
                        `TokenStream`, the same reads of a stream in memory or on disk
    word_split.py       a sentence split into words in any script, for the views that draw one cell per word

May import: `families`, `batch` (the ignore index of token labels), `home`, and the `tokenizers` library.
"""
