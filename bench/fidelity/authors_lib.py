"""The authors' ELECTRA pretraining graph (google-research/electra) under tf.compat.v1 in this
TensorFlow, with the fewest shims that let it run, fed our masks and generator samples.

Shims (everything else is their code as published):
  1. TF_USE_LEGACY_KERAS=1, set before TensorFlow is imported: tf.compat.v1.layers.dense
     (their every dense layer) exists in TF 2.16+ only with Keras 2 (tf_keras) behind it.
  2. `tensorflow.contrib.layers.layer_norm` (contrib left TensorFlow in 2.0): TF 1.15's own
     function rewritten on tf.compat.v1 (variables beta and gamma under a LayerNorm scope,
     nn.moments over the last axis, nn.batch_normalization with epsilon 1e-12).
  3. `tf.estimator.SessionRunHook` (tf.estimator left TensorFlow in 2.16): a plain base class,
     only so that util/training_utils.py's ETAHook class can be defined on import. No
     estimator runs; the graph is built with their PretrainingModel and create_optimizer.
Feeds (where their graph draws random numbers, ours are fed instead):
  - pretrain_helpers.mask(): returns our batch's masked input ids, positions, ids and weights.
  - pretrain_helpers.sample_from_softmax(): returns the one-hot of our generator's samples.
  - dropout: off on both sides (their is_training=False; our dropout rates 0).
Optionally (adam_constants="ours"), their AdamWeightDecayOptimizer gets betas whose
complements are ours: see matched_betas.
"""

from __future__ import annotations

import os
import re
import sys
import types

import numpy as np

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


def install_shims(repo: str) -> None:
  """Makes their modules importable from `repo` in this TensorFlow (shims 2 and 3)."""
  import tensorflow.compat.v1 as tf1

  if os.environ.get("TF_USE_LEGACY_KERAS") != "1":
    raise SystemExit("error: TF_USE_LEGACY_KERAS=1 must be set before TensorFlow is imported")

  def layer_norm(inputs, center=True, scale=True, activation_fn=None, reuse=None,
                 variables_collections=None, outputs_collections=None, trainable=True,
                 begin_norm_axis=1, begin_params_axis=-1, scope=None):
    del variables_collections, outputs_collections  # their code passes neither
    with tf1.variable_scope(scope, "LayerNorm", [inputs], reuse=reuse):
      inputs = tf1.convert_to_tensor(inputs)
      rank = inputs.shape.ndims
      if begin_norm_axis < 0:
        begin_norm_axis = rank + begin_norm_axis
      params_shape = inputs.shape[begin_params_axis:]
      beta = tf1.get_variable("beta", shape=params_shape, dtype=inputs.dtype,
                              initializer=tf1.zeros_initializer(), trainable=trainable
                              ) if center else None
      gamma = tf1.get_variable("gamma", shape=params_shape, dtype=inputs.dtype,
                               initializer=tf1.ones_initializer(), trainable=trainable
                               ) if scale else None
      mean, variance = tf1.nn.moments(inputs, list(range(begin_norm_axis, rank)),
                                      keep_dims=True)
      outputs = tf1.nn.batch_normalization(inputs, mean, variance, offset=beta, scale=gamma,
                                           variance_epsilon=1e-12)
      outputs.set_shape(inputs.shape)
      return activation_fn(outputs) if activation_fn is not None else outputs

  contrib = types.ModuleType("tensorflow.contrib")
  contrib.layers = types.ModuleType("tensorflow.contrib.layers")
  contrib.layers.layer_norm = layer_norm
  sys.modules.setdefault("tensorflow.contrib", contrib)
  sys.modules.setdefault("tensorflow.contrib.layers", contrib.layers)
  if not hasattr(tf1, "estimator"):
    tf1.estimator = types.SimpleNamespace(SessionRunHook=object)
  if repo not in sys.path:
    sys.path.insert(0, repo)


def authors_commit(repo: str) -> str:
  """The checkout's commit: git's, or the COMMIT file an archive was unpacked with."""
  import subprocess

  try:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    path = os.path.join(repo, "COMMIT")
    return open(path).read().strip()[:7] if os.path.exists(path) else "unknown"


def their_config(shape: dict, data_dir: str, vocab_path: str):
  """Their PretrainingConfig for our shapes (model_hparam_overrides carry the encoder)."""
  import configure_pretraining

  return configure_pretraining.PretrainingConfig(
      "authors_step", data_dir, vocab_file=vocab_path, model_size="small",
      vocab_size=shape["vocab_size"], embedding_size=shape["embedding_size"],
      model_hparam_overrides={k: shape[k] for k in (
          "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")},
      generator_hidden_size=shape["generator_fraction"], max_seq_length=shape["seq_length"],
      train_batch_size=shape["batch_size"], mask_prob=shape["mask_prob"],
      learning_rate=shape["learning_rate"], num_train_steps=shape["num_train_steps"],
      num_warmup_steps=shape["warmup_steps"], weight_decay_rate=shape["weight_decay"])


def matched_betas(beta_1: float = 0.9, beta_2: float = 0.999) -> tuple[float, float]:
  """Betas with which their optimizer computes our fused kernel's constants exactly.

  Their _apply_gradients writes beta * m + (1.0 - beta) * g with Python floats: 1.0 - beta is
  computed in float64 (1 - 0.999 = 0.0010000000000000009), and both become float32 constants
  when tf.multiply meets the float32 slot (0.999 -> 0.99900001, 1 - 0.999 -> 0.001).
  TensorFlow's ResourceApplyAdam (CPU: m += (g - m) * (1 - beta1), v += (g^2 - v) * (1 -
  beta2), T = float32) and our written-out update subtract the float32 beta from float32 1:
  0.100000024 and 0.00099998713. Returning beta = 1 - float(float32(1) - float32(beta)), i.e.
  float32(beta) as a Python float, keeps their beta's float32 constant as it was and makes
  their float64 1.0 - beta exactly the float32 complement (Sterbenz: exact in both)."""
  out = []
  for beta in (beta_1, beta_2):
    complement = float(np.float32(1) - np.float32(beta))
    matched = 1.0 - complement
    assert np.float32(matched) == np.float32(beta) and 1.0 - matched == complement
    out.append(matched)
  return out[0], out[1]


class AuthorsStep:
  """Their graph: PretrainingModel + create_optimizer, our draws fed, weights from a TF1
  checkpoint. `run(batch, samples)` returns losses and gradients, then applies one update.
  adam_constants "ours": their optimizer with matched_betas (our kernel's 1 - beta)."""

  def __init__(self, config, checkpoint: str, start_step: int, adam_constants: str = "theirs"):
    import run_pretraining
    import tensorflow.compat.v1 as tf1
    from model import optimization

    from pretrain import pretrain_data, pretrain_helpers

    B, L, P = config.train_batch_size, config.max_seq_length, config.max_predictions_per_seq
    self.graph = tf1.Graph()
    with self.graph.as_default():
      ints = {k: tf1.placeholder(tf1.int32, [B, L], k) for k in (
          "input_ids", "input_mask", "segment_ids", "masked_input_ids")}
      ints.update({k: tf1.placeholder(tf1.int32, [B, P], k) for k in (
          "masked_lm_positions", "masked_lm_ids", "samples")})
      self.feeds = {**ints, "masked_lm_weights": tf1.placeholder(tf1.float32, [B, P])}
      f = self.feeds

      def fed_mask(config, inputs, mask_prob, **unused):
        return pretrain_data.get_updated_inputs(
            inputs, input_ids=f["masked_input_ids"], masked_lm_positions=f["masked_lm_positions"],
            masked_lm_ids=f["masked_lm_ids"], masked_lm_weights=f["masked_lm_weights"])

      def fed_samples(logits, disallow=None):
        return tf1.one_hot(f["samples"], logits.shape[-1])

      captured = {}
      original = run_pretraining.PretrainingModel._get_discriminator_output

      def capture(model, *args, **kwargs):
        captured["disc"] = original(model, *args, **kwargs)
        return captured["disc"]

      drawn = pretrain_helpers.mask, pretrain_helpers.sample_from_softmax
      pretrain_helpers.mask, pretrain_helpers.sample_from_softmax = fed_mask, fed_samples
      run_pretraining.PretrainingModel._get_discriminator_output = capture
      try:
        model = run_pretraining.PretrainingModel(
            config, {k: f[k] for k in ("input_ids", "input_mask", "segment_ids")}, False)
      finally:  # their functions back, for their_masks
        pretrain_helpers.mask, pretrain_helpers.sample_from_softmax = drawn
        run_pretraining.PretrainingModel._get_discriminator_output = original
      self.losses = {"gen_loss": model.mlm_output.loss, "disc_loss": captured["disc"].loss,
                     "loss": model.total_loss}
      self.variables = {v.op.name: v for v in tf1.trainable_variables()}
      self.gradients = {name: tf1.convert_to_tensor(g) for name, g in zip(
          self.variables, tf1.gradients(model.total_loss, list(self.variables.values())))}
      # create_optimizer builds AdamWeightDecayOptimizer(beta_1=0.9, beta_2=0.999); "ours"
      # swaps its betas for matched_betas as it applies the gradients (a subclass cannot
      # stand in: their __init__ names the class in super()).
      published = optimization.AdamWeightDecayOptimizer.apply_gradients

      def apply_matched(optimizer, *args, **kwargs):
        optimizer.beta_1, optimizer.beta_2 = matched_betas(optimizer.beta_1, optimizer.beta_2)
        return published(optimizer, *args, **kwargs)

      if adam_constants == "ours":
        optimization.AdamWeightDecayOptimizer.apply_gradients = apply_matched
      try:
        self.train_op = optimization.create_optimizer(
            model.total_loss, config.learning_rate, config.num_train_steps,
            weight_decay_rate=config.weight_decay_rate, warmup_steps=config.num_warmup_steps,
            lr_decay_power=config.lr_decay_power)
      finally:
        optimization.AdamWeightDecayOptimizer.apply_gradients = published
      # What their update multiplies m and v by: the float32 scalars of the top-level
      # Mul_N/x constants (their _apply_gradients runs outside any name scope), with counts.
      values = [float(tf1.make_ndarray(op.get_attr("value"))) for op in self.graph.get_operations()
                if op.type == "Const" and re.fullmatch(r"Mul(_\d+)?/x", op.name)
                and op.get_attr("dtype") == tf1.float32]
      self.adam_constants = {repr(v): values.count(v) for v in sorted(set(values))}
      stored = dict(tf1.train.list_variables(checkpoint))
      missing = sorted(set(self.variables) - set(stored))
      if missing:
        raise SystemExit(f"error: {checkpoint} lacks {missing}")
      tf1.train.init_from_checkpoint(checkpoint, {n: n for n in self.variables})
      self.session = tf1.Session(graph=self.graph)
      self.session.run(tf1.global_variables_initializer())
      tf1.train.get_global_step().load(start_step, self.session)

  def run(self, batch: dict, samples: np.ndarray) -> tuple[dict, dict]:
    """(losses, gradients) of the batch at the current weights; then one update."""
    feed = {self.feeds[k]: v for k, v in batch.items() if k in self.feeds}
    feed[self.feeds["samples"]] = samples
    losses, grads = self.session.run((self.losses, self.gradients), feed)
    self.session.run(self.train_op, feed)
    return losses, grads

  def weights(self) -> dict[str, np.ndarray]:
    return self.session.run(self.variables)


def mask_stats(masked: list[dict], vocab) -> dict:
  """Per-sequence masking statistics of masked batches (numpy)."""
  preds, distinct, mask_share, relpos, bad, counts = [], [], [], [], 0, {}
  for b in masked:
    for i in range(b["input_ids"].shape[0]):
      ids, real = b["input_ids"][i], b["input_mask"][i]
      n = int(real.sum())
      chosen = b["masked_lm_positions"][i][b["masked_lm_weights"][i] > 0]
      unique = np.unique(chosen)
      preds.append(len(chosen))
      distinct.append(len(unique))
      counts.setdefault(n, []).append(len(chosen))
      bad += int(np.isin(ids[unique], [vocab.cls_id, vocab.sep_id]).sum()
                 + (real[unique] == 0).sum())
      mask_share.append(float((b["masked_input_ids"][i][unique] == vocab.mask_id).mean()))
      relpos.extend((unique / max(n - 1, 1)).tolist())
  hist = np.histogram(relpos, bins=10, range=(0, 1))[0] / len(relpos)
  return {"sequences": len(preds), "predictions": float(np.mean(preds)),
          "distinct": float(np.mean(distinct)),
          "duplicates": 1 - float(np.sum(distinct)) / float(np.sum(preds)),
          "mask_share": float(np.average(mask_share, weights=distinct)),
          "special_or_pad_chosen": bad, "position_hist": hist.tolist(),
          "by_length": {n: float(np.mean(c)) for n, c in sorted(counts.items())}}


def their_masks(config, batches: list[dict], repeats: int) -> list[dict]:
  """Their pretrain_helpers.mask() on each batch `repeats` times (fresh draws every run)."""
  import tensorflow.compat.v1 as tf1

  from pretrain import pretrain_data, pretrain_helpers

  B, L = batches[0]["input_ids"].shape
  graph = tf1.Graph()
  with graph.as_default():
    tf1.set_random_seed(0)
    feeds = {k: tf1.placeholder(tf1.int32, [B, L]) for k in ("input_ids", "input_mask",
                                                                "segment_ids")}
    masked = pretrain_helpers.mask(config, pretrain_data.features_to_inputs(feeds),
                                   config.mask_prob)
    fetch = {"masked_input_ids": masked.input_ids,
             "masked_lm_positions": masked.masked_lm_positions,
             "masked_lm_weights": masked.masked_lm_weights}
    with tf1.Session(graph=graph) as session:
      return [{**batch, **session.run(fetch, {feeds[k]: batch[k] for k in feeds})}
              for batch in batches for _ in range(repeats)]
