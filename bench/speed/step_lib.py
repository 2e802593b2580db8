"""What the step-speed benchmarks share: a synthetic batch, our compiled step, timers, the
matmul peak, and the step's matrix products at real shapes."""

from __future__ import annotations

import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)


def synthetic_batch(config, seed: int = 0):
  """A pretraining batch with the pipeline's shapes: random ids, masked positions."""
  import numpy as np

  rng = np.random.default_rng(seed)
  B, L, P = config.batch_size, config.max_seq_length, config.max_predictions_per_seq
  ids = rng.integers(1000, 30000, size=(B, L)).astype(np.int32)
  ids[:, 0], ids[:, -1] = 101, 102
  positions = np.sort(np.stack([rng.choice(np.arange(1, L - 1), P, replace=False)
                                for _ in range(B)]), axis=1).astype(np.int32)
  masked_ids = np.take_along_axis(ids, positions, 1)
  masked_input = ids.copy()
  np.put_along_axis(masked_input, positions, 103, 1)
  return {"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
          "masked_input_ids": masked_input, "masked_lm_positions": positions,
          "masked_lm_ids": masked_ids, "masked_lm_weights": np.ones((B, P), np.float32)}


def synthetic_dataset(config):
  """The synthetic batch repeated, with tf.data autotuning off.

  The timing loop makes one Keras fit call per timed step (or per `per_call` steps), and
  each call ends by deleting its dataset iterator. With autotuning on, steps then ended at
  exactly 2.56 s or 5.12 s (7 of 16 small bfloat16 steps on 2026-11-24), which is
  10 + 20 + ... ms: a doubling sleep waited out at the deletion, presumably the autotune
  loop's. A fixed batch needs no tuning, so both TensorFlow implementations get it off.
  """
  import tensorflow as tf

  options = tf.data.Options()
  options.autotune.enabled = False
  return tf.data.Dataset.from_tensors(synthetic_batch(config)).repeat().with_options(options)


def measure_peak(precision: str) -> float:
  """Best FLOP/s of a 2048^3 tf.matmul in the compute dtype of `precision`."""
  import tensorflow as tf

  dtype = tf.bfloat16 if "bfloat16" in precision else tf.float32
  a = tf.cast(tf.random.normal([2048, 2048]), dtype)
  f = tf.function(lambda: tf.matmul(a, a))
  f()
  best = 0.0
  for _ in range(5):
    start = time.perf_counter()
    for _ in range(5):
      r = f()
    r.numpy()
    best = max(best, 5 * 2 * 2048 ** 3 / (time.perf_counter() - start))
  return best


def time_fit(model, dataset, steps: int, per_call: int) -> tuple[float, list[float]]:
  start = time.perf_counter()
  model.fit(dataset, steps_per_epoch=per_call, epochs=1, verbose=0)
  compile_s = time.perf_counter() - start
  times = []
  for _ in range(max(1, steps // per_call)):
    start = time.perf_counter()
    model.fit(dataset, steps_per_epoch=per_call, epochs=1, verbose=0)
    times.append((time.perf_counter() - start) / per_call)
  return compile_s, times


def build_ours(config, xla: bool, per_call: int):
  """(our compiled pretrainer, the fixed synthetic batch repeated) in `config.precision`."""
  import tensorflow as tf

  from electra_tf.training import pretraining, strategy

  strategy.set_precision(config.precision)
  model = pretraining.build_model(config.replace(steps_per_execution=per_call),
                                  tf.distribute.get_strategy(), jit_compile=xla)
  return model, synthetic_dataset(config)


def median_seconds(fn, reps: int) -> float:
  fn()
  fn()
  times = []
  for _ in range(reps):
    start = time.perf_counter()
    out = fn()
    wait_for(out)
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def wait_for(out):
  """Blocks until the first tensor of `out` is computed."""
  import tensorflow as tf

  for t in tf.nest.flatten(out):
    if hasattr(t, "numpy"):
      t.numpy()
      return


def products(config, batch_size: int) -> list[tuple[str, int, int, int, int, int]]:
  """(name, count, batch, m, k, n) of each forward product [batch, m, k] x [k, n]."""
  L, P = config.max_seq_length, config.max_predictions_per_seq
  tokens = batch_size * L
  rows = []
  for who, enc in (("generator", config.generator), ("discriminator", config.model)):
    H, F, E, heads, layers = (enc.hidden_size, enc.intermediate_size, enc.embedding_size,
                              enc.num_heads, enc.num_layers)
    if E != H:
      rows.append((f"{who} embeddings_project", 1, 1, tokens, E, H))
    rows.append((f"{who} query/key/value/output", 4 * layers, 1, tokens, H, H))
    rows.append((f"{who} intermediate", layers, 1, tokens, H, F))
    rows.append((f"{who} output", layers, 1, tokens, F, H))
    rows.append((f"{who} attention scores", layers, batch_size * heads, L, H // heads, L))
    rows.append((f"{who} attention context", layers, batch_size * heads, L, L, H // heads))
  g = config.generator
  rows.append(("generator head dense", 1, 1, batch_size * P, g.hidden_size, g.embedding_size))
  rows.append(("generator head logits", 1, 1, batch_size * P, g.embedding_size, g.vocab_size))
  H = config.model.hidden_size
  rows.append(("discriminator head dense", 1, 1, tokens, H, H))
  rows.append(("discriminator head logit", 1, 1, tokens, H, 1))
  return rows


def time_product(batch: int, m: int, k: int, n: int, dtype, reps: int, chain: int = 8,
                 jit_compile: bool = False) -> float:
  """Median seconds of the forward product and its two gradient products, run together.

  `jit_compile`: each chain is one XLA-compiled function (XLA's own dot emitter).

  Each timed call runs `chain` copies of a product one after the other (control
  dependencies, distinct inputs so none is folded away), so that the per-call overhead of
  Python is spread as thin as the graph executor spreads it inside a train step.
  """
  import tensorflow as tf

  def tensors(*shape):
    shape = shape if batch == 1 else (batch, *shape)
    return [tf.cast(tf.random.normal(shape), dtype) for _ in range(chain)]

  xs, ws, dys = tensors(m, k), tensors(k, n), tensors(m, n)

  def chained(product):
    def run():
      outs = []
      for i in range(chain):
        with tf.control_dependencies(outs[-1:]):
          outs.append(product(i))
      return outs  # all returned: products used only as control inputs would be pruned
    return tf.function(run, jit_compile=jit_compile)

  calls = [chained(lambda i: tf.matmul(xs[i], ws[i])),
           chained(lambda i: tf.matmul(dys[i], ws[i], transpose_b=True)),
           chained(lambda i: tf.matmul(xs[i], dys[i], transpose_a=True))]
  return sum(median_seconds(call, reps) for call in calls) / chain
