"""What a trained model does and what it holds inside: generation and fill-mask, contextual embeddings, attention
maps, sentence similarity by topic, linear probes of every layer, the logit lens, attributions, and the Switch
Transformer's routing of each token.

The Understand and Compare tabs' backend. The work is in lab_models/inference/: generation/generate.py and
generation/context.py (decoding, and what each family can do), representations.py (embeddings and attention maps
read from the real forward pass with hooks), sentence_similarity.py, probing.py (a linear probe per layer against a
random-init control), logit_lens.py and attributions.py (at the position the family predicts, predicting.py), and
routing.py. Each function takes run folders (`run_folder(run_id)` gives one); `explain_prediction` and
`attributions` also take a fine-tuning folder with saved weights, whose classifier's label they explain.
"""
from __future__ import annotations

from pathlib import Path

from lab_models.messages import LabError
from lab_models.inference import attributions as _attributions
from lab_models.inference import logit_lens as _logit_lens
from lab_models.inference import probing as _probing
from lab_models.inference import representations as _probes
from lab_models.inference import routing as _routing
from lab_models.inference import sentence_similarity as _sentence_similarity
from lab_models.inference.generation import context as _context
from lab_models.inference.generation import generate as _generate
from lab_models.inference import context_scores as _context_scores
from lab_models.text import story_tasks as _story_tasks

__all__ = ["Generation", "AutoTask", "auto_task", "GENERATION_MODES", "GENERATION_STRATEGIES", "generation_modes",
           "generate", "fill_mask", "AttentionMaps", "PROBE_MAX_TOKENS", "PROBE_MAX_SENTENCES",
           "contextual_similarity", "embedding_projection", "attention_maps", "TopicSimilarity",
           "SENTENCE_SIMILARITY_POOLINGS", "SENTENCE_SIMILARITY_PER_TOPIC", "SENTENCE_SIMILARITY_MAX_PER_TOPIC",
           "sentence_similarity", "PROBE_TASKS", "PROBE_COLUMNS", "probe_layers", "best_probe_layer", "LENS_COLUMNS",
           "logit_lens", "Attribution", "ATTRIBUTION_METHODS", "ATTRIBUTION_BASELINES", "ATTRIBUTION_DEFAULT_STEPS",
           "ATTRIBUTION_MAX_STEPS", "explain_prediction", "attributions", "RoutingView", "switch_routing",
           "context_baselines", "blank_scores", "continuation_scores"]

# Generation and fill-mask (generation/generate.py): `generate(run_dir, prompt, **decoding)` returns a `Generation` (a
# mode the family cannot do gives supported=False and an explanation); `fill_mask(run_dir, text, top_k)` the top-k
# tokens per [MASK]; `generation_modes(family)` what a family can do, its default first; `auto_task(family, prompt)`
# what mode "auto" asks a family to do with a prompt (the Compare tab's Auto mode).
Generation = _context.Generation
AutoTask = _context.AutoTask
auto_task = _context.auto_task
GENERATION_MODES = _context.GENERATION_MODES
GENERATION_STRATEGIES = _context.STRATEGIES
generation_modes = _context.generation_modes
generate = _generate.generate
fill_mask = _generate.fill_mask

# Contextual embeddings and attention maps (representations.py), read from the real forward pass with hooks.
AttentionMaps = _probes.AttentionMaps
PROBE_MAX_TOKENS = _probes.MAX_TOKENS
PROBE_MAX_SENTENCES = _probes.MAX_SENTENCES


def _probe_run_dir(run_dir) -> Path:
    """The run (or fine-tuning) folder a view reads; ValueError when none was chosen."""
    if run_dir is None or not str(run_dir).strip():
        raise LabError("Choose a run first: pick one with weights (finished, stopped, or running with a "
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
        raise LabError("Pick at least one run to compare.")
    frames = [_probes.contextual_similarity(_probe_run_dir(d), sentence_a, sentence_b, word) for d in dirs]
    return pd.concat(frames, ignore_index=True)


def embedding_projection(run_dir, sentences, word: str | None = None):
    """The final layer's token vectors of `sentences` (a list, or text with one sentence per line; at most
    PROBE_MAX_SENTENCES) on their first two principal components: a DataFrame with columns run, family, sentence
    (0-based index), position, token, is_word (covers `word`), x, y; attrs["explained_variance"] and attrs["view"]."""
    return _probes.embedding_projection(_probe_run_dir(run_dir), sentences, word)


def attention_maps(run_dir, sentence: str) -> AttentionMaps:
    """Every layer's and head's attention probabilities for `sentence`, per stream (self; content and query; encoder,
    decoder and cross), under the mask the family uses at inference (lab_models/inference/representations.py lists
    them)."""
    return _probes.attention_maps(_probe_run_dir(run_dir), sentence)


# Sentence similarity by topic (sentence_similarity.py): the view that shows what the contrastive add-on
# (objectives/contrastive.py) changes.
TopicSimilarity = _sentence_similarity.TopicSimilarity
SENTENCE_SIMILARITY_POOLINGS = _sentence_similarity.POOLINGS
SENTENCE_SIMILARITY_PER_TOPIC = _sentence_similarity.DEFAULT_PER_TOPIC
SENTENCE_SIMILARITY_MAX_PER_TOPIC = _sentence_similarity.MAX_PER_TOPIC


def sentence_similarity(run_dirs, pooling: str = "mean",
                        per_topic: int = _sentence_similarity.DEFAULT_PER_TOPIC) -> list[TopicSimilarity]:
    """For each run, the mean cosine similarity between the pooled vectors of held-out synthetic sentences of each
    pair of topics, the gap between same-topic and different-topic pairs, the AUC of that separation and the share of
    sentences whose nearest neighbour shares their topic (`TopicSimilarity`). `pooling`: "mean" (of the tokens) or
    "auto" (the family's fine-tuning vector: [CLS], GPT's last token, ...). ValueError for no run, a run without
    weights, or a bad pooling or count."""
    dirs = [run_dirs] if isinstance(run_dirs, (str, Path)) else list(run_dirs or [])
    if not dirs:
        raise LabError("Pick at least one run to compare.")
    return [_sentence_similarity.topic_similarity(_probe_run_dir(d), pooling, per_topic) for d in dirs]


# What each objective puts inside the models: linear probes of every layer (probing.py), the logit lens
# (logit_lens.py) and attributions (attributions.py).
PROBE_TASKS = tuple(_probing.PROBE_TASKS)  # tags, roles (word level); topic, sentiment (sentence level)
PROBE_COLUMNS = list(_probing.PROBE_COLUMNS)
LENS_COLUMNS = list(_logit_lens.LENS_COLUMNS)
Attribution = _attributions.Attribution
ATTRIBUTION_METHODS = _attributions.METHODS
ATTRIBUTION_BASELINES = _attributions.BASELINES
ATTRIBUTION_DEFAULT_STEPS = _attributions.DEFAULT_STEPS
ATTRIBUTION_MAX_STEPS = _attributions.MAX_STEPS


def probe_layers(run_dir, task: str = "tags", seed: int = 0, progress=None):
    """A linear probe per (stream, layer) of a frozen run, against the majority baseline and the same probe on the
    untrained model of the same architecture and seed: a pandas DataFrame with columns stream, layer (0 =
    embeddings), depth (0.0 to 1.0), accuracy, majority, control, layer_name and selectivity (accuracy - control).
    `task`: "tags" or "roles" (per word), "topic" or "sentiment" (per sentence, from the mean of the layer); the
    sentences are the synthetic corpus's. The features are cached in the run folder (probe-features.safetensors).
    progress(done, total, message) is called while features are computed."""
    return _probing.probe_layers(_probe_run_dir(run_dir), task, seed, progress)


def best_probe_layer(frame) -> dict:
    """The row of a `probe_layers` table with the highest accuracy: {stream, layer, layer_name, depth, accuracy,
    control}, {} for none."""
    return _probing.best_probe_layer(frame)


def logit_lens(run_dir, text: str, top_k: int = 5):
    """What every layer predicts at the position the family predicts (the first [MASK] for the MLM families, the next
    token for the causal ones, a T5/MASS span's first token, CoVe's first translated token), decoded through the
    family's own output head with its final norm: a DataFrame with columns layer, rank, token, probability and
    layer_name; attrs: where, stream, note (where the head makes this an approximation), check_error."""
    return _logit_lens.logit_lens(_probe_run_dir(run_dir), text, top_k)


def explain_prediction(run_dir, text: str, method: str = "integrated_gradients", steps: int = 32, *,
                       baseline: str = "pad", target: str | None = None) -> Attribution:
    """Gradient x input or integrated gradients (`steps` Gauss-Legendre points from a baseline of [PAD] vectors or
    zeros) of the probability of the run's own answer at the position it predicts, or, for a fine-tuning folder with
    saved weights, of its classifier's label: an `Attribution` (tokens, scores, target, where, probability,
    baseline_probability, completeness_error)."""
    return _attributions.explain_prediction(_probe_run_dir(run_dir), text, method, steps, baseline=baseline,
                                            target=target)


def attributions(run_dir, text: str, method: str = "integrated_gradients", steps: int = 32) -> list[tuple[str, float]]:
    """One (token, attribution) pair per input token, for the family's prediction at the first [MASK] or the next
    token; `method` is "integrated_gradients" or "gradient_x_input" (`explain_prediction` has the details)."""
    return _attributions.attributions(_probe_run_dir(run_dir), text, method, steps)


# The Switch Transformer's routing (routing.py): which expert each token goes to in every Switch layer.
RoutingView = _routing.RoutingView


def switch_routing(run_dir, sentence: str) -> RoutingView:
    """The expert each token of `sentence` goes to in every Switch layer of a trained run (`RoutingView`: per layer,
    the tokens, their experts and router probabilities), read in evaluation mode. ValueError for a run without
    Switch layers, an RNN run, an empty or too long sentence."""
    return _routing.token_routing(_probe_run_dir(run_dir), sentence)


# The stories language's context tasks (text/story_tasks.py): `context_baselines()` the trivial baselines of each task
# (majority, word identity, n-grams) on its held-out stories; `blank_scores(run_dir, kind)` a run's top-1 fills of
# held-out "reference" or "agreement" blanks; `continuation_scores(run_dir)` the share of its continuations' sentences
# that the grammar parses (inference/context_scores.py).
context_baselines = _story_tasks.baseline_table
blank_scores = _context_scores.blank_scores
continuation_scores = _context_scores.continuation_scores
