"""Test helpers: random PyTorch twins, padded inputs, output comparisons, a TF1 writer.

torch and transformers are test-only; importing this module imports them.
"""

import numpy as np
import tensorflow as tf
import torch

from electra_tf import features as F


def randomize(model: torch.nn.Module, seed: int = 0, std: float | None = None) -> torch.nn.Module:
  """Weights far from HF's tiny init, so that any mismatch shows in the outputs.

  With std 0.02 every logit is ~1e-2 and a wrong GELU form or LayerNorm epsilon would hide
  below a 1e-4 tolerance; with O(1) activations it cannot (a tanh GELU misses by ~1e-3).
  Much larger weights make the network ill-conditioned: then float32 transformers itself
  drifts ~1e-4 from a float64 run, so the default std is min(0.25, 2 / sqrt(H)).
  """
  std = std or min(0.25, 2.0 / model.config.hidden_size ** 0.5)
  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, param in model.named_parameters():
      noise = torch.randn(param.shape, generator=gen)
      if "LayerNorm.weight" in name:
        param.copy_(1.0 + 0.2 * noise)
      elif name.endswith("bias"):
        param.copy_(0.2 * noise)
      else:
        param.copy_(std * noise)
  model.tie_weights()
  return model.eval()


def randomize_tf(networks, seed: int = 0, std: float = 0.3) -> None:
  """The same for our tf_keras networks (shared variables are set once)."""
  rng = np.random.default_rng(seed)
  seen = set()
  for net in networks:
    for v in net.weights:
      if v.ref() in seen:
        continue
      seen.add(v.ref())
      noise = rng.standard_normal(v.shape).astype(np.float32)
      if "gamma" in v.name:
        v.assign(1.0 + 0.2 * noise)
      elif "bias" in v.name or "beta" in v.name:
        v.assign(0.2 * noise)
      else:
        v.assign(std * noise)


def make_inputs(vocab_size: int, batch: int = 3, length: int = 13, type_vocab_size: int = 2,
                seed: int = 0):
  """int64 numpy (ids, mask, segments) with padding in two rows and two or more segments."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(1, vocab_size, size=(batch, length))
  mask = np.ones((batch, length), np.int64)
  mask[1, length - 5:] = 0
  mask[2, 4:] = 0
  ids[mask == 0] = 0
  segments = np.zeros((batch, length), np.int64)
  segments[:, length // 2:] = 1
  segments[0, -2:] = type_vocab_size - 1
  segments[mask == 0] = 0
  return ids, mask, segments


def tf_inputs(ids, mask, segments) -> dict:
  return {F.INPUT_IDS: tf.constant(ids, tf.int32), F.INPUT_MASK: tf.constant(mask, tf.int32),
          F.SEGMENT_IDS: tf.constant(segments, tf.int32)}


def hf_outputs(model, ids, mask, segments):
  """(logits or None, list of hidden states) of a transformers model, as numpy."""
  with torch.no_grad():
    out = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                token_type_ids=torch.tensor(segments), output_hidden_states=True)
  logits = out.logits.numpy() if hasattr(out, "logits") else None
  return logits, [h.numpy() for h in out.hidden_states]


def our_outputs(net, ids, mask, segments):
  """(logits, list of hidden states) of our Generator / Discriminator, training=False."""
  inputs = tf_inputs(ids, mask, segments)
  logits = net(inputs, training=False).numpy()
  _, hidden = net.encoder(inputs, training=False, output_hidden_states=True)
  return logits, [h.numpy() for h in hidden]


def max_diff(a, b, mask) -> float:
  """Max |a - b| over the non-pad positions ([B, L, ...] arrays, mask [B, L])."""
  a, b = np.asarray(a), np.asarray(b)
  assert a.shape == b.shape, (a.shape, b.shape)
  return float(np.abs(a - b)[mask.astype(bool)].max())


def hidden_diff(ours, theirs, mask) -> float:
  assert len(ours) == len(theirs)
  return max(max_diff(a, b, mask) for a, b in zip(ours, theirs))


def check_hf_export(out_dir, generator, discriminator, vocab_size, type_vocab_size=2):
  """Load out_dir/{discriminator,generator} with transformers; compare. Returns the diffs."""
  import transformers

  ids, mask, seg = make_inputs(vocab_size, type_vocab_size=type_vocab_size)
  diffs = {}
  for name, net, cls in (("discriminator", discriminator, transformers.ElectraForPreTraining),
                         ("generator", generator, transformers.ElectraForMaskedLM)):
    if net is None:
      assert not (out_dir / name).exists()
      continue
    model, info = cls.from_pretrained(str(out_dir / name), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert not info["mismatched_keys"] and not info["error_msgs"], info
    model.eval()
    their_logits, their_hidden = hf_outputs(model, ids, mask, seg)
    logits, hidden = our_outputs(net, ids, mask, seg)
    diffs[name] = (max_diff(logits, their_logits, mask), hidden_diff(hidden, their_hidden, mask))
    assert diffs[name][0] < 1e-4 and diffs[name][1] < 1e-4, (name, diffs[name])
  return diffs


def _tf1_encoder_names(scope: str, num_layers: int, project: bool) -> dict:
  """{HF name without the electra. prefix: (TF1 name, transpose)}, spelled out by hand from
  ELECTRA_SPEC section 6 rather than derived from the code under test."""
  out = {}
  if project:
    out["embeddings_project.weight"] = (f"{scope}/embeddings_project/kernel", True)
    out["embeddings_project.bias"] = (f"{scope}/embeddings_project/bias", False)
  for i in range(num_layers):
    hf, tf1 = f"encoder.layer.{i}", f"{scope}/encoder/layer_{i}"
    for part in ("attention.self.query", "attention.self.key", "attention.self.value",
                 "attention.output.dense", "intermediate.dense", "output.dense"):
      out[f"{hf}.{part}.weight"] = (f"{tf1}/{part.replace('.', '/')}/kernel", True)
      out[f"{hf}.{part}.bias"] = (f"{tf1}/{part.replace('.', '/')}/bias", False)
    for part in ("attention.output.LayerNorm", "output.LayerNorm"):
      out[f"{hf}.{part}.weight"] = (f"{tf1}/{part.replace('.', '/')}/gamma", False)
      out[f"{hf}.{part}.bias"] = (f"{tf1}/{part.replace('.', '/')}/beta", False)
  return out


_EMBEDDINGS = {
    "embeddings.word_embeddings.weight": ("electra/embeddings/word_embeddings", False),
    "embeddings.position_embeddings.weight": ("electra/embeddings/position_embeddings", False),
    "embeddings.token_type_embeddings.weight": ("electra/embeddings/token_type_embeddings",
                                                False),
    "embeddings.LayerNorm.weight": ("electra/embeddings/LayerNorm/gamma", False),
    "embeddings.LayerNorm.bias": ("electra/embeddings/LayerNorm/beta", False),
}


TF1_HEADS = {
    "discriminator": {"discriminator_predictions/dense/kernel",
                      "discriminator_predictions/dense/bias",
                      "discriminator_predictions/dense_1/kernel",
                      "discriminator_predictions/dense_1/bias"},
    "generator": {"generator_predictions/dense/kernel", "generator_predictions/dense/bias",
                  "generator_predictions/LayerNorm/gamma", "generator_predictions/LayerNorm/beta",
                  "generator_predictions/output_bias"},
}


def tf1_names(scope: str, num_layers: int, project: bool, head: str | None = None,
              embeddings: bool = False) -> set[str]:
  """Names of one encoder in the authors' layout, from the hand-written tables above: its
  layers, `scope`/embeddings_project when `project`, its embeddings (`scope`/embeddings/...)
  when `embeddings`, and the tensors of `head` ("discriminator" or "generator")."""
  out = {name for name, _ in _tf1_encoder_names(scope, num_layers, project).values()}
  if embeddings:
    out |= {name.replace("electra/", f"{scope}/", 1) for name, _ in _EMBEDDINGS.values()}
  return out | (TF1_HEADS[head] if head else set())


def tf1_tensors(disc=None, gen=None) -> dict:
  """{TF1 name: numpy} of HF ElectraForPreTraining `disc` and ElectraForMaskedLM `gen`."""
  out = {}
  for model, scope in ((disc, "electra"), (gen, "generator")):
    if model is None:
      continue
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    cfg = model.config
    table = _tf1_encoder_names(scope, cfg.num_hidden_layers,
                               cfg.embedding_size != cfg.hidden_size)
    table.update(_EMBEDDINGS)
    for hf_name, (name, transpose) in table.items():
      array = state[f"electra.{hf_name}"]
      out.setdefault(name, array.T if transpose else array)
    if scope == "electra":
      for hf_head, tf1_head in (("dense", "dense"), ("dense_prediction", "dense_1")):
        out[f"discriminator_predictions/{tf1_head}/kernel"] = state[
            f"discriminator_predictions.{hf_head}.weight"].T
        out[f"discriminator_predictions/{tf1_head}/bias"] = state[
            f"discriminator_predictions.{hf_head}.bias"]
    else:
      out["generator_predictions/dense/kernel"] = state["generator_predictions.dense.weight"].T
      out["generator_predictions/dense/bias"] = state["generator_predictions.dense.bias"]
      out["generator_predictions/LayerNorm/gamma"] = state["generator_predictions.LayerNorm.weight"]
      out["generator_predictions/LayerNorm/beta"] = state["generator_predictions.LayerNorm.bias"]
      out["generator_predictions/output_bias"] = state["generator_lm_head.bias"]
  return out


def write_name_based_checkpoint(prefix: str, tensors: dict) -> None:
  """A TF1-style (name-based, no object graph) checkpoint, as the authors' Saver wrote."""
  keys = sorted(tensors)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=keys, shape_and_slices=[""] * len(keys),
                    tensors=[tf.constant(np.ascontiguousarray(tensors[k])) for k in keys])
