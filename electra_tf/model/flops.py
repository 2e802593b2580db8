"""Model FLOPs of ELECTRA pretraining, derived from the config (for MFU figures).

Convention: a multiply-add counts 2 FLOPs; only matrix products are counted (embedding
lookups, softmax, LayerNorm, GELU and sampling are left out, as in the usual MFU figures);
a training step costs 3x the forward pass (the backward pass computes two products per
forward product).
"""

from __future__ import annotations

from electra_tf.config import EncoderConfig, PretrainConfig


def encoder_forward_flops(config: EncoderConfig, seq_len: int) -> int:
  """Forward FLOPs of one sequence through the embedding projection and the blocks."""
  H, L, F, E = (config.hidden_size, seq_len, config.intermediate_size, config.embedding_size)
  projection = 2 * L * E * H if E != H else 0
  # Per block: Q, K, V and output projections 4 x (2 L H H); scores Q K^T and
  # probabilities x V 2 x (2 L L H); the two feed-forward products 2 x (2 L H F).
  block = 8 * L * H * H + 4 * L * L * H + 4 * L * H * F
  return projection + config.num_layers * block


def generator_head_flops(config: EncoderConfig, num_positions: int) -> int:
  """Dense(E) and the tied output layer [E, V] at the masked positions only."""
  return 2 * num_positions * (config.hidden_size * config.embedding_size
                              + config.embedding_size * config.vocab_size)


def discriminator_head_flops(config: EncoderConfig, seq_len: int) -> int:
  """Dense(H) and Dense(1) at every position."""
  return 2 * seq_len * (config.hidden_size * config.hidden_size + config.hidden_size)


def train_step_flops(config: PretrainConfig) -> int:
  """FLOPs of one optimizer step on the global batch (3x forward)."""
  L, P = config.max_seq_length, config.max_predictions_per_seq
  if config.objective == "mlm":
    forward = encoder_forward_flops(config.model, L) + generator_head_flops(config.model, P)
  else:
    forward = (encoder_forward_flops(config.generator, L)
               + generator_head_flops(config.generator, P)
               + encoder_forward_flops(config.model, L)
               + discriminator_head_flops(config.model, L))
  return 3 * config.batch_size * forward
