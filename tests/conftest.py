"""Shared test setup: two logical CPU devices (for MirroredStrategy tests) and tiny configs."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

# Must happen before TensorFlow creates its devices; tests that need one device use /cpu:0.
_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])


@pytest.fixture
def micro_config():
  """A 10-token-vocab ELECTRA config without dropout: small enough for golden values."""
  from electra_tf.config import EncoderConfig, PretrainConfig

  model = EncoderConfig(vocab_size=10, hidden_size=8, num_layers=2, num_heads=2,
                        intermediate_size=16, embedding_size=4, max_position_embeddings=16,
                        dropout_rate=0.0, attention_dropout_rate=0.0)
  return PretrainConfig(model=model, generator_fraction=0.5, max_seq_length=12,
                        max_predictions_per_seq=3, batch_size=4, num_train_steps=20,
                        warmup_steps=2, learning_rate=1e-2, steps_per_execution=1,
                        checkpoint_steps=10, log_steps=5)


def make_batch(config, seed: int = 0, batch_size: int | None = None):
  """A fixed pretraining batch (numpy) with [CLS]=1, [SEP]=2, [MASK]=3 and padding 0."""
  from electra_tf import features as F

  rng = np.random.default_rng(seed)
  B = batch_size or config.batch_size
  L, P, V = config.max_seq_length, config.max_predictions_per_seq, config.model.vocab_size
  ids = np.zeros((B, L), np.int32)
  mask = np.zeros((B, L), np.int32)
  segments = np.zeros((B, L), np.int32)
  positions = np.zeros((B, P), np.int32)
  masked_ids = np.zeros((B, P), np.int32)
  weights = np.zeros((B, P), np.float32)
  for b in range(B):
    n = int(rng.integers(P + 3, L + 1))
    ids[b, :n] = rng.integers(4, V, size=n)
    ids[b, 0], ids[b, n - 1] = 1, 2
    mask[b, :n] = 1
    segments[b, n // 2:n] = 1
    k = int(rng.integers(1, P + 1))
    chosen = np.sort(rng.choice(np.arange(1, n - 1), size=k, replace=False))
    positions[b, :k], masked_ids[b, :k], weights[b, :k] = chosen, ids[b, chosen], 1.0
  masked_input = ids.copy()
  for b in range(B):
    for p in range(P):
      if weights[b, p] and rng.random() < 0.85:
        masked_input[b, positions[b, p]] = 3
  return {F.INPUT_IDS: ids, F.INPUT_MASK: mask, F.SEGMENT_IDS: segments,
          F.MASKED_INPUT_IDS: masked_input, F.MASKED_LM_POSITIONS: positions,
          F.MASKED_LM_IDS: masked_ids, F.MASKED_LM_WEIGHTS: weights}


@pytest.fixture
def micro_batch(micro_config):
  return make_batch(micro_config)
