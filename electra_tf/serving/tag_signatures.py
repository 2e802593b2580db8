"""The SavedModel of a tagging run: per-token labels on ids, and entities (or tags) of raw text
or of pre-split words, computed in the graph as finetune.py computes them.

Words are tokenized one by one (a word with no pieces becomes [UNK]), a word's label is read
at its first piece, a text longer than max_seq_length - 2 pieces is split into windows
doc_stride pieces apart, and each word is read from the window where it has the most context
(tasks/tagging_features.encode_windows). Entities are decoded as seqeval's default
(conlleval) mode reads chunks (tasks/tagging_metrics.default_entities); a chunk's score is
the mean over its words of the probability of each word's predicted tag.
"""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf import features as F
from electra_tf.data.vocab import Vocab
from electra_tf.serving import text as serving_text
from electra_tf.serving.signatures import ServingOptions, _ids_spec, _Serving
from electra_tf.tasks.tagging_metrics import SCHEMES

_OUTSIDE, _DOT = "O", "."


def _chunk_parts(label: str) -> tuple[str, str]:
  """(prefix, type) of a tag as default_entities reads it ("B-PER" -> ("B", "PER"))."""
  return label[0], label[1:].split("-", maxsplit=1)[-1] or "_"


class TaggerServing(_Serving):
  """serving_default on ids; tag_text on raw strings; tag_words on pre-split words.

  Args:
    model: an ElectraTagger.
    vocab: its vocab (with its TokenizerSpec).
    config: the run's finetune settings (max_seq_length, doc_stride).
    spec: the run's TaggingSpec as a dict (label_names, scheme).
  """

  def __init__(self, model, vocab: Vocab, config: dict, spec: dict,
               options: ServingOptions | None = None):
    super().__init__(model, vocab, config["max_seq_length"], options)
    budget = self.max_seq_length - 2
    self.doc_stride = max(1, min(int(config.get("doc_stride") or budget // 2), budget))
    names = list(spec["label_names"])
    self.scheme = spec.get("scheme", "none")
    self.label_names = tf.constant(names, tf.string)
    parts = [_chunk_parts(n) for n in names]
    types = sorted({t for _, t in parts} | {"_"})
    self.type_names = tf.constant(types, tf.string)
    self.label_prefix = tf.constant([p for p, _ in parts], tf.string)
    self.label_type = tf.constant([types.index(t) for _, t in parts], tf.int32)
    self.outside_type = types.index("_")

  @tf.function(input_signature=[_ids_spec()])
  def serve_ids(self, inputs):
    logits = tf.cast(self._run(self._check_ids(inputs))["logits"], tf.float32)
    best = tf.argmax(logits, -1, output_type=tf.int32)
    return {"logits": logits, "probabilities": tf.nn.softmax(logits), "label_ids": best,
            "labels": tf.gather(self.label_names, best)}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
  def serve_text(self, text):
    pieces, byte_starts, byte_ends = self.tokenizer.tokenize_words(text)
    starts = serving_text._char_offsets(text, byte_starts)
    ends = serving_text._char_offsets(text, byte_ends)
    out = self._tag(tf.cast(pieces, tf.int32), starts.flat_values, ends.flat_values)
    n = tf.shape(text)[0]
    row = tf.repeat(tf.range(n), out.pop("num_entities_"))
    length = out["entity_ends"] - out["entity_starts"]
    texts = tf.strings.substr(tf.gather(text, row), tf.cast(out.pop("starts_"), tf.int32),
                              tf.cast(length.flat_values, tf.int32), unit="UTF8_CHAR")
    out["entity_texts"] = length.with_flat_values(texts)
    return self._dense(out)

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.string, name="words"),
                                tf.TensorSpec([None], tf.int32, name="num_words")])
  def serve_words(self, words, num_words):
    with tf.control_dependencies([
        tf.debugging.assert_less_equal(num_words, tf.shape(words)[1],
                                       message="num_words is more than the words given"),
        tf.debugging.assert_non_negative(num_words, message="num_words is negative")]):
      mask = tf.range(tf.shape(words)[1])[tf.newaxis, :] < num_words[:, tf.newaxis]
    flat = tf.boolean_mask(words, mask)                                       # [TW]
    pieces = tf.cast(self.tokenizer.tokenize(flat), tf.int32)                 # [TW, (P)]
    pieces = tf.RaggedTensor.from_row_lengths(pieces, tf.cast(num_words, tf.int64))
    index = tf.ragged.range(tf.cast(num_words, tf.int64)).flat_values
    out = self._tag(pieces, index, index + 1)
    out.pop("num_entities_"), out.pop("starts_")
    return self._dense(out)

  def _dense(self, out: dict) -> dict:
    """Ragged [B, (n)] outputs padded into dense ones (TF Serving's REST API needs them)."""
    dense = {}
    for key, value in out.items():
      if isinstance(value, tf.RaggedTensor):
        default = {tf.string: "", tf.float32: 0.0}.get(value.dtype, -1)
        dense[key] = value.to_tensor(default_value=tf.cast(default, value.dtype))
      else:
        dense[key] = value
    return dense

  def _with_unk(self, pieces: tf.RaggedTensor) -> tf.RaggedTensor:
    """Words [TW, (P)] with a word that has no pieces given one [UNK] (training's rule)."""
    unk = tf.fill([pieces.nrows(), 1], tf.constant(self.tokenizer.vocab.unk_id, tf.int32))
    padded = tf.concat([pieces, tf.RaggedTensor.from_tensor(unk)], axis=1)
    lengths = pieces.row_lengths()
    keep = tf.ragged.range(lengths + 1) < tf.maximum(lengths, 1)[:, tf.newaxis]
    return tf.ragged.boolean_mask(padded, keep)

  def _windows(self, pieces: tf.RaggedTensor):
    """[CLS] pieces [SEP] windows of each example [B, (N)]: model inputs [V, L], and int32
    [B] windows per example, [B] pieces per example, [V] first window of each example."""
    L, stride, budget = self.max_seq_length, self.doc_stride, self.max_seq_length - 2
    n = tf.cast(pieces.row_lengths(), tf.int32)
    count = 1 + (tf.maximum(n - budget, 0) + stride - 1) // stride
    example = tf.repeat(tf.range(tf.size(n)), count)
    first = tf.cumsum(count, exclusive=True)
    start = (tf.range(tf.reduce_sum(count)) - tf.gather(first, example)) * stride
    length = tf.minimum(budget, tf.gather(n, example) - start)
    at = tf.ragged.range(start, start + length) + tf.gather(
        tf.cast(pieces.row_splits[:-1], tf.int32), example)[:, tf.newaxis]
    doc = at.with_flat_values(tf.gather(pieces.flat_values, at.flat_values))
    vocab = self.tokenizer.vocab
    packed, _ = tf_text.combine_segments([doc], start_of_sequence_id=vocab.cls_id,
                                         end_of_segment_id=vocab.sep_id)
    length = serving_text.padded_length(serving_text.longest_row(packed), L, self.buckets)
    ids, mask = serving_text.pad_ragged(packed, length, pad_value=vocab.pad_id)
    inputs = {F.INPUT_IDS: ids, F.INPUT_MASK: mask, F.SEGMENT_IDS: tf.zeros_like(ids)}
    return inputs, count, n, first

  def _word_logits(self, pieces: tf.RaggedTensor) -> tf.Tensor:
    """float32 [TW, labels]: each word's logits at its first piece, read from its window of
    most context (the first such window on a tie, as encode_windows)."""
    words = self._with_unk(pieces.values)                                     # [TW, (P)]
    per_example = tf.RaggedTensor.from_row_splits(
        words.values, tf.gather(words.row_splits, pieces.row_splits))        # [B, (N)]
    inputs, count, n, first_window = self._windows(per_example)
    logits = tf.cast(self._run(inputs)["logits"], tf.float32)
    row = tf.cast(pieces.value_rowids(), tf.int32)                            # [TW]
    f = tf.cast(words.row_splits[:-1] - tf.gather(per_example.row_splits, row), tf.int32)
    stride, budget = self.doc_stride, self.max_seq_length - 2
    k = tf.range(tf.maximum(tf.reduce_max(count), 1))[tf.newaxis, :]          # [1, K]
    start = k * stride
    length = tf.minimum(budget, tf.gather(n, row)[:, tf.newaxis] - start)     # [TW, K]
    fw = f[:, tf.newaxis]
    inside = (k < tf.gather(count, row)[:, tf.newaxis]) & (fw >= start) & (fw < start + length)
    score = tf.cast(tf.minimum(fw - start, start + length - 1 - fw), tf.float64) \
        + 0.01 * tf.cast(length, tf.float64)
    score = tf.where(inside, score, float("-inf"))
    best = tf.reduce_max(score, axis=1, keepdims=True)
    pick = tf.reduce_min(tf.where(tf.equal(score, best), k, tf.shape(k)[1]), axis=1)
    window = tf.gather(first_window, row) + pick
    position = f - pick * stride + 1
    return tf.gather_nd(logits, tf.stack([window, position], axis=1))

  def _tag(self, pieces: tf.RaggedTensor, word_starts: tf.Tensor, word_ends: tf.Tensor) -> dict:
    """Per-word tags and entities of [B, (W), (P)] word pieces with each word's span [TW]."""
    logits = self._word_logits(pieces)
    label = tf.argmax(logits, -1, output_type=tf.int32)
    prob = tf.gather(tf.nn.softmax(logits), label, batch_dims=1)
    batched = pieces.with_values  # [TW] -> [B, (W)]
    out = {"word_tags": batched(tf.gather(self.label_names, label)),
           "word_scores": batched(prob), "num_words": tf.cast(pieces.row_lengths(), tf.int32)}
    if self.scheme in SCHEMES:
      first, last, types = self._chunks(label, pieces.row_splits)
    else:  # plain tags: each word is its own "entity" of its tag
      first = last = tf.range(tf.size(label, out_type=tf.int64))
      types = tf.gather(self.label_names, label)
    sums = tf.concat([[0.0], tf.cumsum(prob)], 0)
    score = (tf.gather(sums, last + 1) - tf.gather(sums, first)) / tf.cast(last + 1 - first,
                                                                            tf.float32)
    row = tf.gather(pieces.value_rowids(), first)
    nrows = pieces.nrows()

    def per_example(values):
      return tf.RaggedTensor.from_value_rowids(values, row, nrows=nrows)

    starts = tf.gather(word_starts, first)
    out.update(word_starts=batched(word_starts), word_ends=batched(word_ends),
               entity_starts=per_example(starts), entity_ends=per_example(
                   tf.gather(word_ends, last)), entity_types=per_example(types),
               entity_scores=per_example(score))
    out["num_entities"] = tf.cast(out["entity_starts"].row_lengths(), tf.int32)
    out["num_entities_"], out["starts_"] = out["num_entities"], starts
    return out

  def _chunks(self, label: tf.Tensor, row_splits: tf.Tensor):
    """int64 (first word, last word) [C] and type strings [C] of the chunks of flat word
    labels [TW] split into sentences by `row_splits`, read as default_entities does."""
    prefix = tf.gather(self.label_prefix, label)
    type_ = tf.gather(self.label_type, label)
    total = tf.size(label, out_type=tf.int64)
    is_first = tf.scatter_nd(row_splits[:-1, tf.newaxis], tf.ones_like(row_splits[:-1]),
                             [total + 1])[:-1] > 0  # empty sentences share a split
    # A sentence's first word follows an O (and its last word is followed by one).
    prev_prefix = tf.where(is_first, _OUTSIDE, tf.concat([[_OUTSIDE], prefix[:-1]], 0))
    prev_type = tf.where(is_first, self.outside_type, tf.concat([[0], type_[:-1]], 0))

    def is_in(p, letters):
      return tf.reduce_any(tf.equal(p[:, tf.newaxis], list(letters)), axis=1)

    def ends(prev_p, p, prev_t, t):  # a chunk ends just before this word
      return (is_in(prev_p, "ES") | (is_in(prev_p, "BI") & is_in(p, "BSO"))
              | (~is_in(prev_p, (_OUTSIDE, _DOT)) & tf.not_equal(prev_t, t)))

    starts = (is_in(prefix, "BS") | (is_in(prev_prefix, "ESO") & is_in(prefix, "EI"))
              | (~is_in(prefix, (_OUTSIDE, _DOT)) & tf.not_equal(prev_type, type_)))
    is_last = tf.concat([is_first[1:], [True]], 0)
    next_prefix = tf.where(is_last, _OUTSIDE, tf.concat([prefix[1:], [_OUTSIDE]], 0))
    next_type = tf.where(is_last, self.outside_type, tf.concat([type_[1:], [0]], 0))
    closes = ends(prefix, next_prefix, type_, next_type)  # a chunk ends at this word
    first = tf.where(starts)[:, 0]
    close_at = tf.where(closes)[:, 0]
    closed_before = tf.cumsum(tf.cast(closes, tf.int64), exclusive=True)
    last = tf.gather(close_at, tf.gather(closed_before, first))
    return first, last, tf.gather(self.type_names, tf.gather(type_, first))
