"""Our networks written in the authors' TF1 layout: tf.compat.v1 checkpoint utilities see their
names and shapes (spelled out by hand from ELECTRA_SPEC section 6 and their modeling.py), and
our TF1 import reads them back to identical outputs in every embedding-sharing mode."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from electra_tf.errors import UserError

# E != H, 4 heads where the authors' rule gives 1, another epsilon and no dropout: only
# bert_config.json carries these, so a wrong or missing file changes the outputs.
MODEL = {"vocab_size": 97, "hidden_size": 48, "num_layers": 2, "num_heads": 4,
         "intermediate_size": 64, "embedding_size": 24, "max_position_embeddings": 40,
         "layer_norm_eps": 1e-6, "dropout_rate": 0.0}
# One layer, 3 heads where the rule gives 1 (carried by generator_config.json), H != E.
GENERATOR = {**MODEL, "hidden_size": 30, "num_layers": 1, "num_heads": 3, "intermediate_size": 32}
MODES = ["tied", "none", "all", "gdes", "mlm"]


def _config(mode):
  from electra_tf.config import EncoderConfig, PretrainConfig

  model = EncoderConfig(**MODEL)
  if mode == "mlm":
    return PretrainConfig(model=model, objective="mlm", max_seq_length=32)
  generator = model if mode == "all" else EncoderConfig(**GENERATOR)
  return PretrainConfig(model=model, generator=generator, embedding_sharing=mode,
                        max_seq_length=32)


def _export(tmp_path, config):
  """(generator, discriminator, output folder): random networks of `config` exported to TF1."""
  from hf_twins import randomize_tf

  from electra_tf.checkpoints.converter import Loaded, RestoreReport, export_tf1
  from electra_tf.model.networks import build_networks

  generator, discriminator = build_networks(config)
  randomize_tf([n for n in (generator, discriminator) if n is not None], seed=7)
  vocab = tmp_path / "vocab.txt"
  specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  vocab.write_text("\n".join(specials + [f"t{i}" for i in range(MODEL["vocab_size"] - 5)]))
  loaded = Loaded(config, generator, discriminator, str(vocab), "test", RestoreReport("", 0, 0))
  return generator, discriminator, export_tf1(loaded, str(tmp_path / "tf1"))


def _assert_identical(ours, theirs, logits=True):
  from hf_twins import make_inputs, our_outputs

  ids, mask, seg = make_inputs(MODEL["vocab_size"])
  (our_logits, hidden), (their_logits, their_hidden) = (our_outputs(ours, ids, mask, seg),
                                                        our_outputs(theirs, ids, mask, seg))
  if logits:
    np.testing.assert_array_equal(our_logits, their_logits)
  assert len(hidden) == len(their_hidden)
  for a, b in zip(hidden, their_hidden):
    np.testing.assert_array_equal(a, b)


def _authors_names(mode):
  """Every tensor name the authors' code creates for these sizes and flags (module docstring
  of tf1_writer), from hf_twins' hand-written tables."""
  from hf_twins import TF1_HEADS, tf1_names

  if mode == "mlm":  # their BERT baseline: one electra/ encoder, the generator's head
    return tf1_names("electra", 2, True, "generator", embeddings=True)
  names = tf1_names("electra", 2, True, "discriminator", embeddings=True)
  if mode == "all":  # untied_generator=False: one encoder, both heads
    return names | TF1_HEADS["generator"]
  return names | tf1_names("generator", 1, True, "generator",
                           embeddings=mode in ("none", "gdes"))  # untied_generator_embeddings


@pytest.mark.parametrize("mode", MODES)
def test_round_trip_gives_identical_outputs(tmp_path, mode):
  from electra_tf.checkpoints.converter import load

  config = _config(mode)
  generator, discriminator, out = _export(tmp_path, config)
  reader = tf.compat.v1.train.NewCheckpointReader(os.path.join(out, "model.ckpt"))
  shapes = reader.get_variable_to_shape_map()
  assert set(shapes) == _authors_names(mode)
  back = load(out)  # the folder: its `checkpoint` file names model.ckpt
  assert back.source == "tf1" and back.report.extra == 0
  assert back.report.restored == len(shapes) and not back.report.initialized
  assert back.vocab_path == os.path.join(out, "vocab.txt")
  assert back.config.model == config.model and back.config.objective == config.objective
  if mode != "mlm":
    assert back.config.generator == config.generator
    assert back.config.embedding_sharing == ("none" if mode == "gdes" else mode)
  if mode == "all":
    assert back.generator.encoder is back.discriminator.encoder
  for ours, theirs in ((generator, back.generator), (discriminator, back.discriminator)):
    assert (ours is None) == (theirs is None)
    if ours is not None:
      _assert_identical(ours, theirs)


def test_authors_names_shapes_and_files_read_by_tf_compat_v1(tmp_path):
  from electra_tf.checkpoints import names
  from electra_tf.checkpoints.converter import load

  generator, discriminator, out = _export(tmp_path, _config("tied"))
  prefix = tf.train.latest_checkpoint(out)
  assert prefix == os.path.join(out, "model.ckpt")
  state = (tmp_path / "tf1" / "checkpoint").read_text()
  assert 'model_checkpoint_path: "model.ckpt"' in state  # relative: the folder can move
  reader = tf.compat.v1.train.NewCheckpointReader(prefix)
  shapes = reader.get_variable_to_shape_map()
  assert dict(tf.compat.v1.train.list_variables(out)) == shapes
  assert all(dtype == tf.float32 for dtype in reader.get_variable_to_dtype_map().values())
  # Shapes as their modeling.py (embedding_lookup, tf.layers.dense, layer_norm) and
  # run_pretraining.py (the heads) create them.
  V, E, H, F, h, h_F = 97, 24, 48, 64, 30, 32  # F: the feed-forward (intermediate) size
  expected = {
      "electra/embeddings/word_embeddings": [V, E],
      "electra/embeddings/position_embeddings": [40, E],
      "electra/embeddings/token_type_embeddings": [2, E],
      "electra/embeddings/LayerNorm/gamma": [E],
      "electra/embeddings_project/kernel": [E, H],
      "electra/encoder/layer_1/attention/self/query/kernel": [H, H],
      "electra/encoder/layer_1/attention/self/value/bias": [H],
      "electra/encoder/layer_0/attention/output/dense/kernel": [H, H],
      "electra/encoder/layer_0/intermediate/dense/kernel": [H, F],
      "electra/encoder/layer_0/output/dense/kernel": [F, H],
      "electra/encoder/layer_0/output/LayerNorm/beta": [H],
      "discriminator_predictions/dense/kernel": [H, H],
      "discriminator_predictions/dense_1/kernel": [H, 1],
      "discriminator_predictions/dense_1/bias": [1],
      "generator/embeddings_project/kernel": [E, h],
      "generator/encoder/layer_0/intermediate/dense/kernel": [h, h_F],
      "generator_predictions/dense/kernel": [h, E],
      "generator_predictions/LayerNorm/gamma": [E],
      "generator_predictions/output_bias": [V],
  }
  assert {name: shapes[name] for name in expected} == expected
  # Exactly the names and shapes our import binds.
  back = load(out)
  bound = names.bindings(back.generator, back.discriminator)
  assert {b.name: list(b.canonical_shape) for b in bound} == shapes
  for name, encoder in (("bert_config.json", MODEL), ("generator_config.json", GENERATOR)):
    config = json.loads((tmp_path / "tf1" / name).read_text())
    assert config["num_attention_heads"] == encoder["num_heads"]
    assert config["num_hidden_layers"] == encoder["num_layers"]
    assert config["embedding_size"] == E and config["hidden_act"] == "gelu"
    assert config["layer_norm_eps"] == 1e-6 and config["hidden_dropout_prob"] == 0.0

  # What their run_finetuning.py does: its graph's variables (named by their modeling.py),
  # initialized from the folder through get_assignment_map_from_checkpoint's rule.
  ours = names.extract(generator, discriminator)
  wanted = sorted(n for n in shapes if n.startswith(("electra/", "discriminator_predictions/")))
  with tf.Graph().as_default():
    variables = {n: tf.compat.v1.get_variable(n, shapes[n], initializer=tf.zeros_initializer())
                 for n in wanted}
    assignment = {n: n for n, _ in tf.compat.v1.train.list_variables(out) if n in variables}
    tf.compat.v1.train.init_from_checkpoint(out, assignment)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      values = session.run(variables)
  assert sorted(assignment) == wanted
  for name in wanted:
    np.testing.assert_array_equal(values[name], ours[name])
  os.rename(out, tmp_path / "moved")
  assert tf.train.latest_checkpoint(str(tmp_path / "moved")) == str(tmp_path / "moved/model.ckpt")


def test_gdes_delta_is_folded_into_the_discriminator_table(tmp_path):
  from electra_tf.checkpoints.converter import Loaded, RestoreReport, convert, save

  generator, discriminator, _ = _export(tmp_path, _config("gdes"))
  shared = generator.encoder.embeddings.word_embeddings.numpy()
  delta = discriminator.encoder.embeddings.word_embeddings_delta.numpy()
  assert np.abs(delta).max() > 0.1
  # Through our converted format and the command's function, as a user would.
  loaded = Loaded(_config("gdes"), generator, discriminator, None, "test", RestoreReport("", 0, 0))
  ours = save(loaded, str(tmp_path / "ours"))
  line = convert(None, "tf1", ours, str(tmp_path / "out"))
  assert line.startswith(f"wrote {tmp_path / 'out'} (discriminator + generator)")
  assert "gdes embeddings written folded" in line
  reader = tf.compat.v1.train.NewCheckpointReader(str(tmp_path / "out" / "model.ckpt"))
  np.testing.assert_array_equal(reader.get_tensor("electra/embeddings/word_embeddings"),
                                shared + delta)
  np.testing.assert_array_equal(reader.get_tensor("generator/embeddings/word_embeddings"), shared)
  for part in ("position_embeddings", "token_type_embeddings", "LayerNorm/gamma", "LayerNorm/beta"):
    np.testing.assert_array_equal(reader.get_tensor(f"generator/embeddings/{part}"),
                                  reader.get_tensor(f"electra/embeddings/{part}"))
  assert not any("delta" in name for name in reader.get_variable_to_shape_map())


def test_bad_output_and_failed_write_leave_nothing_behind(tmp_path, monkeypatch):
  from electra_tf.checkpoints.converter import convert, export_tf1, load

  _, _, out = _export(tmp_path, _config("tied"))
  count = len(tf.compat.v1.train.list_variables(out))
  (tmp_path / "file").write_text("x")
  for output, message in ((tmp_path / "file", "is a file; give a directory"),
                          (tmp_path / "file" / "sub", "cannot be created"),
                          (tmp_path / "tf1", "already exists; remove it or pass --overwrite")):
    with pytest.raises(UserError, match=message) as info:
      convert(None, "tf1", out, str(output))
    assert "\n" not in str(info.value)
  with pytest.raises(UserError, match="unknown format 'tf2'"):
    convert(None, "tf2", out, str(tmp_path / "new"))
  with pytest.raises(UserError, match=r"exactly one of .* --to=hf\|tf1 \(export\)"):
    convert("tf1", "tf1", out, str(tmp_path / "new"))

  def disk_full(**kwargs):
    raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

  monkeypatch.setattr(tf.raw_ops, "SaveV2", disk_full)
  with pytest.raises(UserError, match="cannot write .*model.ckpt: No space left on device"):
    export_tf1(out, str(tmp_path / "new"))
  with pytest.raises(UserError, match="No space left on device"):
    export_tf1(out, out, overwrite=True)  # the old folder survives a failed replacement
  assert sorted(os.listdir(tmp_path)) == ["file", "tf1", "vocab.txt"]  # no temporary folders
  assert load(out).report.restored == count


def test_untied_generator_embeddings_of_another_size_are_refused(tmp_path):
  from hf_twins import write_name_based_checkpoint

  from electra_tf.checkpoints.converter import load

  _, _, out = _export(tmp_path, _config("none"))
  reader = tf.compat.v1.train.NewCheckpointReader(os.path.join(out, "model.ckpt"))
  tensors = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
  tensors["generator/embeddings/word_embeddings"] = np.zeros((97, 8), np.float32)
  write_name_based_checkpoint(str(tmp_path / "other" / "model.ckpt"), tensors)
  with pytest.raises(UserError, match=r"generator's own word embeddings are \[97, 8\] but the "
                                      r"discriminator's \[97, 24\]"):
    load(str(tmp_path / "other" / "model.ckpt"))


def test_a_masked_lm_head_on_the_discriminator_is_left_out_and_said(tmp_path):
  """replace_mlm trains an MLM head on the second network: their layout has no place for it."""
  from hf_twins import randomize_tf

  from electra_tf.checkpoints.converter import Loaded, RestoreReport, convert, load, save
  from electra_tf.model.networks import build_networks

  config = _config("tied").replace(objective="replace_mlm")
  generator, discriminator = build_networks(config)
  randomize_tf([generator, discriminator], seed=8)
  ours = save(Loaded(config, generator, discriminator, None, "test", RestoreReport("", 0, 0)),
              str(tmp_path / "ours"))
  line = convert(None, "tf1", ours, str(tmp_path / "tf1"))
  assert line.endswith("the replace_mlm objective's masked-LM head on the discriminator has no "
                       "place in the authors' layout: only its encoder was written")
  assert not any(n.startswith("discriminator_predictions/")
                 for n, _ in tf.compat.v1.train.list_variables(str(tmp_path / "tf1")))
  back = load(str(tmp_path / "tf1"))
  assert back.report.initialized == ["discriminator head"]
  _assert_identical(discriminator, back.discriminator, logits=False)  # every hidden state
  _assert_identical(generator, back.generator)
