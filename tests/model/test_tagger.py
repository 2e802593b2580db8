"""The token-tagging model: its loss is the mean over the scored tokens of the global batch,
and one train step is the same on one and on two replicas."""

import numpy as np
import tensorflow as tf

from electra_tf import features as F
from electra_tf.config import EncoderConfig
from electra_tf.model.finetune_models import LABEL_IDS, LABEL_WEIGHTS, build_finetune_model
from electra_tf.model.tagger import ElectraTagger
from electra_tf.training.optimizer import AdamWeightDecay

ENC = EncoderConfig(vocab_size=20, hidden_size=16, num_layers=2, num_heads=2,
                    intermediate_size=32, embedding_size=8, max_position_embeddings=32,
                    dropout_rate=0.0, attention_dropout_rate=0.0)


def _features(batch=4, seq=10):
  rng = np.random.default_rng(0)
  mask = np.ones((batch, seq), np.int32)
  for b in range(batch):
    mask[b, seq - 2 * b:] = 0
  weights = (rng.random((batch, seq)) < 0.5).astype(np.float32) * mask
  weights[:, 0] = 0.0  # [CLS]
  return {F.INPUT_IDS: rng.integers(4, 20, (batch, seq)).astype(np.int32) * mask,
          F.INPUT_MASK: mask, F.SEGMENT_IDS: np.zeros((batch, seq), np.int32),
          LABEL_IDS: rng.integers(0, 3, (batch, seq)).astype(np.int32) * mask,
          LABEL_WEIGHTS: weights}


def test_loss_is_the_mean_over_scored_tokens():
  model = build_finetune_model(ElectraTagger(ENC, num_labels=3, dropout_rate=0.0))
  feats = _features()
  out = model(feats, training=False)
  assert out["logits"].shape == (4, 10, 3)
  logits = out["logits"].numpy()
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  token_loss = -np.take_along_axis(log_probs, feats[LABEL_IDS][..., None], -1)[..., 0]
  expected = (token_loss * feats[LABEL_WEIGHTS]).sum() / feats[LABEL_WEIGHTS].sum()
  np.testing.assert_allclose(model._loss(out, feats).numpy(), expected, rtol=1e-5)


def _one_step(strategy, feats, weights):
  with strategy.scope():
    model = build_finetune_model(ElectraTagger(ENC, num_labels=3, dropout_rate=0.0))
    model.set_weights(weights)
    model.compile(optimizer=AdamWeightDecay(1e-2, bias_correction=True))
  model.fit(tf.data.Dataset.from_tensor_slices(feats).batch(4), epochs=1, verbose=0)
  return [v.numpy() for v in model.trainable_variables]


def test_train_step_same_on_one_and_two_replicas():
  # The replicas hold different numbers of scored tokens: dividing by the global count keeps
  # the step equal to the one-replica step.
  feats = _features()
  init = build_finetune_model(ElectraTagger(ENC, num_labels=3)).get_weights()
  one = _one_step(tf.distribute.OneDeviceStrategy("/cpu:0"), feats, init)
  two = _one_step(tf.distribute.MirroredStrategy(
      ["/cpu:0", "/cpu:1"], cross_device_ops=tf.distribute.ReductionToOneDevice()), feats, init)
  assert max(np.abs(a - b).max() for a, b in zip(one, init)) > 1e-3
  for a, b in zip(one, two):
    np.testing.assert_allclose(a, b, atol=2e-5)
