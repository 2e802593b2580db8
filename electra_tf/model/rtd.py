"""Replaced-token detection as small pure functions: sampling, corruption, labels, losses."""

from __future__ import annotations

import tensorflow as tf


def _fmix32(x: tf.Tensor) -> tf.Tensor:
  """MurmurHash3's 32-bit finaliser: a cheap bijective mixer of uint32 values."""
  x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(16, tf.uint32)))
  x *= tf.constant(0x85EBCA6B, tf.uint32)
  x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(13, tf.uint32)))
  x *= tf.constant(0xC2B2AE35, tf.uint32)
  return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(16, tf.uint32)))


def position_uniforms(seed: int | tf.Tensor, step: tf.Tensor, rows: tf.Tensor,
                      num_positions: int) -> tf.Tensor:
  """One uniform in (0, 1) per (example, masked slot), a pure function of its arguments.

  Counter-based: the value of example `rows[b]` does not depend on how the global batch
  is split across replicas, so 1 and N replicas sample identically, and a resumed run
  draws what the uninterrupted run drew.

  Args:
    seed: the run's seed.
    step: the optimizer step.
    rows: int32 [B] global indices of this replica's examples.
    num_positions: P.

  Returns:
    float32 [B, P].
  """
  key = _fmix32(tf.cast(seed, tf.uint32) + tf.constant(0x9E3779B9, tf.uint32))
  key = _fmix32(tf.bitwise.bitwise_xor(key, tf.cast(step, tf.uint32)))
  counter = (tf.cast(rows, tf.uint32)[:, tf.newaxis] * tf.constant(num_positions, tf.uint32)
             + tf.cast(tf.range(num_positions), tf.uint32)[tf.newaxis, :])
  bits = _fmix32(_fmix32(counter + key) ^ key)
  # Top 24 bits, centred in their bucket: never exactly 0 or 1.
  top = tf.cast(tf.bitwise.right_shift(bits, tf.constant(8, tf.uint32)), tf.float32)
  return (top + 0.5) * (1.0 / (1 << 24))


def sample_from_logits(logits: tf.Tensor, uniforms: tf.Tensor, temperature: float = 1.0,
                       disallow_ids: tf.Tensor | None = None, block_size: int = 128) -> tf.Tensor:
  """Sample from softmax(logits / T) by inverting its CDF at the given uniforms.

  Exact up to float32 rounding of the cumulative sums, and it needs one random number
  per position instead of Gumbel-max's one per vocabulary entry (P x V), which is what
  makes the draw counter-based and replica-invariant at no cost.

  The search is two-level so that only one pass over [B, P, V] follows the softmax's:
  the unnormalised probabilities are summed in blocks of `block_size` ids, the block
  holding the target mass is found on the [B, P, V / block_size] cumulative sums, and only
  that block is scanned. A disallowed id's mass is removed from its block's sum and from
  the scanned block, so no [B, P, V] one-hot is built.

  Args:
    logits: float [B, P, V].
    uniforms: float32 [B, P] in (0, 1), e.g. from `position_uniforms`.
    temperature: sampling temperature T > 0.
    disallow_ids: optional int32 [B, P] ids that may not be sampled (disallow_correct).
    block_size: ids per block of the two-level search.

  Returns:
    int32 [B, P] sampled ids.
  """
  with tf.name_scope("sample_from_logits"):  # a class of its own in bench/speed/profile_step.py
    return _sample_from_logits(logits, uniforms, temperature, disallow_ids, block_size)


def _sample_from_logits(logits: tf.Tensor, uniforms: tf.Tensor, temperature: float = 1.0,
                       disallow_ids: tf.Tensor | None = None, block_size: int = 128) -> tf.Tensor:
  logits = tf.cast(logits, tf.float32)
  if temperature != 1.0:
    logits = logits / temperature
  vocab_size = tf.shape(logits)[-1]
  num_blocks = (vocab_size + block_size - 1) // block_size
  probs = tf.exp(logits - tf.reduce_max(logits, axis=-1, keepdims=True))  # unnormalised
  probs = tf.pad(probs, [[0, 0], [0, 0], [0, num_blocks * block_size - vocab_size]])
  blocks = tf.reshape(probs, tf.concat([tf.shape(probs)[:2], [num_blocks, block_size]], 0))
  block_mass = tf.reduce_sum(blocks, axis=-1)  # [B, P, NB]
  if disallow_ids is not None:
    disallow_ids = tf.cast(disallow_ids, tf.int32)
    removed = tf.gather(probs, disallow_ids[..., tf.newaxis], batch_dims=2)  # [B, P, 1]
    block_mass -= removed * tf.one_hot(disallow_ids // block_size, num_blocks)
    block_mass = tf.maximum(block_mass, 0.0)
  block_cdf = tf.math.cumsum(block_mass, axis=-1)
  target = uniforms[..., tf.newaxis] * block_cdf[..., -1:]  # [B, P, 1]
  block = tf.minimum(tf.reduce_sum(tf.cast(block_cdf < target, tf.int32), axis=-1),
                     num_blocks - 1)  # [B, P]
  before = tf.gather(tf.pad(block_cdf, [[0, 0], [0, 0], [1, 0]]), block[..., tf.newaxis],
                     batch_dims=2)  # mass of the earlier blocks, [B, P, 1]
  inside = tf.gather(blocks, block, batch_dims=2)  # [B, P, K]
  if disallow_ids is not None:  # an id outside this block gives an all-zero one-hot
    inside *= 1.0 - tf.one_hot(disallow_ids - block * block_size, block_size)
  offset = tf.reduce_sum(tf.cast(before + tf.math.cumsum(inside, axis=-1) < target, tf.int32),
                         axis=-1)
  sample = block * block_size + tf.minimum(offset, block_size - 1)
  return tf.minimum(sample, vocab_size - 1)


def scatter_update(ids: tf.Tensor, updates: tf.Tensor, positions: tf.Tensor,
                   weights: tf.Tensor) -> tf.Tensor:
  """`ids` with `updates` written at `positions` where `weights` > 0.

  Padding slots (weight 0, position 0) leave [CLS] untouched. Built from a one-hot
  product rather than a scatter so it compiles to dense ops under XLA/TPU.

  Args:
    ids: int32 [B, L].
    updates: int32 [B, P].
    positions: int32 [B, P], distinct among the real (weight > 0) slots.
    weights: float32 [B, P].

  Returns:
    int32 [B, L].
  """
  seq_len = tf.shape(ids)[1]
  real = tf.cast(weights > 0, tf.int32)
  onehot = tf.one_hot(positions, seq_len, dtype=tf.int32) * real[:, :, tf.newaxis]  # [B, P, L]
  written = tf.reduce_max(onehot, axis=1)  # [B, L]
  new_values = tf.reduce_sum(onehot * updates[:, :, tf.newaxis], axis=1)  # [B, L]
  return ids * (1 - written) + new_values


def position_mask(positions: tf.Tensor, weights: tf.Tensor, seq_len: int | tf.Tensor) -> tf.Tensor:
  """1.0 at the real masked positions, 0.0 elsewhere.

  Args:
    positions: int32 [B, P].
    weights: float32 [B, P] (0 in unused slots).
    seq_len: L.

  Returns:
    float32 [B, L].
  """
  real = tf.cast(weights > 0, tf.float32)[:, :, tf.newaxis]
  return tf.reduce_max(tf.one_hot(positions, seq_len, dtype=tf.float32) * real, axis=1)


def replaced_labels(original_ids: tf.Tensor, corrupted_ids: tf.Tensor,
                    input_mask: tf.Tensor) -> tf.Tensor:
  """1 where a real token was replaced by a different one; a correct sample counts as original.

  Args:
    original_ids, corrupted_ids, input_mask: int32 [B, L].

  Returns:
    int32 [B, L] labels.
  """
  return tf.cast(tf.not_equal(original_ids, corrupted_ids), tf.int32) * input_mask


def mlm_loss_terms(logits: tf.Tensor, target_ids: tf.Tensor,
                   weights: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """Weighted masked-LM cross-entropy as (numerator, denominator).

  Args:
    logits: float32 [B, P, V].
    target_ids: int32 [B, P].
    weights: float32 [B, P].

  Returns:
    (sum of weighted cross-entropies, sum of weights): scalars.
  """
  ce = sparse_cross_entropy(logits, target_ids)
  return tf.reduce_sum(ce * weights), tf.reduce_sum(weights)


def sparse_cross_entropy(logits: tf.Tensor, labels: tf.Tensor):
  """-log softmax(logits)[label] along the last axis, as tf.nn.sparse_softmax_cross_entropy.

  The same values and gradient (softmax - one_hot(label)), written out because TF's CPU
  kernel is slower at generator size (measured by
  `python bench/speed/step_ab.py --variants=ours,tf_cross_entropy`; docs/benchmarks.md). The
  gradient reuses the forward pass's exponentials and writes the -1 at each label with one
  scatter, so no [..., V] one-hot is built. Labels must be in [0, V).

  Args:
    logits: float [..., V].
    labels: int [...].

  Returns:
    float [...] cross-entropies.
  """
  with tf.name_scope("sparse_cross_entropy"):  # a class of its own in bench/speed/profile_step.py
    return _sparse_cross_entropy(logits, labels)


@tf.custom_gradient
def _sparse_cross_entropy(logits: tf.Tensor, labels: tf.Tensor):
  vocab_size = tf.shape(logits)[-1]
  flat = tf.reshape(logits, [-1, vocab_size])
  flat_labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
  peak = tf.reduce_max(flat, axis=-1, keepdims=True)
  exps = tf.exp(flat - peak)
  total = tf.reduce_sum(exps, axis=-1, keepdims=True)
  picked = tf.gather(flat, flat_labels[:, tf.newaxis], batch_dims=1)
  ce = tf.reshape(peak + tf.math.log(total) - picked, tf.shape(labels))

  def grad(upstream):
    upstream = tf.reshape(tf.cast(upstream, flat.dtype), [-1])
    dlogits = exps * (upstream[:, tf.newaxis] / total)
    rows = tf.range(tf.shape(flat_labels)[0])
    dlogits = tf.tensor_scatter_nd_sub(dlogits, tf.stack([rows, flat_labels], axis=1),
                                       upstream)
    return tf.reshape(dlogits, tf.shape(logits)), None

  return ce, grad


def copy_mlm_loss_terms(logits: tf.Tensor, copy_logits: tf.Tensor, target_ids: tf.Tensor,
                        input_ids: tf.Tensor, weights: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """All-Tokens MLM cross-entropy with the copy mechanism, as (numerator, denominator).

  The model's distribution at a position with input token x is
  p(t) = D * 1[t = x] + (1 - D) * softmax(logits)[t], with D = sigmoid(copy_logit);
  the loss is -log p(target), computed in log space.

  Args:
    logits: float32 [B, L, V] MLM logits.
    copy_logits: float32 [B, L].
    target_ids: int32 [B, L] the original tokens.
    input_ids: int32 [B, L] the tokens the model read.
    weights: float [B, L] (the input mask).

  Returns:
    (sum of weighted cross-entropies, sum of weights): scalars.
  """
  log_softmax_target = -sparse_cross_entropy(logits, target_ids)  # log softmax[target]
  log_copy = tf.math.log_sigmoid(copy_logits)
  log_generate = tf.math.log_sigmoid(-copy_logits) + log_softmax_target
  high = tf.maximum(log_copy, log_generate)
  log_both = high + tf.math.log1p(tf.exp(-tf.abs(log_copy - log_generate)))
  log_p = tf.where(tf.equal(target_ids, input_ids), log_both, log_generate)
  weights = tf.cast(weights, tf.float32)
  return -tf.reduce_sum(log_p * weights), tf.reduce_sum(weights)


def copy_mlm_predictions(logits: tf.Tensor, copy_logits: tf.Tensor,
                         input_ids: tf.Tensor) -> tf.Tensor:
  """The most probable token under the copy mixture: int32 [B, L] (shapes as above)."""
  probs = tf.nn.softmax(logits)
  best = tf.argmax(probs, -1, output_type=tf.int32)
  copy = tf.sigmoid(copy_logits)
  p_input = copy + (1.0 - copy) * tf.gather(probs, input_ids[..., tf.newaxis],
                                            batch_dims=2)[..., 0]
  p_best = (1.0 - copy) * tf.reduce_max(probs, -1)
  return tf.where(p_input >= p_best, input_ids, best)


def rtd_loss_terms(logits: tf.Tensor, labels: tf.Tensor,
                   input_mask: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """Sigmoid cross-entropy over the weighted tokens as (numerator, denominator).

  Args:
    logits: float32 [B, L].
    labels: int32 [B, L].
    input_mask: [B, L] weights: the input mask (every real token) or the masked positions.

  Returns:
    (sum of weighted cross-entropies, sum of weights): scalars.
  """
  mask = tf.cast(input_mask, tf.float32)
  ce = tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(labels, tf.float32), logits=logits)
  return tf.reduce_sum(ce * mask), tf.reduce_sum(mask)
