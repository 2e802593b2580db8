"""Our generator (encoder + tied MLM head) against Model Garden's BERT at equal weights.

The forward pass is checked against transformers elsewhere; this checks what training uses:
the masked-LM loss and the gradient of every variable (custom LayerNorm, GELU and
cross-entropy gradients included) against Model Garden's BertEncoderV2 + MaskedLM, whose
gradients are TensorFlow's own.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras
from official.nlp.modeling import layers, networks

from electra_tf import features as F
from electra_tf.config import EncoderConfig
from electra_tf.model.networks import Generator
from electra_tf.model.rtd import mlm_loss_terms

CONFIG = EncoderConfig(vocab_size=97, hidden_size=32, num_layers=2, num_heads=2,
                       intermediate_size=64, embedding_size=16, max_position_embeddings=24)
BATCH, SEQ, PREDICTIONS = 3, 12, 4


def _features() -> dict[str, tf.Tensor]:
  rng = np.random.default_rng(5)
  mask = np.ones((BATCH, SEQ), np.int32)
  mask[1, 9:] = 0  # a padded row: its keys must be masked in both
  positions = np.stack([np.sort(rng.choice(np.arange(1, 9), PREDICTIONS, replace=False))
                        for _ in range(BATCH)])
  weights = np.ones((BATCH, PREDICTIONS), np.float32)
  weights[2, -1] = 0.0  # an unused prediction slot
  return {F.MASKED_INPUT_IDS: tf.constant(rng.integers(5, CONFIG.vocab_size, (BATCH, SEQ)),
                                          tf.int32),
          F.INPUT_MASK: tf.constant(mask),
          F.SEGMENT_IDS: tf.constant((np.arange(SEQ) >= 6).astype(np.int32)[None].repeat(BATCH, 0)),
          F.MASKED_LM_POSITIONS: tf.constant(positions, tf.int32),
          F.MASKED_LM_IDS: tf.constant(rng.integers(5, CONFIG.vocab_size, (BATCH, PREDICTIONS)),
                                       tf.int32),
          F.MASKED_LM_WEIGHTS: tf.constant(weights)}


def _by_name(block):
  return sorted(block.weights, key=lambda v: v.name.split("/layer_")[-1].split("/", 1)[-1])


def test_loss_and_every_gradient_match_model_garden_bert():
  tf_keras.utils.set_random_seed(3)
  features = _features()
  ours = Generator(CONFIG)
  ours_inputs = {F.INPUT_IDS: features[F.MASKED_INPUT_IDS], F.INPUT_MASK: features[F.INPUT_MASK],
                 F.SEGMENT_IDS: features[F.SEGMENT_IDS],
                 F.MASKED_LM_POSITIONS: features[F.MASKED_LM_POSITIONS]}
  ours(ours_inputs)
  # Weights far from initialisation, so LayerNorm scales and biases matter too.
  for i, var in enumerate(ours.weights):
    var.assign(tf.random.stateless_normal(var.shape, seed=[i, 1]) * 0.3
               + (1.0 if "gamma" in var.name else 0.0))

  encoder = networks.BertEncoderV2(
      vocab_size=CONFIG.vocab_size, hidden_size=CONFIG.hidden_size,
      num_layers=CONFIG.num_layers, num_attention_heads=CONFIG.num_heads,
      inner_dim=CONFIG.intermediate_size, embedding_width=CONFIG.embedding_size,
      max_sequence_length=CONFIG.max_position_embeddings, type_vocab_size=2,
      inner_activation=lambda x: tf.nn.gelu(x, approximate=False))
  mg_inputs = {"input_word_ids": features[F.MASKED_INPUT_IDS],
               "input_mask": features[F.INPUT_MASK], "input_type_ids": features[F.SEGMENT_IDS]}
  encoder(mg_inputs)
  head = layers.MaskedLM(embedding_table=encoder.get_embedding_table(),
                         activation=lambda x: tf.nn.gelu(x, approximate=False))
  head(encoder(mg_inputs)["sequence_output"], masked_positions=features[F.MASKED_LM_POSITIONS])

  emb = ours.encoder.embeddings
  pairs = [(encoder.get_embedding_table(), emb.word_embeddings),
           (encoder._position_embedding_layer._position_embeddings, emb.position_embeddings),
           (encoder._type_embedding_layer.embeddings, emb.token_type_embeddings),
           *zip(encoder._embedding_norm_layer.weights, emb.layer_norm.weights),
           *zip(encoder._embedding_projection.weights, ours.encoder.embeddings_project.weights),
           *zip(head.dense.weights, ours.head.dense.weights),
           *zip(head.layer_norm.weights, ours.head.layer_norm.weights),
           (head.bias, ours.head.output_bias)]
  for theirs, mine in zip(encoder._transformer_layers, ours.encoder.blocks, strict=True):
    pairs += list(zip(_by_name(theirs), _by_name(mine), strict=True))
  for theirs, mine in pairs:
    theirs.assign(mine)
  assert {m.ref() for _, m in pairs} == {v.ref() for v in ours.trainable_variables}

  targets, weights = features[F.MASKED_LM_IDS], features[F.MASKED_LM_WEIGHTS]
  with tf.GradientTape(persistent=True) as tape:
    num, den = mlm_loss_terms(ours(ours_inputs, training=False), targets, weights)
    our_loss = num / den
    logits = head(encoder(mg_inputs, training=False)["sequence_output"],
                  masked_positions=features[F.MASKED_LM_POSITIONS])
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits)
    their_loss = tf.reduce_sum(ce * weights) / tf.reduce_sum(weights)
  np.testing.assert_allclose(our_loss.numpy(), their_loss.numpy(), rtol=1e-5)
  ours_grads = tape.gradient(our_loss, [m for _, m in pairs])
  their_grads = tape.gradient(their_loss, [t for t, _ in pairs])
  for (theirs, mine), g_ours, g_theirs in zip(pairs, ours_grads, their_grads):
    g_ours, g_theirs = tf.convert_to_tensor(g_ours), tf.convert_to_tensor(g_theirs)
    scale = float(tf.reduce_max(tf.abs(g_theirs))) or 1.0
    np.testing.assert_allclose(g_ours.numpy(), g_theirs.numpy(), atol=1e-5 * scale + 1e-7,
                               rtol=1e-4, err_msg=f"{mine.name} vs {theirs.name}")
