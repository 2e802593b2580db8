"""In-graph text handling for SavedModels: packing sentences, and SQuAD windows and span search
that follow electra_tf/tasks/squad_data.py and squad_postprocess.py rule for rule."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_text as tf_text

from electra_tf import features as F

_NEG_INF = float("-inf")


def padded_length(longest: tf.Tensor, max_seq_length: int,
                  buckets: tuple[int, ...] = ()) -> tf.Tensor:
  """int32 scalar: the length a batch whose longest sequence has `longest` (<=
  max_seq_length) tokens is padded to: that length itself when `buckets` is empty, else the
  smallest bucket that holds it (max_seq_length is always a bucket)."""
  longest = tf.cast(longest, tf.int32)
  if not buckets:
    return longest
  sizes = tf.constant(sorted({b for b in buckets if 0 < b < max_seq_length} | {max_seq_length}),
                      tf.int32)
  return tf.reduce_min(tf.where(sizes >= longest, sizes, max_seq_length))


def longest_row(ids: tf.RaggedTensor) -> tf.Tensor:
  """The longest row of ids [B, (n)], at least 2 ([CLS] [SEP]) so an empty batch has a shape."""
  return tf.maximum(tf.reduce_max(ids.row_lengths()), 2)


def pad_ragged(ids: tf.RaggedTensor, length: tf.Tensor, pad_value: int = 0):
  """int32 [B, length] ids and input mask of ragged [B, (n)] ids, each n <= length."""
  ids, mask = tf_text.pad_model_inputs(tf.cast(ids, tf.int32), length, pad_value=pad_value)
  return ids, tf.cast(mask, tf.int32)


def pack_sentences(tokenizer, texts: list[tf.Tensor], max_seq_length: int, cls_id: int,
                   sep_id: int, buckets: tuple[int, ...] = ()) -> dict[str, tf.Tensor]:
  """[CLS] a [SEP] (b [SEP]) as int32 [B, L] model inputs, L the longest in the batch (or
  its length bucket, see padded_length), never more than max_seq_length.

  Pairs are trimmed round-robin, like classification_data.encode's longest-first rule.
  """
  segments = [tf.cast(tokenizer.tokenize(t), tf.int32) for t in texts]
  budget = max_seq_length - 1 - len(segments)
  segments = tf_text.RoundRobinTrimmer(budget).trim(segments)
  ids, segment_ids = tf_text.combine_segments(segments, start_of_sequence_id=cls_id,
                                              end_of_segment_id=sep_id)
  length = padded_length(longest_row(ids), max_seq_length, buckets)
  ids, mask = pad_ragged(ids, length)
  segment_ids, _ = pad_ragged(segment_ids, length)
  return {F.INPUT_IDS: ids, F.INPUT_MASK: mask, F.SEGMENT_IDS: segment_ids}


def _char_offsets(texts: tf.Tensor, byte_offsets: tf.RaggedTensor) -> tf.RaggedTensor:
  """UTF-8 byte offsets [B, (n)] into `texts` -> character offsets (squad_data.char_offsets)."""
  _, char_starts = tf.strings.unicode_decode_with_offsets(texts, "UTF-8", errors="replace")
  big = tf.int64.max
  sorted_starts = char_starts.to_tensor(default_value=big)
  dense = byte_offsets.to_tensor(default_value=0)
  index = tf.searchsorted(sorted_starts, dense, side="left")
  return tf.RaggedTensor.from_tensor(tf.cast(index, tf.int64), lengths=byte_offsets.row_lengths())


class SquadWindows:
  """Every window of a batch of (question, context) pairs, as squad_data.convert_examples
  makes them (one row per window, example-major).

  Windows are cut as for max_seq_length; the batch is padded to its longest window L (or
  that length's bucket, see padded_length).

  Attributes:
    inputs: model inputs, int32 [W, L].
    example: int32 [W] the example each window belongs to.
    char_starts, char_ends: int64 [W, L] character span of each position's context token,
      -1 elsewhere.
    max_context: bool [W, L].
  """

  def __init__(self, tokenizer, questions, contexts, *, max_seq_length: int, doc_stride: int,
               max_query_length: int, cls_id: int, sep_id: int, buckets: tuple[int, ...] = ()):
    query = tf.cast(tokenizer.tokenize(questions), tf.int32)[:, :max_query_length]
    ids, byte_starts, byte_ends = tokenizer.tokenize_with_offsets(contexts)
    ids = tf.cast(ids, tf.int32)
    char_starts = _char_offsets(contexts, byte_starts)
    char_ends = _char_offsets(contexts, byte_ends)
    n = tf.cast(ids.row_lengths(), tf.int32)                                  # [B]
    q_len = tf.cast(query.row_lengths(), tf.int32)
    window = max_seq_length - q_len - 3                                       # [B]
    step = tf.minimum(window, doc_stride)
    count = 1 + (tf.maximum(n - window, 0) + step - 1) // step                # [B]
    self.example = tf.repeat(tf.range(tf.size(n)), count)                     # [W]
    first = tf.cumsum(count, exclusive=True)
    w_index = tf.range(tf.reduce_sum(count)) - tf.gather(first, self.example)
    start = w_index * tf.gather(step, self.example)                           # [W]
    length = tf.minimum(tf.gather(window, self.example),
                        tf.gather(n, self.example) - start)                   # [W]
    doc_positions = tf.ragged.range(start, start + length)                    # [W, (len)]
    rows = tf.gather(self.example, doc_positions.value_rowids())
    flat = tf.stack([rows, doc_positions.flat_values], axis=1)
    doc = doc_positions.with_flat_values(tf.gather_nd(ids.to_tensor(), flat))
    windows_query = tf.gather(query, self.example)
    packed, segment_ids = tf_text.combine_segments(
        [windows_query, doc], start_of_sequence_id=cls_id, end_of_segment_id=sep_id)
    L = padded_length(longest_row(packed), max_seq_length, buckets)
    input_ids, mask = pad_ragged(packed, L)
    segment_ids, _ = pad_ragged(segment_ids, L)
    self.inputs = {F.INPUT_IDS: input_ids, F.INPUT_MASK: mask, F.SEGMENT_IDS: segment_ids}
    # Context position j of a window sits at sequence position offset + j.
    offset = tf.gather(q_len, self.example) + 2                               # [W]
    j = tf.range(L)[tf.newaxis, :] - offset[:, tf.newaxis]                    # [W, L]
    in_doc = (j >= 0) & (j < length[:, tf.newaxis])
    token = tf.clip_by_value(start[:, tf.newaxis] + j, 0, tf.maximum(tf.reduce_max(n) - 1, 0))
    gather_at = tf.stack([tf.broadcast_to(self.example[:, tf.newaxis], tf.shape(token)), token],
                         axis=-1)

    def at_tokens(values: tf.RaggedTensor) -> tf.Tensor:
      dense = tf.pad(values.to_tensor(default_value=-1), [[0, 0], [0, 1]], constant_values=-1)
      return tf.where(in_doc, tf.gather_nd(dense, gather_at), tf.constant(-1, tf.int64))

    self.char_starts = at_tokens(char_starts)
    self.char_ends = at_tokens(char_ends)
    self.max_context = in_doc & self._is_max_context(start, length, token)
    self.num_examples = tf.size(n)
    self.window_rank = w_index

  def _is_max_context(self, start, length, token):
    """bool [W, L]: the window is the first where the token has its best context score."""
    start_f = tf.cast(start, tf.float32)[tf.newaxis, :, tf.newaxis]          # [1, V, 1]
    length_f = tf.cast(length, tf.float32)[tf.newaxis, :, tf.newaxis]
    t = tf.cast(token, tf.float32)[:, tf.newaxis, :]                          # [W, 1, L]
    inside = (t >= start_f) & (t < start_f + length_f)
    same = tf.equal(self.example[:, tf.newaxis], self.example[tf.newaxis, :])[:, :, tf.newaxis]
    score = tf.minimum(t - start_f, start_f + length_f - 1.0 - t) + 0.01 * length_f
    score = tf.where(inside & same, score, _NEG_INF)                          # [W, V, L]
    best = tf.argmax(score, axis=1, output_type=tf.int32)                     # first max
    return tf.equal(best, tf.range(tf.shape(start)[0])[:, tf.newaxis])


def _first_max(scores: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """(max, index of its first occurrence) along the last axis of [N, M]."""
  best = tf.reduce_max(scores, axis=-1)
  index = tf.range(tf.shape(scores)[-1])[tf.newaxis, :]
  hit = tf.where(tf.equal(scores, best[:, tf.newaxis]), index, tf.shape(scores)[-1])
  return best, tf.reduce_min(hit, axis=-1)


def best_spans(windows: SquadWindows, outputs: dict[str, tf.Tensor], *, n_best_size: int,
               max_answer_length: int) -> dict[str, tf.Tensor]:
  """The best valid span of each example, searched as squad_postprocess.postprocess does.

  Returns:
    dict of float32 "score" [B] (-inf when no span is valid), int64 "char_start",
    "char_end" [B] (-1 when none), and float32 "null_score" [B] (lowest [CLS] start + end
    over the windows; +inf with the joint head).
  """
  start_logits = outputs["start_logits"]                                    # [W, L]
  L = tf.shape(start_logits)[1]
  k = tf.minimum(n_best_size, L)
  if "start_top_index" in outputs:  # joint head: row r of end_logits is for start_top_index[r]
    k_start = tf.minimum(n_best_size, tf.shape(outputs["start_top_index"])[1])
    starts = outputs["start_top_index"][:, :k_start]                        # [W, Ks]
    ends = tf.math.top_k(outputs["end_logits"][:, :k_start], k).indices       # [W, Ks, Ke]
    end_scores = tf.gather(outputs["end_logits"][:, :k_start], ends, batch_dims=2)
  else:
    starts = tf.math.top_k(start_logits, k).indices                          # [W, Ks]
    top_end = tf.math.top_k(outputs["end_logits"], k).indices                 # [W, Ke]
    ends = tf.tile(top_end[:, tf.newaxis, :], [1, tf.shape(starts)[1], 1])
    end_scores = tf.gather(outputs["end_logits"], ends, batch_dims=1)
  s = tf.broadcast_to(starts[:, :, tf.newaxis], tf.shape(ends))             # [W, Ks, Ke]
  start_scores = tf.gather(start_logits, s, batch_dims=1)
  valid = ((tf.gather(windows.char_starts, s, batch_dims=1) >= 0)
           & (tf.gather(windows.char_starts, ends, batch_dims=1) >= 0)
           & tf.gather(windows.max_context, s, batch_dims=1)
           & (ends >= s) & (ends - s + 1 <= max_answer_length))
  scores = tf.where(valid, start_scores + end_scores, _NEG_INF)
  per_window = tf.reshape(scores, [tf.shape(scores)[0], -1])                # [W, Ks*Ke]
  # Examples' windows side by side, window-major as the Python search orders candidates.
  max_windows = tf.reduce_max(tf.math.bincount(windows.example, minlength=1))
  width = tf.shape(per_window)[1]
  grid = tf.tensor_scatter_nd_update(
      tf.fill([windows.num_examples, max_windows, width], _NEG_INF),
      tf.stack([windows.example, windows.window_rank], axis=1), per_window)
  grid = tf.reshape(grid, [windows.num_examples, -1])
  best, flat = _first_max(grid)
  w_rank, cand = flat // width, flat % width
  first_window = tf.math.unsorted_segment_min(tf.range(tf.shape(per_window)[0]),
                                              windows.example, windows.num_examples)
  found = tf.math.is_finite(best)
  w = tf.where(found, first_window + w_rank, 0)
  cand = tf.where(found, cand, 0)
  ke = tf.shape(s)[2]
  at = tf.stack([w, cand // ke, cand % ke], axis=1)
  span_start, span_end = tf.gather_nd(s, at), tf.gather_nd(ends, at)
  char_start = tf.gather_nd(windows.char_starts, tf.stack([w, span_start], axis=1))
  char_end = tf.gather_nd(windows.char_ends, tf.stack([w, span_end], axis=1))
  out = {"score": best, "char_start": tf.where(found, char_start, -1),
         "char_end": tf.where(found, char_end, -1)}
  if "start_top_index" in outputs:
    out["null_score"] = tf.fill(tf.shape(best), float("inf"))
  else:
    null = start_logits[:, 0] + outputs["end_logits"][:, 0]
    out["null_score"] = tf.math.unsorted_segment_min(null, windows.example,
                                                     windows.num_examples)
  return out

