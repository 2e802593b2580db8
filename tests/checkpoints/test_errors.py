"""Every conversion error is one clear UserError line: through the API and through the CLI."""

import json
import os
import sys

import numpy as np
import pytest
from testing_utils import run_command

from electra_tf.errors import UserError

SHAPE = {"vocab_size": 50, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
         "num_attention_heads": 2, "intermediate_size": 48, "max_position_embeddings": 24}


def _hf_folder(path, cls_name="ElectraForPreTraining", **changes):
  import transformers

  model = getattr(transformers, cls_name)(transformers.ElectraConfig(**{**SHAPE, **changes}))
  model.save_pretrained(path)
  return path


def _edit_config(path, **changes):
  file = os.path.join(path, "config.json")
  with open(file) as f:
    config = json.load(f)
  config.update(changes)
  with open(file, "w") as f:
    json.dump(config, f)


def _edit_weights(path, edit):
  from safetensors.numpy import load_file, save_file

  file = os.path.join(path, "model.safetensors")
  tensors = load_file(file)
  edit(tensors)
  save_file(tensors, file, metadata={"format": "pt"})


def _error(path, **kwargs) -> str:
  from electra_tf.checkpoints.converter import load

  with pytest.raises(UserError) as info:
    load(str(path), **kwargs)
  message = str(info.value)
  assert "\n" not in message
  return message


def test_not_a_checkpoint(tmp_path):
  assert "does not exist" in _error(tmp_path / "nothing")
  (tmp_path / "empty").mkdir()
  assert "is not a checkpoint" in _error(tmp_path / "empty")
  (tmp_path / "notes.txt").write_text("hello")
  assert "is not a checkpoint" in _error(tmp_path / "notes.txt")
  (tmp_path / "bad.ckpt.index").write_text("garbage")
  assert "cannot read the checkpoint" in _error(tmp_path / "bad.ckpt")


@pytest.mark.parametrize("model_type,arch", [("gpt2", "GPT2LMHeadModel"),
                                             ("t5", "T5ForConditionalGeneration")])
def test_other_architecture_config(tmp_path, model_type, arch):
  (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type,
                                                    "architectures": [arch]}))
  message = _error(tmp_path)
  assert f"'{model_type}' model ({arch})" in message and "ELECTRA and BERT" in message


def test_checkpoint_without_electra_tensors(tmp_path):
  from hf_twins import write_name_based_checkpoint

  write_name_based_checkpoint(str(tmp_path / "model.ckpt"),
                              {"transformer/h0/attn/c_attn/w": np.zeros((4, 12), np.float32)})
  message = _error(tmp_path / "model.ckpt")
  assert "no ELECTRA or BERT tensors" in message and "transformer/h0/attn/c_attn/w" in message
  # An HF folder whose weights are not an encoder at all.
  _hf_folder(tmp_path / "hf")
  _edit_weights(tmp_path / "hf", lambda t: [t.pop(k) for k in list(t) if "embeddings" in k])
  assert "no electra.embeddings.word_embeddings.weight" in _error(tmp_path / "hf")


def test_missing_tensor_is_named(tmp_path):
  from hf_twins import tf1_tensors, write_name_based_checkpoint

  name = "electra.encoder.layer.1.attention.self.key.weight"
  _hf_folder(tmp_path / "hf")
  _edit_weights(tmp_path / "hf", lambda t: t.pop(name))
  assert f"missing the tensor {name}" in _error(tmp_path / "hf")

  import transformers

  tensors = tf1_tensors(transformers.ElectraForPreTraining(transformers.ElectraConfig(**SHAPE)))
  del tensors["electra/encoder/layer_0/output/LayerNorm/beta"]
  write_name_based_checkpoint(str(tmp_path / "tf1" / "model.ckpt"), tensors)
  assert "missing the tensor electra/encoder/layer_0/output/LayerNorm/beta" in _error(
      tmp_path / "tf1" / "model.ckpt")


def test_shape_mismatch_names_tensor_and_both_shapes(tmp_path):
  from electra_tf.checkpoints.converter import load, restore_into, save
  from electra_tf.model.networks import build_networks

  _hf_folder(tmp_path / "hf")
  _edit_config(tmp_path / "hf", intermediate_size=50)
  message = _error(tmp_path / "hf")
  assert ("tensor electra.encoder.layer.0.intermediate.dense.weight has shape [48, 32]" in message
          and "expects [50, 32]" in message), message

  _hf_folder(tmp_path / "hf2")
  ours = save(load(str(tmp_path / "hf2")), str(tmp_path / "ours"))
  bigger = load(ours).config.replace(**{"model.hidden_size": 64, "model.num_heads": 2})
  _, discriminator = build_networks(bigger)
  with pytest.raises(UserError) as info:
    restore_into(ours, None, discriminator)
  assert ("tensor electra/embeddings_project/kernel has shape [16, 32]" in str(info.value)
          and "expects [16, 64]" in str(info.value)), str(info.value)


@pytest.mark.parametrize("key,value", [("hidden_act", "gelu_new"),
                                       ("position_embedding_type", "relative_key"),
                                       ("is_decoder", True)])
def test_unsupported_options(tmp_path, key, value):
  _hf_folder(tmp_path)
  _edit_config(tmp_path, **{key: value})
  message = _error(tmp_path)
  assert f"{key}={value!r} is not supported" in message


def test_bad_head_count_and_untied_generator(tmp_path):
  _hf_folder(tmp_path / "heads")
  _edit_config(tmp_path / "heads", num_attention_heads=5)
  assert "not divisible by num_heads 5" in _error(tmp_path / "heads")
  _hf_folder(tmp_path / "gen", "ElectraForMaskedLM")

  def untie(tensors):
    tensors["generator_lm_head.weight"] = np.ones((50, 16), np.float32)

  _edit_weights(tmp_path / "gen", untie)
  assert "only generators with a tied output layer" in _error(tmp_path / "gen")


def test_pytorch_bin_without_torch_asks_for_safetensors(tmp_path, monkeypatch):
  (tmp_path / "config.json").write_text(json.dumps({**SHAPE, "model_type": "electra"}))
  (tmp_path / "pytorch_model.bin").write_bytes(b"not read")
  monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
  message = _error(tmp_path)
  assert "needs torch" in message and "model.safetensors" in message


def test_networks_absent_from_source_and_existing_output(tmp_path):
  from electra_tf.checkpoints.converter import load, restore_into, save
  from electra_tf.model.networks import build_networks

  loaded = load(str(_hf_folder(tmp_path / "hf")))
  generator, discriminator = build_networks(loaded.config)
  with pytest.raises(UserError, match="holds no generator weights"):
    restore_into(str(tmp_path / "hf"), generator, discriminator)
  report = restore_into(str(tmp_path / "hf"), generator, discriminator, partial=True)
  assert report.initialized == ["generator"]
  save(loaded, str(tmp_path / "out"))
  with pytest.raises(UserError, match="already exists; remove it or pass --overwrite"):
    save(loaded, str(tmp_path / "out"))
  save(loaded, str(tmp_path / "out"), overwrite=True)
  assert sorted(os.listdir(tmp_path)) == ["hf", "out"]  # no temporary folders left behind


def test_cli_from_flag_must_match_the_input(tmp_path):
  from electra_tf.checkpoints.converter import convert as run

  _hf_folder(tmp_path / "hf")
  with pytest.raises(UserError, match="is a hf checkpoint, not tf1; use --from=hf"):
    run("tf1", None, str(tmp_path / "hf"), str(tmp_path / "out"))
  with pytest.raises(UserError, match="exactly one of"):
    run("hf", "hf", str(tmp_path / "hf"), str(tmp_path / "out"))
  assert not (tmp_path / "out").exists()


def _cli(*args):
  return run_command("convert", *args, timeout=300)


def test_cli_error_is_one_line_exit_2(tmp_path):
  (tmp_path / "gpt2").mkdir()
  (tmp_path / "gpt2" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
  result = _cli("--from=hf", f"--input={tmp_path / 'gpt2'}", f"--output={tmp_path / 'out'}")
  assert result.returncode == 2, result.stderr
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1, result.stderr  # no TensorFlow log lines, no traceback
  assert lines[0].startswith("error: ") and "'gpt2' model" in lines[0]
  assert not (tmp_path / "out").exists()


def test_cli_import_then_export(tmp_path):
  _hf_folder(tmp_path / "hf")
  result = _cli("--from=hf", f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'ckpt'}")
  assert result.returncode == 0, result.stderr
  assert not result.stderr.strip(), result.stderr
  assert "wrote" in result.stdout and (tmp_path / "ckpt" / "ckpt.index").exists()
  result = _cli("--to=hf", f"--input={tmp_path / 'ckpt'}", f"--output={tmp_path / 'hf_out'}")
  assert result.returncode == 0, result.stderr
  assert (tmp_path / "hf_out" / "discriminator" / "model.safetensors").exists()
  assert not (tmp_path / "hf_out" / "generator").exists()  # the source had no generator
  result = _cli("--to=tf1", f"--input={tmp_path / 'hf'}", f"--output={tmp_path / 'tf1'}")
  assert result.returncode == 0, result.stderr
  assert f"wrote {tmp_path / 'tf1'} (discriminator)" in result.stdout
  assert sorted(os.listdir(tmp_path / "tf1")) == [
      "bert_config.json", "checkpoint", "model.ckpt.data-00000-of-00001", "model.ckpt.index"]
