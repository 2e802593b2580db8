"""Fine-tuning heads and models: shapes, masking, the joint end head, answerability, replica
invariance of the train step, and layer-wise learning-rate decay."""

import re

import numpy as np
import pytest
import tensorflow as tf

from electra_tf import features as F
from electra_tf.config import EncoderConfig
from electra_tf.model.finetune_models import (
  END_POSITIONS,
  IS_IMPOSSIBLE,
  LABEL,
  START_POSITIONS,
  ElectraClassifier,
  ElectraSpanQA,
  build_finetune_model,
)
from electra_tf.training.finetuning import layerwise_multipliers
from electra_tf.training.optimizer import AdamWeightDecay

ENC = EncoderConfig(vocab_size=20, hidden_size=16, num_layers=2, num_heads=2,
                    intermediate_size=32, embedding_size=8, max_position_embeddings=32,
                    dropout_rate=0.0, attention_dropout_rate=0.0)


def _features(batch=4, seq=10, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(4, 20, size=(batch, seq)).astype(np.int32)
  mask = np.ones((batch, seq), np.int32)
  for b in range(batch):
    mask[b, seq - b:] = 0  # rows of different lengths
  ids *= mask
  seg = np.zeros_like(ids)
  seg[:, seq // 2:] = 1
  seg *= mask
  return {F.INPUT_IDS: ids, F.INPUT_MASK: mask, F.SEGMENT_IDS: seg}


def test_classifier_outputs_and_regression():
  model = build_finetune_model(ElectraClassifier(ENC, num_labels=3, dropout_rate=0.0))
  out = model(_features(), training=False)
  assert out["logits"].shape == (4, 3)
  np.testing.assert_allclose(out["probabilities"].numpy().sum(-1), 1.0, rtol=1e-6)
  # Only [CLS] reaches the head: changing a later token changes it only through attention,
  # and padding never does.
  feats = _features()
  feats[F.INPUT_IDS][3, -1] = 7  # row 3 is padded from position 7 on
  np.testing.assert_allclose(model(feats)["logits"].numpy(), out["logits"].numpy(), atol=1e-6)
  reg = build_finetune_model(ElectraClassifier(ENC, num_labels=1))
  assert reg(_features())["predictions"].shape == (4,)


def test_mean_pooling_reads_the_real_tokens_only():
  from electra_tf.config import ConfigError, FinetuneConfig

  model = build_finetune_model(ElectraClassifier(ENC, num_labels=3, dropout_rate=0.0,
                                                 pooling="mean"))
  feats = _features()
  hidden = model.encoder({k: feats[k] for k in (F.INPUT_IDS, F.INPUT_MASK, F.SEGMENT_IDS)})
  mask = feats[F.INPUT_MASK].astype(np.float32)[:, :, None]
  pooled = (hidden.numpy() * mask).sum(1) / mask.sum(1)
  expected = pooled @ model.head.dense.kernel.numpy() + model.head.dense.bias.numpy()
  logits = model(feats, training=False)["logits"].numpy()
  np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-6)
  # The [CLS] state alone would give other logits: the head really reads the mean.
  cls = hidden.numpy()[:, 0] @ model.head.dense.kernel.numpy() + model.head.dense.bias.numpy()
  assert np.abs(cls - logits).max() > 1e-3
  feats[F.INPUT_IDS][3, -1] = 7  # padding changes nothing
  np.testing.assert_allclose(model(feats)["logits"].numpy(), logits, atol=1e-6)
  assert model.get_config()["pooling"] == "mean"
  with pytest.raises(ConfigError, match="unknown pooling"):
    FinetuneConfig(task="classification", pooling="max")


def test_span_logits_mask_padding():
  model = build_finetune_model(ElectraSpanQA(ENC))
  out = model(_features(), training=False)
  mask = _features()[F.INPUT_MASK]
  for key in ("start_logits", "end_logits"):
    logits = out[key].numpy()
    assert logits.shape == (4, 10)
    assert (logits[mask == 0] < -5000).all() and (np.abs(logits[mask == 1]) < 100).all()


def test_joint_end_head_scores_each_top_start():
  model = build_finetune_model(ElectraSpanQA(ENC, joint_end=True, answerable=True, beam_size=3))
  feats = _features()
  out = model(feats, training=False)
  top = out["start_top_index"].numpy()
  assert top.shape == (4, 3) and out["end_logits"].shape == (4, 3, 10)
  expected_top = tf.math.top_k(out["start_logits"], 3).indices.numpy()
  np.testing.assert_array_equal(top, expected_top)
  # In training the end head is conditioned on the gold start: feeding the k-th top start
  # must reproduce row k of the inference output (no dropout in ENC).
  for k in range(3):
    train_out = model({**feats, START_POSITIONS: top[:, k]}, training=True)
    np.testing.assert_allclose(train_out["end_logits"].numpy(), out["end_logits"][:, k].numpy(),
                               atol=1e-5)
  assert out["impossible_logit"].shape == (4,)


def test_span_loss_weights_answerability():
  feats = {**_features(), START_POSITIONS: np.array([1, 2, 0, 3], np.int32),
           END_POSITIONS: np.array([2, 4, 0, 3], np.int32),
           IS_IMPOSSIBLE: np.array([0, 0, 1, 0], np.int32)}
  plain = build_finetune_model(ElectraSpanQA(ENC, answerable=True, answerable_weight=0.0))
  weighted = build_finetune_model(ElectraSpanQA(ENC, answerable=True, answerable_weight=0.5))
  weighted.set_weights(plain.get_weights())
  out = plain(feats, training=False)
  base = plain.per_example_loss(out, feats).numpy()
  start_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(feats[START_POSITIONS],
                                                            out["start_logits"]).numpy()
  end_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(feats[END_POSITIONS],
                                                          out["end_logits"]).numpy()
  np.testing.assert_allclose(base, 0.5 * (start_ce + end_ce), rtol=1e-5)
  bce = tf.nn.sigmoid_cross_entropy_with_logits(feats[IS_IMPOSSIBLE].astype(np.float32),
                                                out["impossible_logit"]).numpy()
  np.testing.assert_allclose(weighted.per_example_loss(out, feats).numpy(), base + 0.5 * bce,
                             rtol=1e-5)


def _one_step(strategy, feats, weights):
  with strategy.scope():
    model = build_finetune_model(ElectraClassifier(ENC, num_labels=2, dropout_rate=0.0))
    model.set_weights(weights)
    model.compile(optimizer=AdamWeightDecay(1e-2, bias_correction=True))
  ds = tf.data.Dataset.from_tensor_slices(feats).batch(4)
  model.fit(ds, epochs=1, verbose=0)
  return [v.numpy() for v in model.trainable_variables]


def test_train_step_same_on_one_and_two_replicas():
  feats = {**_features(), LABEL: np.array([0, 1, 1, 0], np.int32)}
  model = build_finetune_model(ElectraClassifier(ENC, num_labels=2))
  init = model.get_weights()
  one = _one_step(tf.distribute.OneDeviceStrategy("/cpu:0"), feats, init)
  two = _one_step(tf.distribute.MirroredStrategy(
      ["/cpu:0", "/cpu:1"], cross_device_ops=tf.distribute.ReductionToOneDevice()), feats, init)
  moved = max(np.abs(a - v.numpy()).max() for a, v in zip(one, model.trainable_variables))
  assert moved > 1e-3  # the step did something
  for a, b in zip(one, two):
    np.testing.assert_allclose(a, b, atol=2e-5)


@pytest.mark.parametrize("authors", [False, True])
def test_layerwise_decay_scales_each_layer(authors):
  decay, n = 0.5, ENC.num_layers
  model = build_finetune_model(ElectraSpanQA(ENC))
  rules = layerwise_multipliers(n, decay, authors)
  opt = AdamWeightDecay(1e-3, weight_decay_rate=0.0, lr_multipliers=rules)
  before = [v.numpy() for v in model.trainable_variables]
  # Adam's first step without bias correction moves every entry by lr * factor * 0.1/sqrt(1e-3).
  opt.apply_gradients([(tf.ones_like(v), v) for v in model.trainable_variables])
  unit = 1e-3 * 0.1 / (np.sqrt(1e-3) + 1e-6)
  extra = 1 if authors else 0
  seen = set()
  for v, b in zip(model.trainable_variables, before):
    step = np.abs(b - v.numpy()).max() / unit
    layer = re.search(r"/layer_(\d+)/", v.name)
    if layer:
      expected = decay ** (n - int(layer.group(1)) + extra)
    elif "/embeddings" in v.name:
      expected = decay ** (n + 1 + extra)
    else:
      expected = 1.0
      assert "qa_head" in v.name
    seen.add(expected)
    np.testing.assert_allclose(step, expected, rtol=1e-3, err_msg=v.name)
  assert len(seen) == n + 2  # head, each layer, embeddings


@pytest.mark.parametrize("kind, spread, bound", [("truncated_normal", 0.0176, 0.04),
                                                 ("normal", 0.02, None)])
def test_head_initializer_draws_the_named_distribution(kind, spread, bound):
  from electra_tf.config import FinetuneConfig
  from electra_tf.model.finetune_models import model_for_task

  wide = EncoderConfig(**{**ENC.to_dict(), "hidden_size": 4096, "intermediate_size": 32})
  model = model_for_task(FinetuneConfig(task="squad_v1.1", max_seq_length=16,
                                        max_query_length=4, head_initializer=kind), wide)
  model.head(tf.zeros([1, 16, 4096]), tf.ones([1, 16], tf.int32))
  kernel = model.head.start_end.kernel.numpy()
  # 8,192 draws: the spread is known to about 1%; truncation at 2 stddev caps every value.
  assert abs(kernel.std() - spread) < 0.0008, (kind, kernel.std())
  if bound is None:
    assert np.abs(kernel).max() > 0.045  # P(all 8,192 within 2.25 stddev) is about 1e-86
  else:
    assert np.abs(kernel).max() <= bound


def test_an_unknown_head_initializer_is_refused():
  from electra_tf.config import ConfigError, FinetuneConfig

  with pytest.raises(ConfigError, match="head_initializer 'glorot'"):
    FinetuneConfig(head_initializer="glorot")
