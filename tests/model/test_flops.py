"""The FLOP count behind MFU, against a calculation done by hand for the small preset."""

from electra_tf import presets
from electra_tf.model import flops


def test_small_preset_by_hand():
  config = presets.get("small")  # H 256, 12 layers, FFN 1024, E 128, V 30522, seq 128
  gen = config.generator
  assert (gen.hidden_size, gen.intermediate_size, config.max_predictions_per_seq) == (64, 256, 19)
  # Discriminator: projection 2*128*128*256 = 8,388,608; per block
  # 8*128*256^2 + 4*128^2*256 + 4*128*256*1024 = 218,103,808, times 12 layers.
  assert flops.encoder_forward_flops(config.model, 128) == 8_388_608 + 12 * 218_103_808
  # Generator: projection 2*128*128*64 = 2,097,152; per block
  # 8*128*64^2 + 4*128^2*64 + 4*128*64*256 = 16,777,216, times 12.
  assert flops.encoder_forward_flops(gen, 128) == 2_097_152 + 12 * 16_777_216
  # Heads: 2*19*(64*128 + 128*30522) at the masked positions; 2*128*(256^2 + 256).
  assert flops.generator_head_flops(gen, 19) == 148_770_304
  assert flops.discriminator_head_flops(config.model, 128) == 16_842_752
  forward = 2_625_634_304 + 203_423_744 + 148_770_304 + 16_842_752
  assert flops.train_step_flops(config) == 3 * 128 * forward == 1_149_953_703_936


def test_mlm_baseline_has_one_full_size_network():
  config = presets.get("tiny").replace(objective="mlm")
  L, P = config.max_seq_length, config.max_predictions_per_seq
  expected = 3 * config.batch_size * (flops.encoder_forward_flops(config.model, L)
                                      + flops.generator_head_flops(config.model, P))
  assert flops.train_step_flops(config) == expected
