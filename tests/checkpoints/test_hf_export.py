"""Our networks exported to Hugging Face folders load cleanly and compute the same outputs."""

import json

import pytest


def _config(**model):
  from electra_tf.config import EncoderConfig, PretrainConfig

  return PretrainConfig(model=EncoderConfig(**model), max_seq_length=32)


CONFIGS = {
    # E != H, generator a quarter of the discriminator (one head), E != generator H too.
    "E32-H64-gen16": {"vocab_size": 211, "hidden_size": 64, "num_layers": 2, "num_heads": 4,
                      "intermediate_size": 96, "embedding_size": 32, "max_position_embeddings": 48},
    # E == H for the discriminator, three token types, another epsilon.
    "E48-H48-T3": {"vocab_size": 150, "hidden_size": 48, "num_layers": 3, "num_heads": 3,
                   "intermediate_size": 64, "embedding_size": 48, "max_position_embeddings": 40,
                   "type_vocab_size": 3, "layer_norm_eps": 1e-6},
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_random_networks_export_and_match(tmp_path, name):
  from hf_twins import check_hf_export, randomize_tf

  from electra_tf.checkpoints.converter import (
    Loaded,
    RestoreReport,
    export_hf,
    load_source,
    read_source,
    save,
  )
  from electra_tf.model.networks import build_networks

  config = _config(**CONFIGS[name])
  generator, discriminator = build_networks(config)
  randomize_tf([generator, discriminator], seed=11)
  # Through our converted format: save a Loaded built by hand, then export what load() reads.
  loaded = Loaded(config, generator, discriminator, None, "test", RestoreReport("test", 0, 0))
  ours = save(loaded, str(tmp_path / "ours"))
  export_hf(load_source(read_source(ours)), str(tmp_path / "hf"))
  diffs = check_hf_export(tmp_path / "hf", generator, discriminator, config.model.vocab_size,
                          config.model.type_vocab_size)
  print(name, diffs)
  hf_config = json.loads((tmp_path / "hf" / "generator" / "config.json").read_text())
  assert hf_config["hidden_size"] == config.generator.hidden_size
  assert hf_config["num_attention_heads"] == config.generator.num_heads
  assert hf_config["embedding_size"] == config.model.embedding_size


def test_discriminator_only_exports_one_folder(tmp_path):
  from hf_twins import check_hf_export, randomize_tf

  from electra_tf.checkpoints import native
  from electra_tf.checkpoints.converter import export_hf, load
  from electra_tf.model.networks import Discriminator, dummy_inputs

  config = _config(**CONFIGS["E48-H48-T3"])
  disc = Discriminator(config.model)
  disc(dummy_inputs())
  randomize_tf([disc], seed=12)
  native.save_discriminator(disc, None, str(tmp_path / "export"))
  loaded = load(str(tmp_path / "export"))
  assert loaded.source == "discriminator_export" and loaded.generator is None
  export_hf(loaded, str(tmp_path / "hf"))
  check_hf_export(tmp_path / "hf", None, disc, config.model.vocab_size, 3)
