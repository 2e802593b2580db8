"""Fixtures of the hostile-input tests: real data, checkpoints and a fine-tuned model, built in
the test process once per module."""

import os

import pytest


@pytest.fixture(scope="module")
def root(tmp_path_factory):
  root = tmp_path_factory.mktemp("hostile")
  (root / "a_file").write_text("not a directory\n")
  return root


@pytest.fixture(scope="module")
def data_64(root):
  """Pretraining data (built-in corpus, 4 articles) at max_seq_length 64, two shards."""
  from electra_tf.data import builtin, pretraining_data, vocab

  corpus = builtin.builtin_corpus(str(root / "cache"), max_articles=4)
  out = str(root / "data")
  pretraining_data.build_pretraining_data(corpus, vocab.builtin_vocab_path(), out,
                                          max_seq_length=64, num_workers=1, min_shards=2,
                                          show_progress=False)
  return out


@pytest.fixture(scope="module")
def discriminator(root):
  """A discriminator export of the tiny preset, as pretrain.py writes it (random weights)."""
  from electra_tf import presets
  from electra_tf.checkpoints import native
  from electra_tf.data import vocab
  from electra_tf.model import networks

  model = networks.Discriminator(presets.get("tiny").model)
  model(networks.dummy_inputs())
  return native.save_discriminator(model, vocab.builtin_vocab_path(),
                                      str(root / "discriminator"))


@pytest.fixture(scope="module")
def hf_folder(root, discriminator):
  from electra_tf.checkpoints import converter

  return os.path.join(converter.export_hf(discriminator, str(root / "hf")), "discriminator")


@pytest.fixture(scope="module")
def tf1_checkpoint(root, discriminator):
  """The same weights as an authors'-layout (name-based) TF1 checkpoint."""
  import tensorflow as tf

  from electra_tf.checkpoints import converter, names

  tensors = names.extract(None, converter.load(discriminator).discriminator)
  prefix = str(root / "tf1" / "model.ckpt")
  keys = sorted(tensors)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=keys, shape_and_slices=[""] * len(keys),
                    tensors=[tf.constant(tensors[k]) for k in keys])
  return prefix


@pytest.fixture(scope="module")
def finetuned(root):
  """A fine-tuned classifier directory (tiny encoder, random weights), as finetune.py's best/."""
  import dataclasses

  from electra_tf import presets
  from electra_tf.config import FinetuneConfig
  from electra_tf.data import vocab
  from electra_tf.model.finetune_models import build_finetune_model, model_for_task
  from electra_tf.tasks.classification_data import TaskSpec
  from electra_tf.training.finetuned import save_finetuned

  encoder = presets.get("tiny").model
  config = FinetuneConfig(task="classification", max_seq_length=32)
  spec = TaskSpec("classification", ("text",), "label", ("neg", "pos"), ("accuracy",),
                  "accuracy")
  model = build_finetune_model(model_for_task(config, encoder, num_labels=2))
  record = {"task": "classification", "encoder": encoder.to_dict(),
            "finetune": config.to_dict(), "init_checkpoint": None,
            "spec": dataclasses.asdict(spec), "max_seq_length": 32, "lower_case": True}
  return save_finetuned(model, record, vocab.builtin_vocab_path(), str(root / "finetuned"))
