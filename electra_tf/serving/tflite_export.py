"""TFLite (LiteRT) export of fine-tuned task models: float32 and dynamic-range int8.

  model.tflite       float32 weights
  model_int8.tflite  int8 weights (dynamic-range quantization), float activations
  beside them: the Hugging Face tokenizer files (see portable.py) and export.json

Each model has one signature, serving_default: int32 input_ids, input_mask, segment_ids
[batch, max_seq_length] -> the task's outputs. Tokenization stays outside the graph.
"""

from __future__ import annotations

import os

import tensorflow as tf

from electra_tf import atomic, fileio
from electra_tf.errors import RuntimeFailure, tf_error_line
from electra_tf.serving import portable
from electra_tf.serving.sources import TaskSource

FLOAT_NAME = "model.tflite"
INT8_NAME = "model_int8.tflite"


def convert(source: TaskSource, quantize: bool) -> bytes:
  """The TFLite flatbuffer of `source` at its max_seq_length (int8 weights if `quantize`)."""
  fn = portable.ids_function(source, source.max_seq_length)
  converter = tf.lite.TFLiteConverter.from_concrete_functions(
      [fn.get_concrete_function()], source.model)
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]  # no Flex delegate
  if quantize:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]  # no dataset: dynamic range
  try:
    return converter.convert()
  except Exception as exc:  # the converter raises ConverterError and others, one line each
    raise RuntimeFailure(f"the TFLite converter failed: {tf_error_line(exc)}") from None


def export(source: TaskSource, export_dir: str) -> str:
  """Writes both models, the tokenizer files and export.json into `export_dir`, all or
  nothing."""

  def write(tmp: str) -> None:
    for name, quantize in ((FLOAT_NAME, False), (INT8_NAME, True)):
      with fileio.open(os.path.join(tmp, name), "wb") as f:
        f.write(convert(source, quantize))
    portable.write_beside(source, tmp, portable.metadata(
        source, "tflite", models={"float32": FLOAT_NAME, "int8": INT8_NAME},
        signature="serving_default"))

  return atomic.write_dir(export_dir, write, portable.METADATA_NAME)
