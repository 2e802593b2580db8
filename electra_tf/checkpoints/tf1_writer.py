"""The authors' TF1 checkpoints: write our networks in their names, layout and files.

One folder, laid out as their run_finetuning.py expects a pretrained model dir
(data_dir/models/<name>/: tf.train.init_from_checkpoint finds the prefix through the
`checkpoint` state file, vocab.txt beside it):

  checkpoint             model_checkpoint_path: "model.ckpt" (relative: the folder can move)
  model.ckpt.index/.data name-based tensors, float32; no optimizer slots, global_step or
                         .meta graph (their scripts build their own graph)
  bert_config.json       the discriminator's (an MLM's: its encoder's) BertConfig keys
  generator_config.json  the generator's, when there is one beside a discriminator
  vocab.txt              when the source had one

How our embedding sharing maps onto the flags of their run_pretraining.py:
  tied -> their default: generator/ encoder, embeddings under electra/embeddings/.
  none -> untied_generator_embeddings=True: the generator's own tables under
          generator/embeddings/. Their code builds these at the generator's hidden size
          (no generator/embeddings_project), so their run_pretraining.py reads them only
          when E equals it; run_finetuning.py reads electra/ alone.
  all  -> untied_generator=False: one electra/ encoder, both heads.
  gdes -> as none: the discriminator's word table is folded (shared + delta), the
          generator's embeddings are written in full under generator/embeddings/.
A lone generator (objective mlm) is their BERT baseline: electra/ encoder and the
generator_predictions/ head.
"""

from __future__ import annotations

import json
import os

import numpy as np
import tensorflow as tf

from electra_tf import fileio
from electra_tf.checkpoints import names
from electra_tf.checkpoints.tf1 import JSON_KEYS
from electra_tf.config import EncoderConfig, PretrainConfig
from electra_tf.data.vocab import copy_vocab
from electra_tf.errors import UserError, tf_error_line
from electra_tf.filenames import (
  BERT_CONFIG_NAME,
  GENERATOR_CONFIG_NAME,
  TF1_CKPT_NAME,
  TF1_STATE_NAME,
)


def bert_config(encoder: EncoderConfig) -> dict:
  """The BertConfig fields their code and BERT's read, with embedding_size and
  layer_norm_eps beside them (Hugging Face's ElectraConfig names; BertConfig.from_dict
  keeps unknown keys as attributes)."""
  config = {"vocab_size": encoder.vocab_size, "hidden_size": encoder.hidden_size,
            "num_hidden_layers": encoder.num_layers,
            "intermediate_size": encoder.intermediate_size, "hidden_act": "gelu",
            "max_position_embeddings": encoder.max_position_embeddings,
            "type_vocab_size": encoder.type_vocab_size,
            "embedding_size": encoder.embedding_size}
  config.update({key: getattr(encoder, field) for field, key in JSON_KEYS.items()})
  return config


def tf1_tensors(generator=None, discriminator=None) -> dict[str, np.ndarray]:
  """{name in the authors' checkpoint: array} of built networks (see the module docstring)."""
  tensors = names.extract(generator, discriminator)
  if discriminator is None:  # the BERT baseline keeps its one encoder under electra/
    return {name.replace("generator/", "electra/", 1) if name.startswith("generator/")
            else name: array for name, array in tensors.items()}
  shared, own = names.EMBEDDINGS + "/", names.GENERATOR_EMBEDDINGS + "/"
  if any(name.startswith(own) for name in tensors):
    # Their untied generator reads all its embedding tensors under generator/embeddings/;
    # under gdes only its word table is its own, the rest is the shared one.
    for name in [n for n in tensors if n.startswith(shared)]:
      tensors.setdefault(own + name[len(shared):], tensors[name])
  return tensors


def layout_notes(config: PretrainConfig, discriminator) -> list[str]:
  """What of `config` the authors' layout does not keep, for the converter's report."""
  notes = []
  if discriminator is not None and config.embedding_sharing == "gdes":
    notes.append("gdes embeddings written folded, as the authors' untied generator "
                 "embeddings: they read back as embedding_sharing=none, same outputs")
  head = getattr(discriminator, "head", None)
  if head is not None and names.is_mlm_head(head):
    notes.append(f"the {config.objective} objective's masked-LM head on the discriminator "
                 "has no place in the authors' layout: only its encoder was written")
  return notes


def write_tf1(directory: str, generator, discriminator, vocab_path: str | None) -> None:
  """Write the authors' TF1 files (see the module docstring) into the empty `directory`.

  Raises:
    UserError: the checkpoint cannot be written (a full disk, a remote path's error).
  """
  tensors = tf1_tensors(generator, discriminator)
  prefix = os.path.join(directory, TF1_CKPT_NAME)
  keys = sorted(tensors)
  try:
    # What their tf.train.Saver runs: a name-based V2 checkpoint with no object graph.
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=keys, shape_and_slices=[""] * len(keys),
                      tensors=[tf.constant(np.ascontiguousarray(tensors[k])) for k in keys])
  except tf.errors.OpError as exc:
    raise UserError(f"cannot write {prefix}: {tf_error_line(exc)}") from exc
  fileio.write_text(os.path.join(directory, TF1_STATE_NAME),
                    f'model_checkpoint_path: "{TF1_CKPT_NAME}"\n'
                    f'all_model_checkpoint_paths: "{TF1_CKPT_NAME}"\n')
  main = discriminator if discriminator is not None else generator
  configs = {BERT_CONFIG_NAME: main.config}
  if discriminator is not None and generator is not None:
    configs[GENERATOR_CONFIG_NAME] = generator.config
  for name, encoder in configs.items():
    fileio.write_text(os.path.join(directory, name),
                      json.dumps(bert_config(encoder), indent=2, sort_keys=True))
  if vocab_path:
    copy_vocab(vocab_path, directory)
