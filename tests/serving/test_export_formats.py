"""electra-export --format: the command writes each format, and bad input gets one clear line
with nothing written."""

import os

import pytest
from testing_utils import assert_clear_error, run_command

from electra_tf.errors import UserError
from electra_tf.serving import formats


@pytest.fixture(scope="module")
def disc_dir(tmp_path_factory):
  import tf_keras

  from electra_tf.checkpoints.native import save_discriminator
  from electra_tf.config import EncoderConfig
  from electra_tf.data.vocab import builtin_vocab_path
  from electra_tf.model.networks import Discriminator, dummy_inputs

  tf_keras.utils.set_random_seed(0)
  disc = Discriminator(EncoderConfig(hidden_size=32, num_layers=1, num_heads=2,
                                     intermediate_size=64, embedding_size=16,
                                     max_position_embeddings=64))
  disc(dummy_inputs())
  path = str(tmp_path_factory.mktemp("formats") / "disc")
  save_discriminator(disc, builtin_vocab_path(), path)
  return path


def test_bad_input_is_one_line_and_writes_nothing(disc_dir, tmp_path):
  out = str(tmp_path / "out")
  assert_clear_error(run_command("export", "--format=tarball", f"--checkpoint={disc_dir}",
                                 f"--export_dir={out}"), "unknown --format=tarball", "onnx")
  for fmt in ("tflite",):
    assert_clear_error(run_command("export", f"--format={fmt}", f"--checkpoint={disc_dir}",
                                   f"--export_dir={out}"),
                       f"--format={fmt} exports the task model of a fine-tuning run")
  os.makedirs(out)
  open(os.path.join(out, "keep"), "w").close()
  assert_clear_error(run_command("export", "--format=tfhub", f"--checkpoint={disc_dir}",
                                 f"--export_dir={out}"), "already exists", "--overwrite")
  assert os.listdir(out) == ["keep"]
  assert not [d for d in os.listdir(tmp_path) if d.startswith(".")]


def test_missing_extra_names_the_pip_extra(monkeypatch):
  import importlib.util

  real = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, "find_spec",
                      lambda name, *a: None if name == "tf2onnx" else real(name, *a))
  with pytest.raises(UserError, match=r"needs tf2onnx.*pip install 'electra_tf\[onnx\]'"):
    formats.get("onnx")


def test_tfhub_command(disc_dir, tmp_path):
  out = str(tmp_path / "hub")
  result = run_command("export", "--format=tfhub", f"--checkpoint={disc_dir}",
                       f"--export_dir={out}")
  assert result.returncode == 0, result.stderr[-3000:]
  assert sorted(os.listdir(out)) == ["encoder", "preprocessor"]
  assert os.path.isfile(os.path.join(out, "encoder", "assets", "vocab.txt"))


def test_onnx_command_exports_the_encoder_of_a_fine_tuning_run(tiny_runs, tmp_path):
  import json

  run_dir = os.path.dirname(tiny_runs["movies"][1])
  out = str(tmp_path / "onnx")
  result = run_command("export", "--format=onnx", "--task=encoder", f"--checkpoint={run_dir}",
                       f"--export_dir={out}")
  assert result.returncode == 0, result.stderr[-3000:]
  assert sorted(os.listdir(out)) == ["export.json", "model.onnx", "special_tokens_map.json",
                                     "tokenizer_config.json", "vocab.tokenizer.json",
                                     "vocab.txt"]
  assert json.load(open(os.path.join(out, "export.json")))["model"] == "encoder"


def test_a_failed_export_leaves_nothing(tiny_runs, tmp_path, monkeypatch):
  from electra_tf.errors import RuntimeFailure
  from electra_tf.serving import exporters, tflite_export

  def convert(source, quantize):
    if quantize:  # the float model is already written when the int8 conversion fails
      raise RuntimeFailure("the TFLite converter failed: test")
    return b"float model"

  monkeypatch.setattr(tflite_export, "convert", convert)
  out = tmp_path / "tflite"
  with pytest.raises(RuntimeFailure):
    exporters.export("tflite", tiny_runs["movies"][1], None, str(out))
  assert os.listdir(tmp_path) == []


def test_extras_are_spelled_as_pip_matches_them():
  """pip before 23.3 compares a requested extra with the built metadata's Provides-Extra,
  which setuptools normalizes (PEP 685: keras_hub -> keras-hub), without normalizing the
  request: `pip install -e '.[keras_hub]'` installed nothing. Every extra we name is
  written in its normalized form and defined in pyproject.toml. Checked by hand with
  setup.sh's pip 23.2.1, offline: `pip install --dry-run --no-index -e '.[keras_hub]'` warns
  "does not provide the extra 'keras_hub'"; with '.[keras-hub]' it resolves keras-hub."""
  import re
  import tomllib

  from testing_utils import ROOT

  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    extras = tomllib.load(f)["project"]["optional-dependencies"]
  named = {fmt.extra for fmt in formats.FORMATS.values() if fmt.extra}
  with open(os.path.join(ROOT, "docs", "exports.md"), encoding="utf-8") as f:
    named |= set(re.findall(r"electra_tf\[([^\]]+)\]", f.read()))
  for extra in named:
    assert extra == re.sub(r"[-_.]+", "-", extra).lower(), extra
    assert extra in extras, extra
