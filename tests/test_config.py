"""Presets match ELECTRA_SPEC section 1; derived values and unknown keys."""

import pytest

import configs
from electra_tf.config import ConfigError, EncoderConfig, PretrainConfig, generator_config


@pytest.mark.parametrize("name,hidden,layers,heads,ffn,emb,gen_hidden,gen_heads,max_pred", [
    ("tiny", 64, 2, 2, 256, 32, 16, 1, 9),
    ("small", 256, 12, 4, 1024, 128, 64, 1, 19),
    ("base", 768, 12, 12, 3072, 768, 256, 4, 79),
    ("large", 1024, 24, 16, 4096, 1024, 256, 4, 130),
])
def test_presets(name, hidden, layers, heads, ffn, emb, gen_hidden, gen_heads, max_pred):
  c = configs.get(name)
  m = c.model
  assert (m.hidden_size, m.num_layers, m.num_heads, m.intermediate_size, m.embedding_size) == (
      hidden, layers, heads, ffn, emb)
  g = c.generator
  assert (g.hidden_size, g.num_heads, g.intermediate_size, g.num_layers) == (
      gen_hidden, gen_heads, 4 * gen_hidden, layers)
  assert c.max_predictions_per_seq == max_pred
  assert m.vocab_size == 30522 and c.learning_rate == (1e-4 if name == "tiny" else
                                                       5e-4 if name == "small" else 2e-4)
  assert m.vocab_size == 30522 and m.layer_norm_eps == 1e-12 and m.dropout_rate == 0.1


def test_large_uses_lamb_and_mask_prob_025():
  c = configs.get("large")
  assert c.optimizer == "lamb" and c.mask_prob == 0.25 and c.batch_size == 2048


def test_generator_heads_always_divide_its_width():
  g = generator_config(EncoderConfig(hidden_size=776, num_heads=8), 0.25)
  assert g.hidden_size == 194 and g.hidden_size % g.num_heads == 0


def test_replace_rederives_and_rejects_unknown_keys():
  c = configs.get("small").replace(**{"model.hidden_size": 512, "mask_prob": 0.25})
  assert c.generator.hidden_size == 128 and c.max_predictions_per_seq == 32
  with pytest.raises(ConfigError, match="unknown PretrainConfig key"):
    c.replace(hiden_size=3)
  with pytest.raises(ConfigError, match="unknown EncoderConfig key"):
    c.replace(**{"model.hiden_size": 3})
  assert PretrainConfig.from_json(c.to_json()) == c
