"""ONNX export through tf2onnx: the encoder, or a fine-tuned task model, on token ids.

  model.onnx   int32 input_ids, input_mask, segment_ids [batch, seq] -> the outputs
               export.json lists (logits, start/end logits, or the encoder's states)
  beside it: the Hugging Face tokenizer files (vocab.txt or spm.model,
  tokenizer_config.json, ...; see portable.py) and export.json
"""

from __future__ import annotations

import json
import os

from electra_tf import atomic, fileio
from electra_tf.errors import RuntimeFailure
from electra_tf.serving import portable
from electra_tf.serving.sources import EncoderSource, TaskSource

MODEL_NAME = "model.onnx"
OPSET = 17  # LayerNormalization-era opset that onnxruntime 1.16+ and browsers run


def _rename_outputs(model_proto, names: list[str]) -> None:
  """Gives the graph outputs (tf2onnx names them Identity:0, ...) our output names."""
  renames = {out.name: name for out, name in zip(model_proto.graph.output, names)}
  for node in model_proto.graph.node:
    for i, name in enumerate(node.output):
      if name in renames:
        node.output[i] = renames[name]
    for i, name in enumerate(node.input):
      if name in renames:
        node.input[i] = renames[name]
  for out in model_proto.graph.output:
    out.name = renames[out.name]


def convert(source: EncoderSource | TaskSource):
  """The ONNX ModelProto of `source`, inputs and outputs under our names."""
  import onnx
  import tf2onnx

  fn = portable.ids_function(source)
  model_proto, _ = tf2onnx.convert.from_function(fn, input_signature=fn.input_signature,
                                                 opset=OPSET)
  # tf2onnx orders a dict's outputs by key, as tf.nest flattens it.
  _rename_outputs(model_proto, sorted(portable.output_names(source)))
  try:  # tf2onnx logs ops it cannot convert and writes them anyway
    onnx.checker.check_model(model_proto, full_check=True)
  except onnx.checker.ValidationError as exc:
    raise RuntimeFailure(f"tf2onnx made an invalid ONNX model: {str(exc).splitlines()[0]}") \
        from None
  return model_proto


def export(source: EncoderSource | TaskSource, export_dir: str) -> str:
  """Writes export_dir/model.onnx, the tokenizer files and export.json, all or nothing."""

  def write(tmp: str) -> None:
    model_proto = convert(source)
    meta = portable.metadata(source, "onnx", opset=OPSET)
    for key, value in (("tokenizer", json.dumps(meta["tokenizer"])),
                       ("outputs", str(meta["outputs"]))):
      entry = model_proto.metadata_props.add()
      entry.key, entry.value = key, value
    with fileio.open(os.path.join(tmp, MODEL_NAME), "wb") as f:
      f.write(model_proto.SerializeToString())
    portable.write_beside(source, tmp, meta)

  return atomic.write_dir(export_dir, write, portable.METADATA_NAME)
