"""What every checkpoint reader returns (a Source: a config and canonical tensors, plus what it
ignored) and what loading it into networks gives (a Loaded, with its RestoreReport)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from electra_tf.checkpoints.names import EMBEDDINGS, HEADS
from electra_tf.config import (
  ConfigError,
  EncoderConfig,
  PretrainConfig,
  default_num_heads,
  generator_config,
)
from electra_tf.data.vocab import find_vocab_file
from electra_tf.errors import UserError

if TYPE_CHECKING:  # the model is built by the converter, not here
  from electra_tf.model import networks


@dataclasses.dataclass
class Source:
  """A checkpoint read into memory.

  Attributes:
    kind: "hf", "tf1", "converted", "model_dir" or "discriminator_export".
    path: what the user gave.
    config: the sizes, derived from the source.
    has_generator, has_discriminator: which networks the source holds.
    tensors: {canonical name: float32 array in the canonical (TF1) layout}.
    names: {canonical name: the tensor's name in the source}, for error messages.
    extra: source tensors with no counterpart (optimizer slots, poolers, other heads).
    vocab_path: the vocab (vocab.txt or spm.model) found with the weights, or None.
    networks: (generator, discriminator) already built and restored (our own formats).
    notes: facts worth printing (e.g. a head missing from the source).
    rename: the source's name for a canonical name it lacks (error messages).
  """

  kind: str
  path: str
  config: PretrainConfig
  has_generator: bool
  has_discriminator: bool
  tensors: dict[str, np.ndarray]
  names: dict[str, str] = dataclasses.field(default_factory=dict)
  extra: int = 0
  vocab_path: str | None = None
  networks: tuple | None = None
  notes: list[str] = dataclasses.field(default_factory=list)
  rename: Callable[[str], str] | None = None

  def display(self, name: str) -> str:
    """The source's own name for canonical `name`."""
    if name in self.names:
      return self.names[name]
    return self.rename(name) if self.rename else name


@dataclasses.dataclass
class RestoreReport:
  """What a restore did: tensors assigned, source tensors ignored, parts left initialized."""

  source: str
  restored: int
  extra: int
  initialized: list[str] = dataclasses.field(default_factory=list)
  notes: list[str] = dataclasses.field(default_factory=list)

  def summary(self) -> str:
    text = (f"restored {self.restored} tensors from {self.source}, "
            f"ignored {self.extra} other tensors (optimizer slots, poolers, unused heads)")
    if self.initialized:
      text += f"; not in the source, kept initialized: {', '.join(self.initialized)}"
    return "; ".join([text] + self.notes)


@dataclasses.dataclass
class Loaded:
  """A checkpoint loaded into built networks.

  Attributes:
    config: sizes derived from the source (training fields keep their defaults). When the
      source has no generator, config.generator is the derived default and `generator` is None.
    generator: the built Generator, or None.
    discriminator: the built Discriminator, or None (a lone MLM / ElectraForMaskedLM).
    vocab_path: the vocab (vocab.txt or spm.model) found with the weights, or None.
    source: "hf", "tf1", "converted", "model_dir" or "discriminator_export".
    report: what the restore did.
  """

  config: PretrainConfig
  generator: networks.Generator | None
  discriminator: networks.Discriminator | None
  vocab_path: str | None
  source: str
  report: RestoreReport


def find_vocab(*directories: str) -> str | None:
  """The first vocab in `directories`: a WordPiece vocab.txt or a SentencePiece spm.model
  (`vocab.find_vocab_file`); its spec is read with it by `vocab.load_vocab`."""
  for directory in directories:
    path = find_vocab_file(directory)
    if path:
      return path
  return None


def pretrain_config(model: EncoderConfig, generator: EncoderConfig | None = None,
                    objective: str = "electra",
                    embedding_sharing: str = "tied") -> PretrainConfig:
  """A PretrainConfig around imported sizes; the training fields keep their defaults.

  max_seq_length is capped by the position table so that short-position models load.
  """
  values = {"model": model, "objective": objective, "embedding_sharing": embedding_sharing,
            "max_seq_length": min(128, model.max_position_embeddings)}
  if generator is not None and generator != model:
    values["generator"] = generator
    fraction = generator.hidden_size / model.hidden_size
    if 0.0 < fraction <= 1.0:
      values["generator_fraction"] = fraction
  elif generator is not None:
    values.update(generator=generator, generator_fraction=1.0)
  else:
    values["generator"] = _default_generator(model)
  return PretrainConfig(**values)


def _default_generator(model: EncoderConfig) -> EncoderConfig:
  """The derived generator, with fewer heads where max(1, h // 64) does not divide its width
  (e.g. H=776 -> h=194, 3 heads): imported sizes are not always multiples of 64."""
  try:
    return generator_config(model, PretrainConfig.generator_fraction)
  except ConfigError:
    hidden = max(1, round(model.hidden_size * PretrainConfig.generator_fraction))
    heads = default_num_heads(hidden)
    while hidden % heads:
      heads -= 1
    return dataclasses.replace(model, hidden_size=hidden, num_heads=heads,
                               intermediate_size=4 * hidden)


def as_float32(name: str, array: np.ndarray) -> np.ndarray:
  """float16/bfloat16/float64 weights as float32; anything else is not a weight we can use.

  bfloat16 arrives as ml_dtypes' numpy type (registered by TensorFlow), of kind "V".
  """
  array = np.asarray(array)
  if array.dtype.kind != "f" and array.dtype.name != "bfloat16":
    raise UserError(f"tensor {name} has dtype {array.dtype}, expected floating point weights")
  return array.astype(np.float32, copy=False)


def merge(disc: Source, gen: Source) -> Source:
  """A discriminator source and a generator source (two HF folders) as one; embeddings shared."""
  if not disc.has_discriminator or disc.has_generator:
    raise UserError(f"{disc.path} must hold a discriminator only when a generator is given "
                    "separately")
  if not gen.has_generator:
    raise UserError(f"{gen.path} holds no generator (no generator_predictions tensors)")
  differ = []
  for name in [n for n in gen.tensors if n.startswith(EMBEDDINGS + "/")]:
    mine, theirs = disc.tensors.get(name), gen.tensors.pop(name)
    if mine is not None and (mine.shape != theirs.shape or not np.allclose(mine, theirs)):
      differ.append(gen.display(name))
  notes = []
  if differ:
    notes.append(f"the generator's {', '.join(differ)} differ from the discriminator's; "
                 "ELECTRA shares one set, the discriminator's is used")
  config = pretrain_config(disc.config.model, gen.config.model)

  def rename(name: str) -> str:
    own = name.startswith(("generator/", "generator_predictions/"))
    return gen.display(name) if own else disc.display(name)

  return Source(disc.kind, disc.path, config, has_generator=True, has_discriminator=True,
                tensors={**gen.tensors, **disc.tensors}, names={**gen.names, **disc.names},
                extra=disc.extra + gen.extra, vocab_path=disc.vocab_path or gen.vocab_path,
                notes=disc.notes + gen.notes + notes, rename=rename)


def encoder_as_discriminator(source: Source) -> Source:
  """An MLM-only source (BERT baseline, lone ElectraForMaskedLM) seen as a discriminator
  encoder, for fine-tuning from the only encoder it has."""
  tensors = {re.sub(r"^generator/", "electra/", k): v for k, v in source.tensors.items()
             if not k.startswith(HEADS["generator"] + "/")}
  renamed = {re.sub(r"^generator/", "electra/", k): source.display(k) for k in source.tensors}
  return dataclasses.replace(
      source, tensors=tensors, names=renamed, has_generator=False, has_discriminator=True,
      extra=source.extra + len(source.tensors) - len(tensors),
      notes=[*source.notes, "the source is a masked LM: its encoder went into the discriminator"],
      rename=lambda name: source.display(re.sub(r"^electra/(?!embeddings/)", "generator/", name)))
