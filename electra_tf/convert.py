r"""Convert checkpoints: authors' TF1 or Hugging Face -> ours, and anything -> Hugging Face.

  python -m electra_tf.convert --from=tf1 --input=electra_small/model.ckpt-1000000 \
      --output=ckpt/small
  python -m electra_tf.convert --from=hf --input=path/to/hf_electra_discriminator \
      --generator_input=path/to/hf_electra_generator --output=ckpt/base
  python -m electra_tf.convert --from=hf --input=path/to/hf_bert_model --output=ckpt/bert
  python -m electra_tf.convert --to=hf --input=runs/small --output=hf_out/

The Python API is re-exported here: `electra_tf.convert.load(path)` returns the derived
config and the built networks (see electra_tf.export.convert).
"""

from __future__ import annotations

import os

from absl import app, flags, logging

from electra_tf import cli  # stdlib only: --help stays fast

_API = ("load", "load_source", "save", "restore_into", "export_hf", "read_source", "Loaded",
        "RestoreReport")
_KINDS = {"tf1": ("tf1",), "hf": ("hf",),
          "electra_tf": ("converted", "model_dir", "discriminator_export")}

FLAGS = flags.FLAGS
flags.DEFINE_enum("from", None, list(_KINDS),
                  "Import --input, which must be of this kind, into our format at --output.")
flags.DEFINE_enum("to", None, ["hf"], "Export --input (any readable checkpoint) to Hugging "
                  "Face folders --output/discriminator and --output/generator.")
flags.DEFINE_string("input", None, "Checkpoint: HF folder, TF1 prefix or folder, converted "
                    "folder, pretraining model_dir or discriminator export.")
flags.DEFINE_string("generator_input", None, "HF ElectraForMaskedLM folder paired with an HF "
                    "discriminator --input (the hub publishes them separately).")
flags.DEFINE_string("output", None, "Folder to create (written atomically).")
flags.DEFINE_integer("num_heads", None, "Discriminator attention heads, for TF1 checkpoints "
                     "(they do not record it). Default: a config.json beside the checkpoint, "
                     "else max(1, hidden // 64), the authors' rule.")
flags.DEFINE_bool("overwrite", False, "Replace an existing --output.")


def __getattr__(name: str):
  """Lazy re-export of the API, so that `--help` does not wait for TensorFlow."""
  if name in _API:
    from electra_tf.export import convert

    return getattr(convert, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def run(direction_from: str | None, direction_to: str | None, input_path: str | None,
        output: str | None, generator_input: str | None = None, num_heads: int | None = None,
        overwrite: bool = False) -> str:
  """The CLI's work; returns the line to print. Raises UserError on bad input."""
  from electra_tf.errors import UserError

  if bool(direction_from) == bool(direction_to):
    raise UserError("give exactly one of --from=tf1|hf|electra_tf (import) or --to=hf (export)")
  if not input_path or not output:
    raise UserError("--input and --output are required")
  if num_heads is not None and num_heads < 1:
    raise UserError(f"--num_heads must be positive, got {num_heads}")
  cli.check_output_dir(output, "--output")  # before minutes of reading a checkpoint
  from electra_tf.export import convert

  source = convert.read_source(input_path, num_heads=num_heads, generator_path=generator_input)
  if direction_from and source.kind not in _KINDS[direction_from]:
    found = next(k for k, kinds in _KINDS.items() if source.kind in kinds)
    raise UserError(f"{input_path} is a {found} checkpoint, not {direction_from}; "
                    f"use --from={found}")
  loaded = convert.load_source(source)
  if direction_to:
    path = convert.export_hf(loaded, output, overwrite=overwrite)
  else:
    path = convert.save(loaded, output, overwrite=overwrite)
  nets = " + ".join(n for n, m in (("discriminator", loaded.discriminator),
                                   ("generator", loaded.generator)) if m is not None)
  return f"wrote {path} ({nets}); {loaded.report.summary()}"


def main(argv):
  del argv  # cli.flags_parser refuses arguments that are not flags
  logging.set_verbosity(logging.WARNING)  # TF's checkpoint INFO lines are noise here
  with cli.one_line_errors():
    print(run(FLAGS["from"].value, FLAGS.to, FLAGS.input, FLAGS.output, FLAGS.generator_input,
              FLAGS.num_heads, FLAGS.overwrite))


if __name__ == "__main__":
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # our error line should be all of stderr
  app.run(main, flags_parser=cli.flags_parser(FLAGS))
