"""electra-export's formats besides TF Serving's: the checkpoint each reads, what it writes."""

from __future__ import annotations

from electra_tf import fileio
from electra_tf.errors import UserError
from electra_tf.serving import sources


def _listing(path: str) -> str:
  files = sorted(fileio.join(d, f)[len(path):].lstrip("/")
                 for d, _, names in fileio.walk(path) for f in names)
  shown = [f for f in files if "variables" not in f][:12]
  return f"exported {path}: " + ", ".join(shown)


def export(fmt: str, checkpoint: str, task: str | None, export_dir: str) -> str:
  """Writes `checkpoint` as `fmt` into `export_dir` (all or nothing); returns a summary line."""
  if task == "pretraining":
    raise UserError(f"--task=pretraining is for the TF Serving SavedModel; --format={fmt} "
                    "exports an encoder or a task model")
  if fmt == "tfhub":
    from electra_tf.serving import tfhub

    tfhub.export(sources.load_encoder(checkpoint), export_dir)
  elif fmt == "onnx":
    from electra_tf.serving import onnx_export

    if task == "encoder" or (not task and sources.finetuned_dir(checkpoint) is None):
      onnx_export.export(sources.load_encoder(checkpoint), export_dir)
    else:
      onnx_export.export(sources.load_task(checkpoint, fmt, task), export_dir)
  elif fmt == "tflite":
    from electra_tf.serving import tflite_export

    tflite_export.export(sources.load_task(checkpoint, fmt, task), export_dir)
  elif fmt == "keras_hub":
    from electra_tf.serving import keras_hub_preset

    keras_hub_preset.export(sources.load_encoder(checkpoint), export_dir)
  else:
    raise UserError(f"unknown --format={fmt}")
  return _listing(export_dir)
