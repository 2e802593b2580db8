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


def _second_network_forward(config: PretrainConfig) -> int:
  """Forward FLOPs of the network trained beside the generator, by objective."""
  model, L, P = config.model, config.max_seq_length, config.max_predictions_per_seq
  encoder = encoder_forward_flops(model, L)
  if config.objective in ("electra", "electra_15"):
    return encoder + discriminator_head_flops(model, L)
  if config.objective == "replace_mlm":
    return encoder + generator_head_flops(model, P)
  if config.objective == "all_tokens_mlm":  # the MLM head and the copy logit at every token
    return encoder + generator_head_flops(model, L) + 2 * L * model.hidden_size
  raise ValueError(f"objective {config.objective!r} has no second network")


def train_step_flops(config: PretrainConfig, stage: str = "joint") -> int:
  """FLOPs of one optimizer step on the global batch.

  A trained network costs 3x its forward pass; a two-stage run's frozen generator only
  its forward pass (stage "discriminator"), and its generator stage has no second network.
  """
  L, P = config.max_seq_length, config.max_predictions_per_seq
  if config.objective == "mlm":
    return 3 * config.batch_size * (encoder_forward_flops(config.model, L)
                                    + generator_head_flops(config.model, P))
  generator = (encoder_forward_flops(config.generator, L)
               + generator_head_flops(config.generator, P))
  if stage == "generator":
    return 3 * config.batch_size * generator
  generator_passes = 1 if stage == "discriminator" else 3
  return config.batch_size * (generator_passes * generator
                              + 3 * _second_network_forward(config))


def run_flops(config: PretrainConfig, steps: int | None = None) -> int:
  """FLOPs of the first `steps` steps (default: the whole run), stages included."""
  steps = config.num_train_steps if steps is None else steps
  boundary = min(config.two_stage_steps, steps)
  if not config.two_stage_steps:
    return steps * train_step_flops(config)
  return (boundary * train_step_flops(config, "generator")
          + (steps - boundary) * train_step_flops(config, "discriminator"))
