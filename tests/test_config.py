"""Presets match ELECTRA_SPEC section 1; derived values and unknown keys."""

import pytest

from electra_tf import presets
from electra_tf.config import ConfigError, EncoderConfig, PretrainConfig, generator_config


@pytest.mark.parametrize("name,hidden,layers,heads,ffn,emb,gen_hidden,gen_heads,max_pred", [
    ("demo", 128, 2, 2, 512, 128, 64, 1, 5),
    ("tiny", 64, 2, 2, 256, 32, 16, 1, 9),
    ("small", 256, 12, 4, 1024, 128, 64, 1, 19),
    ("base", 768, 12, 12, 3072, 768, 256, 4, 79),
    ("large", 1024, 24, 16, 4096, 1024, 256, 4, 130),
])
def test_presets(name, hidden, layers, heads, ffn, emb, gen_hidden, gen_heads, max_pred):
  c = presets.get(name)
  m = c.model
  assert (m.hidden_size, m.num_layers, m.num_heads, m.intermediate_size, m.embedding_size) == (
      hidden, layers, heads, ffn, emb)
  g = c.generator
  assert (g.hidden_size, g.num_heads, g.intermediate_size, g.num_layers) == (
      gen_hidden, gen_heads, 4 * gen_hidden, layers)
  assert c.max_predictions_per_seq == max_pred
  assert m.vocab_size == 30522 and c.learning_rate == {"demo": 1e-3, "tiny": 1e-4,
                                                       "small": 5e-4}.get(name, 2e-4)
  assert m.vocab_size == 30522 and m.layer_norm_eps == 1e-12 and m.dropout_rate == 0.1


def test_large_uses_lamb_and_mask_prob_025():
  c = presets.get("large")
  assert c.optimizer == "lamb" and c.mask_prob == 0.25 and c.batch_size == 2048


def test_generator_heads_always_divide_its_width():
  g = generator_config(EncoderConfig(hidden_size=776, num_heads=8), 0.25)
  assert g.hidden_size == 194 and g.hidden_size % g.num_heads == 0


def test_replace_rederives_and_rejects_unknown_keys():
  c = presets.get("small").replace(**{"model.hidden_size": 512, "mask_prob": 0.25})
  assert c.generator.hidden_size == 128 and c.max_predictions_per_seq == 32
  with pytest.raises(ConfigError, match="unknown PretrainConfig key"):
    c.replace(hiden_size=3)
  with pytest.raises(ConfigError, match="unknown EncoderConfig key"):
    c.replace(**{"model.hiden_size": 3})
  assert PretrainConfig.from_json(c.to_json()) == c


def test_a_preset_file_by_path(tmp_path):
  """A user's copy of a preset, edited, loads by its path; a broken one fails in one line."""
  text = open(f"{presets.directory()}/tiny.py", encoding="utf-8").read()
  mine = tmp_path / "tiny_wide.py"
  mine.write_text(text.replace("hidden_size=64", "hidden_size=128"))
  assert presets.get(str(mine)).model.hidden_size == 128
  assert presets.get(str(mine)).replace(**{"model.hidden_size": 64}) == presets.get("tiny")
  assert presets.run_name(str(mine)) == "tiny_wide"
  with pytest.raises(ConfigError, match="does not exist"):
    presets.get(str(tmp_path / "missing.py"))
  (tmp_path / "empty.py").write_text("X = 1\n")
  with pytest.raises(ConfigError, match=r"defines no CONFIG = PretrainConfig"):
    presets.get(str(tmp_path / "empty.py"))
  (tmp_path / "bad.py").write_text("from electra_tf.config import EncoderConfig\n"
                                   "CONFIG = EncoderConfig(hidden_size=65, num_heads=2)\n")
  with pytest.raises(ConfigError, match=r"bad.py: hidden_size 65 is not divisible"):
    presets.get(str(tmp_path / "bad.py"))
  with pytest.raises(ConfigError, match=r"unknown model_size 'huge'; choose one of"):
    presets.get("huge")


def test_finetune_defaults_by_depth():
  assert presets.finetune("squad_v1.1", 12).learning_rate == 1e-4
  assert presets.finetune("glue/rte", 24).num_train_epochs == 10.0
  with pytest.raises(ConfigError, match="unknown task"):
    presets.finetune("glue/nope", 12)
