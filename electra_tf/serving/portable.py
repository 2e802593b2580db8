"""What the ONNX and TFLite exports share: the function traced from a model, and its metadata.

Both runtimes take token ids, not text: tokenization stays outside the graph. Beside the
model are the Hugging Face tokenizer files of its vocab (vocab.txt or spm.model,
tokenizer_config.json, special_tokens_map.json, tokenizer.json for SentencePiece), so

  tokenizer = transformers.AutoTokenizer.from_pretrained(export_dir)

gives the ids the model was trained on; export.json records the TokenizerSpec, and the
vocab's spec is written beside it too (our `load_vocab` / `make_tokenizer` read it).
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from electra_tf import features as F
from electra_tf import fileio
from electra_tf.data.vocab import VOCAB_NAMES, copy_vocab
from electra_tf.model.fused import portable_gelu
from electra_tf.serving.sources import EncoderSource, TaskSource

ID_KEYS = (F.INPUT_IDS, F.INPUT_MASK, F.SEGMENT_IDS)
METADATA_NAME = "export.json"  # what a portable export holds: inputs, outputs, task, vocab


def output_names(source: EncoderSource | TaskSource) -> list[str]:
  """The outputs a portable export returns, in order."""
  if isinstance(source, EncoderSource):
    return ["sequence_output", "pooled_output"]
  if source.is_squad:
    model = source.model
    return (["start_logits", "end_logits"] + (["start_top_index"] if model.joint_end else [])
            + (["impossible_logit"] if model.answerable else []))
  labels = (source.record.get("spec") or {}).get("label_names")
  return ["logits", "probabilities"] if labels else ["logits", "predictions"]


def outputs(source: EncoderSource | TaskSource, inputs: dict[str, tf.Tensor]) -> dict:
  """{name: float32 tensor} of `source` on int32 [B, L] `inputs` (inference, portable GELU)."""
  with portable_gelu():
    if isinstance(source, EncoderSource):
      sequence = tf.cast(source.encoder(inputs, training=False), tf.float32)
      return {"sequence_output": sequence, "pooled_output": sequence[:, 0]}
    out = source.model(inputs, training=False)
    if source.is_tagging:  # per-token label probabilities beside the logits
      out = {**out, "probabilities": tf.nn.softmax(tf.cast(out["logits"], tf.float32))}
    return {k: out[k] for k in output_names(source)}


def ids_function(source: EncoderSource | TaskSource, seq_length: int | None = None):
  """A tf.function of three int32 [batch, seq_length or any] positional inputs (input_ids,
  input_mask, segment_ids) returning `output_names(source)` as a dict."""
  spec = [tf.TensorSpec([None, seq_length], tf.int32, name=k) for k in ID_KEYS]

  @tf.function(input_signature=spec)
  def serve(input_ids, input_mask, segment_ids):
    return outputs(source, {F.INPUT_IDS: input_ids, F.INPUT_MASK: input_mask,
                            F.SEGMENT_IDS: segment_ids})

  return serve


def metadata(source: EncoderSource | TaskSource, fmt: str, **extra) -> dict:
  """export.json: what the model takes and returns, and how to tokenize for it."""
  if isinstance(source, EncoderSource):
    meta = {"model": "encoder", "max_seq_length": source.encoder.config.max_position_embeddings}
  else:
    meta = {"model": source.record["task"], "max_seq_length": source.max_seq_length}
    labels = (source.record.get("spec") or {}).get("label_names")
    if labels:
      meta["label_names"] = labels
    if source.is_tagging:  # outputs are per token: read each word at its first piece
      meta["tag_scheme"] = source.record["spec"]["scheme"]
  return {"format": fmt, **meta, "inputs": list(ID_KEYS), "outputs": output_names(source),
          "vocab": VOCAB_NAMES[source.vocab.spec.kind],
          "tokenizer": source.vocab.spec.to_dict(), **extra}


def _max_length(source: EncoderSource | TaskSource) -> int:
  if isinstance(source, EncoderSource):
    return source.encoder.config.max_position_embeddings
  return source.max_seq_length


def write_beside(source: EncoderSource | TaskSource, directory: str, meta: dict) -> None:
  """The vocab with its spec, the Hugging Face tokenizer files and export.json next to the
  model file."""
  from electra_tf.checkpoints.hf_tokenizer import write_hf_tokenizer

  copy_vocab(source.vocab, directory)
  write_hf_tokenizer(source.vocab, directory, max_length=_max_length(source))
  fileio.write_text(os.path.join(directory, METADATA_NAME), json.dumps(meta, indent=2))
