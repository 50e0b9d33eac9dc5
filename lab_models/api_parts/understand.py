"""`lab_models.api`'s understand section (re-exported there: the UI imports only `lab_models.api`).

The Understand tab's backend: contextual embeddings and attention maps of trained runs (lab_models/probes.py), read
from the real forward pass with hooks. Each function takes run folders (`RunStore.run_dir(run_id)` gives one).
"""
from __future__ import annotations

from pathlib import Path

from .. import inference as _inference
from .. import probes as _probes
from ..home import lab_home
from .training import RunStore, list_runs

AttentionMaps = _probes.AttentionMaps
PROBE_MAX_TOKENS = _probes.MAX_TOKENS
PROBE_MAX_SENTENCES = _probes.MAX_SENTENCES
__all__ = ["AttentionMaps", "PROBE_MAX_TOKENS", "PROBE_MAX_SENTENCES", "contextual_similarity",
            "embedding_projection", "attention_maps", "runs_with_weights"]


def _probe_run_dir(run_dir) -> Path:
    if run_dir is None or not str(run_dir).strip():
        raise ValueError("Choose a run first: pick one with weights (finished, stopped, or running with a "
                         "checkpoint).")
    return Path(str(run_dir).strip()).expanduser()


def contextual_similarity(run_dirs, sentence_a: str, sentence_b: str, word: str):
    """The cosine similarity of `word`'s vector in sentence A and in sentence B, per layer, for each run: a pandas
    DataFrame with columns run, family, layer (0 = embedding output, then one per block), layer_name, cosine,
    pieces_a and pieces_b (the tokens averaged into the word's vector). `run_dirs`: one run folder or a list.
    ValueError: an empty sentence or word, a word missing from a sentence, a sentence over the token limit, a run
    without weights."""
    import pandas as pd

    dirs = [run_dirs] if isinstance(run_dirs, (str, Path)) else list(run_dirs or [])
    if not dirs:
        raise ValueError("Pick at least one run to compare.")
    frames = [_probes.contextual_similarity(_probe_run_dir(d), sentence_a, sentence_b, word) for d in dirs]
    return pd.concat(frames, ignore_index=True)


def embedding_projection(run_dir, sentences, word: str | None = None):
    """The final layer's token vectors of `sentences` (a list, or text with one sentence per line; at most
    PROBE_MAX_SENTENCES) on their first two principal components: a DataFrame with columns run, family, sentence
    (0-based index), position, token, is_word (covers `word`), x, y; attrs["explained_variance"] and attrs["view"]."""
    return _probes.embedding_projection(_probe_run_dir(run_dir), sentences, word)


def attention_maps(run_dir, sentence: str) -> AttentionMaps:
    """Every layer's and head's attention probabilities for `sentence`, per stream (self; content and query; encoder,
    decoder and cross), under the mask the family uses at inference (lab_models/probes.py lists them)."""
    return _probes.attention_maps(_probe_run_dir(run_dir), sentence)


def runs_with_weights(jobs: RunStore | None = None, *, home=None) -> list[dict]:
    """The rows of `list_runs` whose run has weights to load now (finished or stopped runs, and running or failed ones
    with a checkpoint), newest first; each row gains "weights_step", the step of those weights."""
    store = jobs if jobs is not None else RunStore(lab_home(home))
    rows = []
    for row in list_runs(store):
        if row.get("state") == "queued" or not row.get("run_id"):
            continue
        try:
            _, step = _inference.weights_file(store.run_dir(row["run_id"]))
        except (ValueError, OSError):
            continue
        rows.append({**row, "weights_step": step})
    return rows


# Sentence similarity by topic (lab_models/sentence_similarity.py): the view that shows what the contrastive add-on
# (objectives/contrastive.py) changes.
from .. import sentence_similarity as _sentence_similarity  # noqa: E402

TopicSimilarity = _sentence_similarity.TopicSimilarity
SENTENCE_SIMILARITY_POOLINGS = _sentence_similarity.POOLINGS
SENTENCE_SIMILARITY_PER_TOPIC = _sentence_similarity.DEFAULT_PER_TOPIC
SENTENCE_SIMILARITY_MAX_PER_TOPIC = _sentence_similarity.MAX_PER_TOPIC
__all__ += ["TopicSimilarity", "sentence_similarity"]


def sentence_similarity(run_dirs, pooling: str = "mean",
                        per_topic: int = _sentence_similarity.DEFAULT_PER_TOPIC) -> list[TopicSimilarity]:
    """For each run, the mean cosine similarity between the pooled vectors of held-out synthetic sentences of each
    pair of topics, the gap between same-topic and different-topic pairs, the AUC of that separation and the share of
    sentences whose nearest neighbour shares their topic (`TopicSimilarity`). `pooling`: "mean" (of the tokens) or
    "auto" (the family's fine-tuning vector: [CLS], GPT's last token, ...). ValueError for no run, a run without
    weights, or a bad pooling or count."""
    dirs = [run_dirs] if isinstance(run_dirs, (str, Path)) else list(run_dirs or [])
    if not dirs:
        raise ValueError("Pick at least one run to compare.")
    return [_sentence_similarity.topic_similarity(_probe_run_dir(d), pooling, per_topic) for d in dirs]
