r"""Our pretraining step beside variants with one optimisation undone, in one process.

  python bench/speed/step_ab.py                                   # small, bfloat16, all variants
  python bench/speed/step_ab.py --variants=ours,keras_layer_norm --rounds=5

Variants (each rebuilds the model with the earlier code path put back):
  ours                  the step as it is
  philox_dropout        dropout from Philox bits and TensorFlow ops (before the XLA-fused
                        dropout of electra_tf/model/fused.py)
  dropout_32bit_select  32 random bits per element and where(keep, x * scale, 0) (before
                        2026-11-24's 16-bit draw and one-multiply mask)
  unfused_gelu          GELU as TensorFlow ops with the written-out gradient (before the
                        XLA-fused GELU kernels of electra_tf/model/fused.py)
  autodiff_gelu         tf.nn.gelu(approximate=False), differentiated op by op
  keras_layer_norm      Keras LayerNormalization's own call, differentiated op by op
  keras_attention       Keras MultiHeadAttention's einsums for the scores and the context
                        (before the heads-major batched matmuls)
  tf_cross_entropy      tf.nn.sparse_softmax_cross_entropy_with_logits for the generator loss
  written_out_adam      AdamW as a dozen elementwise ops per variable (before TensorFlow's fused
                        Adam kernel after the decay)
  float32_gelu          Model Garden's float32 activation layer under mixed bfloat16 (casts
                        of the [tokens, 4H] activations around the GELU, both ways)
  reduction_kernels     the bias and LayerNorm gradients' sums and row means by TensorFlow's
                        reduction kernels (before elementwise's matrix-vector products)
  per_variable_scalars  AdamW's learning rate, betas and Adam powers computed for each
                        variable (before they were computed once per step and dtype)

All variants share the batch and are timed in alternating rounds (median of `--reps`
steps each), so a slow spell of this shared VM hits them alike. Prints a table and one
JSON line with each variant's median step in ms and its ratio to ours.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

VARIANTS = ("ours", "philox_dropout", "dropout_32bit_select", "unfused_gelu", "autodiff_gelu",
            "keras_layer_norm", "keras_attention", "tf_cross_entropy", "written_out_adam",
            "float32_gelu", "per_variable_scalars", "reduction_kernels")


@contextlib.contextmanager
def undone(variant: str):
  """Within this block, models are built (and traced) with `variant`'s earlier code."""
  import tensorflow as tf
  import tf_keras

  from electra_tf.model import dropout, elementwise, layers, pretrainer, rtd
  from electra_tf.training import optimizer

  # Every attribute a variant may replace, restored on the way out.
  patchable = [(dropout.SeededDropout, "call"), (layers, "exact_gelu"),
               (layers.LayerNorm, "call"), (layers._SeededAttention, "_compute_attention"),
               (rtd, "sparse_cross_entropy"), (pretrainer.ElectraPretrainer, "_fuse"),
               (layers.ElectraTransformerBlock, "build"),
               (optimizer.AdamWeightDecay, "fused_update"),
               (optimizer.AdamWeightDecay, "_resource_apply_dense"),
               (elementwise, "_products")]
  saved = [(owner, name, getattr(owner, name)) for owner, name in patchable]

  def call_32bit_select(self, inputs, training=None):
    if self.rate == 0.0 or not training:
      return inputs
    bits = tf.random.stateless_uniform(tf.shape(inputs), seed=self._seed(), minval=None,
                                       maxval=None, dtype=tf.int32)
    keep = bits >= int(round(self.rate * 2**32)) - 2**31
    scale = tf.constant(1.0 / (1.0 - self.rate), inputs.dtype)
    return tf.where(keep, inputs * scale, tf.zeros_like(inputs))

  def call_philox(self, inputs, training=None):
    if self.rate == 0.0 or not training:
      return inputs
    return dropout._apply_mask(inputs, self._scaled_mask(tf.shape(inputs), inputs.dtype))

  if variant == "philox_dropout":
    dropout.SeededDropout.call = call_philox
  elif variant == "dropout_32bit_select":
    dropout.SeededDropout.call = call_32bit_select
  elif variant == "unfused_gelu":
    pretrainer.ElectraPretrainer._fuse = lambda self, training: False
  elif variant == "autodiff_gelu":
    # Read when the blocks are made (transformer_block passes it to Model Garden's block).
    layers.exact_gelu = lambda x: tf.nn.gelu(x, approximate=False)
  elif variant == "keras_layer_norm":
    layers.LayerNorm.call = lambda self, x: tf_keras.layers.LayerNormalization.call(self, x)
  elif variant == "keras_attention":
    layers._SeededAttention._compute_attention = (
        tf_keras.layers.MultiHeadAttention._compute_attention)
  elif variant == "tf_cross_entropy":
    rtd.sparse_cross_entropy = lambda logits, labels: (
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
  elif variant == "written_out_adam":
    optimizer.AdamWeightDecay.fused_update = False
  elif variant == "per_variable_scalars":
    apply_dense = optimizer.AdamWeightDecay._resource_apply_dense

    def apply_with_own_scalars(self, grad, var, apply_state=None):
      key = (var.device, var.dtype.base_dtype)
      return apply_dense(self, grad, var, {key: self._fallback_apply_state(*key)})

    optimizer.AdamWeightDecay._resource_apply_dense = apply_with_own_scalars
  elif variant == "reduction_kernels":
    elementwise._products = lambda: False
  elif variant == "float32_gelu":
    build = layers.ElectraTransformerBlock.build

    def build_float32_activation(self, input_shape):
      build(self, input_shape)
      self._intermediate_activation_layer = tf_keras.layers.Activation(
          self._inner_activation, dtype=tf.float32)

    layers.ElectraTransformerBlock.build = build_float32_activation
  elif variant != "ours":
    raise SystemExit(f"error: unknown variant {variant!r}; choose from {', '.join(VARIANTS)}")
  try:
    yield
  finally:
    for owner, name, value in saved:
      setattr(owner, name, value)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--preset", default="small")
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--precision", choices=["float32", "bfloat16"], default="bfloat16")
  parser.add_argument("--variants", default=",".join(VARIANTS))
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--reps", type=int, default=5)
  args = parser.parse_args()
  variants = args.variants.split(",")

  import tensorflow as tf
  from step_lib import median_seconds, synthetic_batch

  from electra_tf import presets
  from electra_tf.training import pretraining, strategy

  config = presets.get(args.preset).replace(
      batch_size=args.batch_size, steps_per_execution=1,
      precision="mixed_bfloat16" if args.precision == "bfloat16" else "float32")
  strategy.set_precision(config.precision)
  batch = {k: tf.constant(v) for k, v in synthetic_batch(config).items()}
  steps = {}
  for variant in variants:
    with undone(variant):
      model = pretraining.build_model(config, tf.distribute.get_strategy(), jit_compile=False)
      model.fit(tf.data.Dataset.from_tensors(batch).repeat(), steps_per_epoch=1, verbose=0)
      steps[variant] = tf.function(lambda m=model: m.train_step(batch))
      steps[variant]()  # traced here, inside the block
  times = {v: [] for v in variants}
  for _ in range(args.rounds):
    for variant in variants:
      times[variant].append(median_seconds(steps[variant], args.reps))
  medians = {v: statistics.median(t) for v, t in times.items()}
  base = medians.get("ours")
  print(f"{args.preset}, batch {config.batch_size} x seq {config.max_seq_length}, "
        f"{args.precision}: {args.rounds} rounds of {args.reps} steps")
  for variant in variants:
    ratio = f"{medians[variant] / base:6.3f}x ours" if base else ""
    rounds = " ".join(f"{t * 1e3:.0f}" for t in times[variant])
    print(f"{variant:22} {medians[variant] * 1e3:8.1f} ms  {ratio}   rounds: {rounds}")
  print(json.dumps({"preset": args.preset, "precision": args.precision,
                    "batch_size": config.batch_size,
                    "step_ms": {v: round(m * 1e3, 1) for v, m in medians.items()},
                    "vs_ours": {v: round(m / base, 3) for v, m in medians.items()}
                    if base else None}))


if __name__ == "__main__":
  main()
