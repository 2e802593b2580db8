"""The converter: load TF1 / Hugging Face / our checkpoints; save ours, TF1 or Hugging Face.

Every source is read into one naming scheme (the authors' TF1 names, see names.py) and
assigned to built networks through one function, so a missing tensor or a shape mismatch
reads the same whatever the source.

Example:
  >>> loaded = load("path/to/hf_electra_discriminator")
  >>> loaded.discriminator(inputs)  # [B, L] logits
  >>> save(loaded, "ckpt/base")  # then: pretrain.py / finetune.py --init_checkpoint=ckpt/base
  >>> export_hf("runs/small", "hf_out")  # hf_out/discriminator, hf_out/generator
  >>> export_tf1("runs/small", "tf1_out")  # the authors' layout: tf1_out/model.ckpt, ...
  >>> convert("hf", None, "path/to/hf_folder", "ckpt/base")  # what electra-convert runs
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import tensorflow as tf

from electra_tf import atomic, cli, fileio
from electra_tf.checkpoints import EXPORT_KINDS, IMPORT_KINDS, hf, names, native, tf1, tf1_writer
from electra_tf.checkpoints.source import (
  Loaded,
  RestoreReport,
  Source,
  encoder_as_discriminator,
  merge,
)
from electra_tf.config import PretrainConfig
from electra_tf.data.vocab import Vocab, copy_vocab, load_vocab
from electra_tf.errors import UserError
from electra_tf.filenames import CKPT_NAME, CONFIG_NAME, TF1_STATE_NAME
from electra_tf.model import networks


def read_source(path: str, *, num_heads: int | None = None,
                generator_path: str | None = None) -> Source:
  """Read any supported checkpoint at `path` (see `load`)."""
  if generator_path:
    return merge(read_source(path, num_heads=num_heads), read_source(generator_path))
  fileio.check_path(path)
  if not fileio.exists(path) and not fileio.isfile(path + ".index"):
    raise UserError(f"{path} does not exist")
  located = native.locate(path)
  if located:
    return native.read_native(path, *located)
  if hf.is_hf_folder(path):
    return hf.read_hf(path)
  if fileio.isfile(path + ".index"):
    return tf1.read_tf1(path, num_heads)
  latest = tf.train.latest_checkpoint(path) if fileio.isdir(path) else None
  if latest:
    return tf1.read_tf1(latest, num_heads)
  raise UserError(f"{path} is not a checkpoint: expected a Hugging Face folder (config.json + "
                  "model.safetensors or pytorch_model.bin), a TF1 checkpoint prefix (with a "
                  ".index file), or an electra_tf folder (config.json + ckpt or checkpoints/)")


def _source_shape(source: Source, name: str, shape) -> list[int]:
  """A canonical shape as the source stores it (HF Linear weights are [out, in])."""
  shape = [int(d) for d in shape]
  return shape[::-1] if source.kind == "hf" and name.endswith("/kernel") else shape


def _assign(source: Source, generator, discriminator, partial: bool) -> RestoreReport:
  """Check every tensor first, then assign: a failed restore leaves the networks untouched."""
  if (discriminator is not None and generator is None and not source.has_discriminator
      and source.has_generator):
    source = encoder_as_discriminator(source)
  initialized = []
  for model, network, present in ((generator, "generator", source.has_generator),
                                  (discriminator, "discriminator", source.has_discriminator)):
    if model is not None and not present:
      if not partial:
        raise UserError(f"{source.path} holds no {network} weights; pass {network}=None "
                        f"(or partial=True) to keep the {network}'s initial weights")
      initialized.append(network)
  binds = [b for b in names.bindings(generator, discriminator)
           if not any(b.group.startswith(n) for n in initialized)]
  heads = {b.group for b in binds if b.group.endswith("_head")}
  absent = {g for g in heads if not any(b.name in source.tensors for b in binds if b.group == g)}
  initialized += [g.replace("_", " ") for g in sorted(absent)]
  plan = []
  for b in binds:
    if b.group in absent:
      continue  # an encoder-only source (ElectraModel, BERT): the head keeps its init
    name = b.name
    if name not in source.tensors and names.own_table_fallback(name) in source.tensors:
      name = names.own_table_fallback(name)  # a tied source fills a generator's own table
    if name not in source.tensors:
      raise UserError(f"{source.path} is missing the tensor {source.display(b.name)}")
    array = source.tensors[name]
    if tuple(array.shape) != b.canonical_shape:
      raise UserError(
          f"tensor {source.display(b.name)} has shape "
          f"{_source_shape(source, b.name, array.shape)} in {source.path} but the model "
          f"expects {_source_shape(source, b.name, b.canonical_shape)}")
    plan.append((b, array))
  for b, array in plan:
    b.variable.assign(array.reshape(b.variable.shape))
  return RestoreReport(f"{source.kind}:{source.path}", restored=len(plan),
                       extra=source.extra + len(source.tensors) - len(plan),
                       initialized=initialized, notes=list(source.notes))


def restore_into(path: str | Source, generator=None, discriminator=None, *,
                 num_heads: int | None = None, generator_path: str | None = None,
                 partial: bool = False) -> RestoreReport:
  """Load weights from any supported checkpoint into already-built networks.

  No optimizer state is read or needed (released checkpoints have none).

  Args:
    path: anything `load` reads, or a Source from `read_source`.
    generator: a built Generator, or None to leave it alone.
    discriminator: a built Discriminator, a bare ElectraEncoder (fine-tuning), or None.
    num_heads, generator_path: as in `load`.
    partial: a network the source lacks keeps its initial weights instead of failing.

  Returns:
    A RestoreReport. A head absent from the source (ElectraModel, BERT) keeps its initial
    weights and is listed in `initialized`.

  Raises:
    UserError: a missing tensor or a shape mismatch (naming the tensor and both shapes).
  """
  source = path if isinstance(path, Source) else read_source(
      path, num_heads=num_heads, generator_path=generator_path)
  return _assign(source, generator, discriminator, partial)


def load(path: str, *, num_heads: int | None = None,
         generator_path: str | None = None) -> Loaded:
  """Load a checkpoint into built networks, with the config derived from the source.

  Args:
    path: a Hugging Face folder (ELECTRA or BERT; safetensors, or pytorch_model.bin when
      torch is installed), an authors' TF1 checkpoint prefix or folder, one of our converted
      folders, a pretraining model_dir (its latest checkpoint), or a discriminator export.
    num_heads: the discriminator's head count for TF1 checkpoints, which do not record it.
    generator_path: an HF ElectraForMaskedLM folder to pair with an HF discriminator at
      `path` (the hub publishes them separately); the discriminator's embeddings are used.

  Returns:
    Loaded with the built Generator and/or Discriminator.
  """
  return load_source(read_source(path, num_heads=num_heads, generator_path=generator_path))


def load_source(source: Source) -> Loaded:
  """`load` for a Source already read with `read_source`."""
  if source.networks is not None:
    generator, discriminator = source.networks
    report = RestoreReport(f"{source.kind}:{source.path}", len(source.tensors), source.extra)
  else:
    generator, discriminator = _build(source.config, source.has_generator)
    report = _assign(source, generator, discriminator, partial=False)
  return Loaded(source.config, generator, discriminator, source.vocab_path, source.kind, report)


def _build(config: PretrainConfig, with_generator: bool):
  """(generator or None, discriminator or None) of `config`, built, embeddings shared."""
  if with_generator or config.objective == "mlm":
    return networks.build_networks(config)
  # No generator: nothing to share the embeddings with.
  discriminator = networks.Discriminator(config.model)
  discriminator(networks.dummy_inputs())
  return None, discriminator


def _write_dir(output_dir: str, overwrite: bool, write: Callable[[str], None],
               marker: str) -> str:
  """Build `output_dir` with electra_tf.atomic (`marker` last): never half-written."""
  output_dir = fileio.abspath(output_dir)
  exists = fileio.exists(output_dir) and (
      not fileio.isdir(output_dir) or bool(fileio.listdir(output_dir)))
  if exists and not overwrite:
    raise UserError(f"{output_dir} already exists; remove it or pass --overwrite")
  atomic.write_dir(output_dir, write, marker)
  return output_dir


def _networks(loaded: Loaded) -> dict:
  models = {k: v for k, v in (("generator", loaded.generator),
                              ("discriminator", loaded.discriminator)) if v is not None}
  if not models:
    raise UserError("nothing to write: the loaded checkpoint has neither network")
  return models


def _vocab(loaded: Loaded) -> Vocab | None:
  """The vocab found with the checkpoint and its spec: recorded beside it (ours, or a Hugging
  Face tokenizer_config.json), else inferred from its tokens and said in one line."""
  return load_vocab(loaded.vocab_path) if loaded.vocab_path else None


def save(loaded: Loaded, output_dir: str, *, overwrite: bool = False) -> str:
  """Write our converted format: config.json + ckpt (+ vocab.txt or spm.model, its spec beside).

  The checkpoint is `Checkpoint(model=Checkpoint(generator=..., discriminator=...))`: the
  object paths of a pretraining checkpoint, so `restore_into` and a plain
  `tf.train.Checkpoint(model=pretrainer).restore(...)` read it alike.
  """
  models = _networks(loaded)
  vocab = _vocab(loaded)

  def write(tmp: str) -> None:
    tf.train.Checkpoint(model=tf.train.Checkpoint(**models)).write(
        os.path.join(tmp, CKPT_NAME))
    fileio.write_text(os.path.join(tmp, CONFIG_NAME), json.dumps(
        {"pretrain": loaded.config.to_dict(), "converted_from": loaded.report.source},
        indent=2, sort_keys=True))
    if vocab is not None:  # vocab.txt or spm.model, with the spec it was read with
      copy_vocab(vocab, tmp)

  return _write_dir(output_dir, overwrite, write, CONFIG_NAME)


def export_hf(loaded_or_path: Loaded | str, output_dir: str, *, overwrite: bool = False) -> str:
  """Write Hugging Face folders: output_dir/discriminator (ElectraForPreTraining) and
  output_dir/generator (ElectraForMaskedLM), each config.json + model.safetensors and, with
  a vocab, its tokenizer files written from the vocab's spec (`hf_tokenizer`), so that
  AutoTokenizer on either folder gives our ids.

  Args:
    loaded_or_path: a Loaded, or anything `load` reads.
    output_dir: created (atomically); an existing non-empty one needs overwrite=True.
  """
  loaded = loaded_or_path if isinstance(loaded_or_path, Loaded) else load(loaded_or_path)
  models = _networks(loaded)
  tensors = names.extract(loaded.generator, loaded.discriminator)
  vocab = _vocab(loaded)

  def write(tmp: str) -> None:
    for network, model in models.items():
      hf.write_hf_folder(os.path.join(tmp, network), tensors, model.config, network, vocab)

  return _write_dir(output_dir, overwrite, write, hf.CONFIG_NAME)


def export_tf1(loaded_or_path: Loaded | str, output_dir: str, *, overwrite: bool = False) -> str:
  """Write the authors' TF1 layout into output_dir (see tf1_writer): model.ckpt, its
  `checkpoint` state file, bert_config.json (+ generator_config.json, vocab.txt).

  Args: as in `export_hf`.
  """
  loaded = loaded_or_path if isinstance(loaded_or_path, Loaded) else load(loaded_or_path)
  _networks(loaded)
  return _write_dir(output_dir, overwrite, lambda tmp: tf1_writer.write_tf1(
      tmp, loaded.generator, loaded.discriminator, loaded.vocab_path), TF1_STATE_NAME)


def convert(direction_from: str | None, direction_to: str | None, input_path: str | None,
            output: str | None, generator_input: str | None = None,
            num_heads: int | None = None, overwrite: bool = False) -> str:
  """Import `input_path` into our format (direction_from: a key of IMPORT_KINDS) or export
  it (direction_to: "hf" or "tf1", EXPORT_KINDS); returns the line the command prints.

  Raises:
    UserError: bad arguments, an input of another kind than `direction_from`, or an
      unreadable checkpoint.
  """
  if bool(direction_from) == bool(direction_to):
    raise UserError(f"give exactly one of --from={'|'.join(IMPORT_KINDS)} (import) or "
                    f"--to={'|'.join(EXPORT_KINDS)} (export)")
  if direction_from not in (None, *IMPORT_KINDS) or direction_to not in (None, *EXPORT_KINDS):
    raise UserError(f"unknown format {direction_from or direction_to!r}: --from takes "
                    f"{', '.join(IMPORT_KINDS)}; --to takes {', '.join(EXPORT_KINDS)}")
  if not input_path or not output:
    raise UserError("--input and --output are required")
  if num_heads is not None and num_heads < 1:
    raise UserError(f"--num_heads must be positive, got {num_heads}")
  cli.check_output_dir(output, "--output")  # before minutes of reading a checkpoint
  source = read_source(input_path, num_heads=num_heads, generator_path=generator_input)
  if direction_from and source.kind not in IMPORT_KINDS[direction_from]:
    found = next(k for k, kinds in IMPORT_KINDS.items() if source.kind in kinds)
    raise UserError(f"{input_path} is a {found} checkpoint, not {direction_from}; "
                    f"use --from={found}")
  loaded = load_source(source)
  write = {"hf": export_hf, "tf1": export_tf1, None: save}[direction_to]
  path = write(loaded, output, overwrite=overwrite)
  notes = (tf1_writer.layout_notes(loaded.config, loaded.discriminator)
           if direction_to == "tf1" else [])
  nets = " + ".join(n for n, m in (("discriminator", loaded.discriminator),
                                   ("generator", loaded.generator)) if m is not None)
  return "; ".join([f"wrote {path} ({nets})", loaded.report.summary(), *notes])
