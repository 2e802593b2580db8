"""One naming scheme for every checkpoint format: the authors' TF1 names ("canonical" names).

Every reader turns its source into {canonical name: array in the TF1 layout} (2-D kernels
[in, out], attention kernels [H, H]); every writer starts from that dict. Canonical names
name roles, not scopes: the generator's encoder is always `generator/...`, even when a
source stores it under `electra/` (a lone MLM, as in the authors' BERT baseline).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

EMBEDDINGS = "electra/embeddings"
SCOPES = {"discriminator": "electra", "generator": "generator"}
HEADS = {"discriminator": "discriminator_predictions", "generator": "generator_predictions"}

# How a canonical tensor maps onto a Keras variable of another shape.
SAME = "same"
HEADS_IN = "heads_in"  # [H, H] <-> EinsumDense [H, heads, head_dim] (query/key/value)
HEADS_BIAS = "heads_bias"  # [H] <-> [heads, head_dim]
HEADS_OUT = "heads_out"  # [H, H] <-> [heads, head_dim, H] (attention output)


@dataclasses.dataclass(frozen=True)
class Binding:
  """A canonical name bound to one variable of a built network.

  Attributes:
    name: canonical (TF1) name.
    variable: the tf.Variable.
    layout: SAME, HEADS_IN, HEADS_BIAS or HEADS_OUT.
    group: "embeddings", "<network>" (its encoder) or "<network>_head".
  """

  name: str
  variable: object
  layout: str
  group: str

  @property
  def canonical_shape(self) -> tuple[int, ...]:
    shape = tuple(int(d) for d in self.variable.shape)
    if self.layout == HEADS_IN:
      return (shape[0], shape[1] * shape[2])
    if self.layout == HEADS_BIAS:
      return (shape[0] * shape[1],)
    if self.layout == HEADS_OUT:
      return (shape[0] * shape[1], shape[2])
    return shape


def _dense(prefix: str, layer, group: str) -> list[Binding]:
  return [Binding(f"{prefix}/kernel", layer.kernel, SAME, group),
          Binding(f"{prefix}/bias", layer.bias, SAME, group)]


def _norm(prefix: str, layer, group: str) -> list[Binding]:
  return [Binding(f"{prefix}/gamma", layer.gamma, SAME, group),
          Binding(f"{prefix}/beta", layer.beta, SAME, group)]


def encoder_bindings(encoder, network: str) -> list[Binding]:
  """Bindings of an ElectraEncoder (embeddings included) acting as `network`.

  The block internals are Model Garden's TransformerEncoderBlock attributes; they are also
  the object paths of our own checkpoints, so a rename there breaks both loudly.
  """
  emb = encoder.embeddings
  out = [Binding(f"{EMBEDDINGS}/word_embeddings", emb.word_embeddings, SAME, "embeddings"),
         Binding(f"{EMBEDDINGS}/position_embeddings", emb.position_embeddings, SAME,
                 "embeddings"),
         Binding(f"{EMBEDDINGS}/token_type_embeddings", emb.token_type_embeddings, SAME,
                 "embeddings")]
  out += _norm(f"{EMBEDDINGS}/LayerNorm", emb.layer_norm, "embeddings")
  scope = SCOPES[network]
  if encoder.embeddings_project is not None:
    out += _dense(f"{scope}/embeddings_project", encoder.embeddings_project, network)
  for i, block in enumerate(encoder.blocks):
    prefix = f"{scope}/encoder/layer_{i}"
    attention = block._attention_layer
    for part in ("query", "key", "value"):
      dense = getattr(attention, f"_{part}_dense")
      out += [Binding(f"{prefix}/attention/self/{part}/kernel", dense.kernel, HEADS_IN, network),
              Binding(f"{prefix}/attention/self/{part}/bias", dense.bias, HEADS_BIAS, network)]
    dense = attention._output_dense
    out += [Binding(f"{prefix}/attention/output/dense/kernel", dense.kernel, HEADS_OUT, network),
            Binding(f"{prefix}/attention/output/dense/bias", dense.bias, SAME, network)]
    out += _norm(f"{prefix}/attention/output/LayerNorm", block._attention_layer_norm, network)
    out += _dense(f"{prefix}/intermediate/dense", block._intermediate_dense, network)
    out += _dense(f"{prefix}/output/dense", block._output_dense, network)
    out += _norm(f"{prefix}/output/LayerNorm", block._output_layer_norm, network)
  return out


class FoldedTable:
  """The word table of a discriminator under gradient-disentangled sharing, as one tensor.

  Reads give shared + delta (what a standalone discriminator uses); an assignment keeps
  the shared table and sets delta = value - shared, so it must follow the generator's own
  table in a restore (`bindings` puts it last).
  """

  def __init__(self, embeddings):
    self.embeddings = embeddings
    self.shape = embeddings.word_embeddings_delta.shape

  def numpy(self) -> np.ndarray:
    return self.embeddings.folded_word_embeddings().numpy()

  def ref(self):
    return self.embeddings.word_embeddings_delta.ref()

  def assign(self, value) -> None:
    delta = self.embeddings.word_embeddings_delta
    delta.assign(value - self.embeddings.shared.word_embeddings.read_value())


GENERATOR_EMBEDDINGS = "generator/embeddings"


def own_table_fallback(name: str) -> str | None:
  """A generator's own embedding table falls back to the shared one of a tied source."""
  if name.startswith(GENERATOR_EMBEDDINGS + "/"):
    return EMBEDDINGS + name[len(GENERATOR_EMBEDDINGS):]
  return None


def is_mlm_head(head) -> bool:
  return hasattr(head, "output_bias")


def network_bindings(model, network: str) -> list[Binding]:
  """Bindings of a Generator or Discriminator, or of a bare ElectraEncoder (no head).

  A discriminator-role network with a masked-LM head (the replace_mlm and all_tokens_mlm
  objectives) binds its encoder only: the TF1 and Hugging Face layouts have no such head.
  """
  encoder = getattr(model, "encoder", model)
  out = encoder_bindings(encoder, network)
  if hasattr(encoder.embeddings, "word_embeddings_delta"):  # GDESEmbeddings
    out[0] = Binding(out[0].name, FoldedTable(encoder.embeddings), SAME, out[0].group)
  head = getattr(model, "head", None)
  if head is None or (network == "discriminator" and is_mlm_head(head)):
    return out
  group, scope = f"{network}_head", HEADS[network]
  if network == "discriminator":
    return (out + _dense(f"{scope}/dense", head.dense, group)
            + _dense(f"{scope}/dense_1", head.dense_prediction, group))
  return (out + _dense(f"{scope}/dense", head.dense, group)
          + _norm(f"{scope}/LayerNorm", head.layer_norm, group)
          + [Binding(f"{scope}/output_bias", head.output_bias, SAME, group)])


def bindings(generator=None, discriminator=None) -> list[Binding]:
  """Bindings of both networks, each shared variable once (the embeddings).

  Shared embeddings take the discriminator's names (`electra/embeddings/...`); a
  generator's own tables (no sharing, or its word table under gdes) take
  `generator/embeddings/...`, as in the authors' untied checkpoints.
  """
  out, seen = [], set()
  for model, network in ((discriminator, "discriminator"), (generator, "generator")):
    if model is None:
      continue
    for binding in network_bindings(model, network):
      if binding.variable.ref() in seen:
        continue
      seen.add(binding.variable.ref())
      if (network == "generator" and discriminator is not None
          and binding.name.startswith(EMBEDDINGS + "/")):
        binding = dataclasses.replace(
            binding, name=GENERATOR_EMBEDDINGS + binding.name[len(EMBEDDINGS):])
      out.append(binding)
  folded = [b for b in out if isinstance(b.variable, FoldedTable)]
  return [b for b in out if not isinstance(b.variable, FoldedTable)] + folded


def extract(generator=None, discriminator=None) -> dict[str, np.ndarray]:
  """{canonical name: array in the canonical layout} of built networks."""
  return {b.name: np.asarray(b.variable.numpy()).reshape(b.canonical_shape)
          for b in bindings(generator, discriminator)}


# ---- Hugging Face names <-> canonical names -------------------------------------------------

_HF_LEAVES = {"weight": "kernel", "bias": "bias", "gamma": "gamma", "beta": "beta"}
_LAYER = re.compile(r"^encoder\.layer\.(\d+)\.(.+)$")


def _leaf_to_canonical(parts: list[str]) -> tuple[str, bool] | None:
  """(canonical suffix, transpose) for a dotted module path + leaf, or None."""
  *modules, leaf = parts
  if leaf not in _HF_LEAVES or not modules:
    return None
  if modules[-1] == "LayerNorm":
    return "/".join(modules) + ("/gamma" if leaf in ("weight", "gamma") else "/beta"), False
  return "/".join(modules) + "/" + _HF_LEAVES[leaf], leaf == "weight"


def hf_to_canonical(name: str, network: str) -> tuple[str, bool] | None:
  """(canonical name, transpose) of an HF tensor name with its model prefix removed.

  Args:
    name: e.g. "encoder.layer.0.attention.self.query.weight" or
      "discriminator_predictions.dense_prediction.bias".
    network: "discriminator" or "generator": whose encoder the `electra.` tensors are.

  Returns:
    None for tensors with no counterpart (poolers, buffers, other heads).
  """
  scope = SCOPES[network]
  if name.startswith("embeddings."):
    rest = name[len("embeddings."):]
    table = re.match(r"^(word|position|token_type)_embeddings\.weight$", rest)
    if table:
      return f"{EMBEDDINGS}/{table.group(1)}_embeddings", False
    mapped = _leaf_to_canonical(rest.split("."))
    return (f"{EMBEDDINGS}/{mapped[0]}", False) if mapped and "LayerNorm" in rest else None
  if name.startswith("embeddings_project."):
    mapped = _leaf_to_canonical(name.split("."))
    return (f"{scope}/{mapped[0]}", mapped[1]) if mapped else None
  layer = _LAYER.match(name)
  if layer:
    mapped = _leaf_to_canonical(layer.group(2).split("."))
    return (f"{scope}/encoder/layer_{layer.group(1)}/{mapped[0]}", mapped[1]) if mapped else None
  if name == "generator_lm_head.bias":
    return "generator_predictions/output_bias", False
  for head in ("discriminator_predictions", "generator_predictions"):
    if name.startswith(head + "."):
      mapped = _leaf_to_canonical(name.split("."))
      if mapped:
        return mapped[0].replace("/dense_prediction/", "/dense_1/"), mapped[1]
  return None


def canonical_to_hf(name: str) -> tuple[str, bool]:
  """(HF name of an Electra*For* model, transpose): the inverse of `hf_to_canonical`."""
  for scope in ("electra/", "generator/"):
    if name.startswith(scope):
      rest = name[len(scope):]
      break
  else:
    rest = name
  if name == "generator_predictions/output_bias":
    return "generator_lm_head.bias", False
  if rest.startswith("embeddings/") and rest.endswith("_embeddings"):
    return f"electra.{rest.replace('/', '.')}.weight", False
  rest = re.sub(r"encoder/layer_(\d+)/", r"encoder/layer/\1/", rest)
  rest = rest.replace("/dense_1/", "/dense_prediction/")
  leaf = rest.rsplit("/", 1)[1]
  path = rest.rsplit("/", 1)[0].replace("/", ".")
  hf_leaf = {"kernel": "weight", "bias": "bias", "gamma": "weight", "beta": "bias"}[leaf]
  is_head = name.startswith(tuple(f"{h}/" for h in HEADS.values()))
  return ("" if is_head else "electra.") + f"{path}.{hf_leaf}", leaf == "kernel"


_LAYER_TENSORS = (r"(attention/self/(query|key|value)|attention/output/dense|intermediate/dense"
                  r"|output/dense)/(kernel|bias)|(attention/output|output)/LayerNorm/(gamma|beta)")
_CANONICAL = re.compile(
    r"^((electra|generator)/embeddings/(word_embeddings|position_embeddings|token_type_embeddings"
    r"|LayerNorm/(gamma|beta))"
    r"|(electra|generator)/embeddings_project/(kernel|bias)"
    rf"|(electra|generator)/encoder/layer_\d+/({_LAYER_TENSORS})"
    r"|discriminator_predictions/(dense|dense_1)/(kernel|bias)"
    r"|generator_predictions/(dense/(kernel|bias)|LayerNorm/(gamma|beta)|output_bias))$")


def is_canonical(name: str) -> bool:
  """Whether `name` is a model tensor of the TF1 layout (optimizer slots and steps are not)."""
  return bool(_CANONICAL.match(name))
