"""Hugging Face ELECTRA / BERT folders import and compute what transformers computes."""

import json

import numpy as np
import pytest

TOL = 1e-4

# Several shapes: E != H and E == H, one to four layers, one to four heads, 3 token types.
SHAPES = [
    {"vocab_size": 97, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
     "num_attention_heads": 4, "intermediate_size": 48, "max_position_embeddings": 40},
    {"vocab_size": 300, "embedding_size": 24, "hidden_size": 24, "num_hidden_layers": 1,
     "num_attention_heads": 3, "intermediate_size": 40, "max_position_embeddings": 64,
     "type_vocab_size": 3},
    {"vocab_size": 1000, "embedding_size": 32, "hidden_size": 64, "num_hidden_layers": 3,
     "num_attention_heads": 2, "intermediate_size": 128, "max_position_embeddings": 128,
     "layer_norm_eps": 1e-7},
]


def _electra(cls_name: str, shape: dict, seed: int):
  import transformers
  from hf_twins import randomize

  model = getattr(transformers, cls_name)(transformers.ElectraConfig(**shape))
  return randomize(model, seed)


def _compare(net, model, shape, seed=0, logits=True):
  """(max logit diff, max hidden-state diff, max |logit|) over non-pad positions."""
  from hf_twins import hf_outputs, hidden_diff, make_inputs, max_diff, our_outputs

  ids, mask, seg = make_inputs(shape["vocab_size"], type_vocab_size=shape.get(
      "type_vocab_size", 2), seed=seed)
  their_logits, their_hidden = hf_outputs(model, ids, mask, seg)
  ours, hidden = our_outputs(net, ids, mask, seg)
  diff = hidden_diff(hidden, their_hidden, mask)
  if not logits:
    return None, diff, None
  return max_diff(ours, their_logits, mask), diff, float(np.abs(their_logits).max())


@pytest.mark.parametrize("shape", SHAPES, ids=["E16-H32-L2", "E24-H24-L1-T3", "E32-H64-L3"])
def test_discriminator_matches_transformers(tmp_path, shape):
  from electra_tf.checkpoints.converter import load

  model = _electra("ElectraForPreTraining", shape, seed=1)
  model.save_pretrained(tmp_path)
  loaded = load(str(tmp_path))
  assert loaded.generator is None and loaded.source == "hf"
  assert loaded.config.model.hidden_size == shape["hidden_size"]
  assert loaded.config.model.embedding_size == shape["embedding_size"]
  assert loaded.config.model.num_heads == shape["num_attention_heads"]
  logit_diff, hidden_diff, scale = _compare(loaded.discriminator, model, shape)
  print(f"discriminator {shape['hidden_size']}: logits {logit_diff:.2e} hidden {hidden_diff:.2e}")
  assert scale > 0.1  # not the near-zero logits of HF's own init (~1e-2)
  assert logit_diff < TOL and hidden_diff < TOL
  assert loaded.report.extra == 0 and not loaded.report.initialized


@pytest.mark.parametrize("shape", SHAPES[:2], ids=["E16-H32-L2", "E24-H24-L1-T3"])
def test_generator_matches_transformers(tmp_path, shape):
  from electra_tf.checkpoints.converter import load

  model = _electra("ElectraForMaskedLM", shape, seed=2)
  model.save_pretrained(tmp_path)
  loaded = load(str(tmp_path))
  assert loaded.discriminator is None and loaded.config.objective == "mlm"
  logit_diff, hidden_diff, scale = _compare(loaded.generator, model, shape)
  print(f"generator {shape['hidden_size']}: logits {logit_diff:.2e} hidden {hidden_diff:.2e}")
  assert scale > 0.1
  assert logit_diff < TOL and hidden_diff < TOL


def test_padding_is_part_of_the_comparison(tmp_path):
  """Negative control: ignoring the attention mask must break the match by far."""
  from hf_twins import hf_outputs, make_inputs, max_diff, our_outputs

  from electra_tf.checkpoints.converter import load

  shape = SHAPES[0]
  model = _electra("ElectraForPreTraining", shape, seed=1)
  model.save_pretrained(tmp_path)
  loaded = load(str(tmp_path))
  ids, mask, seg = make_inputs(shape["vocab_size"])
  their_logits, _ = hf_outputs(model, ids, mask, seg)
  logits, _ = our_outputs(loaded.discriminator, ids, np.ones_like(mask), seg)
  assert max_diff(logits, their_logits, mask) > 1e-2


def test_discriminator_and_generator_folders_pair_up(tmp_path):
  """Hub-style separate folders; the generator is smaller and shares the embeddings."""
  import torch
  from hf_twins import make_inputs, our_outputs

  from electra_tf.checkpoints.converter import load, save

  disc_shape = SHAPES[2]
  gen_shape = {**disc_shape, "hidden_size": 16, "num_attention_heads": 1,
               "intermediate_size": 64}
  disc = _electra("ElectraForPreTraining", disc_shape, seed=3)
  gen = _electra("ElectraForMaskedLM", gen_shape, seed=4)
  with torch.no_grad():
    gen.electra.embeddings.load_state_dict(disc.electra.embeddings.state_dict())
  disc.save_pretrained(tmp_path / "disc")
  gen.save_pretrained(tmp_path / "gen")
  loaded = load(str(tmp_path / "disc"), generator_path=str(tmp_path / "gen"))
  assert loaded.generator.embeddings is loaded.discriminator.embeddings
  assert loaded.config.generator.hidden_size == 16 and loaded.config.model.hidden_size == 64
  assert not loaded.report.notes  # identical embeddings: nothing to warn about
  for net, model, shape in ((loaded.discriminator, disc, disc_shape),
                            (loaded.generator, gen, gen_shape)):
    logit_diff, hidden_diff, scale = _compare(net, model, shape)
    print(f"pair {net.name}: logits {logit_diff:.2e} hidden {hidden_diff:.2e} scale {scale:.1f}")
    assert logit_diff < TOL and hidden_diff < TOL
  # Round trip through our converted format: identical outputs.
  again = load(save(loaded, str(tmp_path / "ours")))
  assert again.source == "converted" and again.config == loaded.config
  ids, mask, seg = make_inputs(disc_shape["vocab_size"])
  for a, b in ((loaded.discriminator, again.discriminator), (loaded.generator, again.generator)):
    np.testing.assert_array_equal(our_outputs(a, ids, mask, seg)[0],
                                  our_outputs(b, ids, mask, seg)[0])


def test_electra_model_without_head(tmp_path):
  """ElectraModel (encoder only, no `electra.` prefix) -> discriminator; head left initialized."""
  import transformers
  from hf_twins import randomize

  from electra_tf.checkpoints.converter import load

  shape = SHAPES[0]
  model = randomize(transformers.ElectraModel(transformers.ElectraConfig(**shape)), seed=5)
  model.save_pretrained(tmp_path)
  loaded = load(str(tmp_path))
  assert loaded.report.initialized == ["discriminator head"]
  _, hidden_diff, _ = _compare(loaded.discriminator, model, shape, logits=False)
  assert hidden_diff < TOL


BERT_SHAPES = [
    {"vocab_size": 120, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
     "intermediate_size": 64, "max_position_embeddings": 32},
    {"vocab_size": 500, "hidden_size": 48, "num_hidden_layers": 3, "num_attention_heads": 4,
     "intermediate_size": 96, "max_position_embeddings": 64, "type_vocab_size": 3},
]


@pytest.mark.parametrize("cls_name,shape", [("BertModel", BERT_SHAPES[0]),
                                            ("BertForMaskedLM", BERT_SHAPES[1])])
def test_bert_imports_as_discriminator_encoder(tmp_path, cls_name, shape):
  import transformers
  from hf_twins import randomize

  from electra_tf.checkpoints.converter import load

  model = randomize(getattr(transformers, cls_name)(transformers.BertConfig(**shape)), seed=6)
  model.save_pretrained(tmp_path)
  loaded = load(str(tmp_path))
  assert loaded.config.model.embedding_size == shape["hidden_size"]
  assert loaded.discriminator.encoder.embeddings_project is None
  assert loaded.report.extra > 0  # the pooler or the MLM head: counted, not used
  _, hidden_diff, _ = _compare(loaded.discriminator, model, shape, logits=False)
  print(f"{cls_name}: hidden {hidden_diff:.2e}")
  assert hidden_diff < TOL


def test_pytorch_bin_is_read_with_torch(tmp_path):
  """transformers 5 writes only safetensors; older folders hold a pickled state dict."""
  import torch

  from electra_tf.checkpoints.converter import load

  shape = SHAPES[1]
  model = _electra("ElectraForPreTraining", shape, seed=7)
  model.save_pretrained(tmp_path)
  (tmp_path / "model.safetensors").unlink()
  torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
  loaded = load(str(tmp_path))
  logit_diff, hidden_diff, _ = _compare(loaded.discriminator, model, shape)
  assert logit_diff < TOL and hidden_diff < TOL


def test_sharded_and_bfloat16_safetensors(tmp_path):
  """Sharded folders (model.safetensors.index.json) and bfloat16 weights, which numpy lacks."""
  import torch
  from safetensors.numpy import load_file, save_file

  from electra_tf.checkpoints.converter import load

  shape = SHAPES[0]
  model = _electra("ElectraForPreTraining", shape, seed=8).to(torch.bfloat16)
  model.save_pretrained(tmp_path / "bf16")
  model = model.float()  # bfloat16 -> float32 is exact: the reference for both folders
  loaded = load(str(tmp_path / "bf16"))
  logit_diff, hidden_diff, _ = _compare(loaded.discriminator, model, shape)
  assert logit_diff < TOL and hidden_diff < TOL

  model.save_pretrained(tmp_path / "sharded")
  tensors = load_file(str(tmp_path / "sharded" / "model.safetensors"))
  (tmp_path / "sharded" / "model.safetensors").unlink()
  names = sorted(tensors)
  weight_map = {}
  for i, part in enumerate((names[::2], names[1::2])):
    file = f"model-0000{i + 1}-of-00002.safetensors"
    save_file({k: tensors[k] for k in part}, str(tmp_path / "sharded" / file),
              metadata={"format": "pt"})
    weight_map.update(dict.fromkeys(part, file))
  (tmp_path / "sharded" / "model.safetensors.index.json").write_text(
      json.dumps({"metadata": {}, "weight_map": weight_map}))
  loaded = load(str(tmp_path / "sharded"))
  logit_diff, hidden_diff, _ = _compare(loaded.discriminator, model, shape)
  assert logit_diff < TOL and hidden_diff < TOL
