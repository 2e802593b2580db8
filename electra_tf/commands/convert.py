r"""electra-convert: checkpoint formats in both directions (authors' TF1, Hugging Face, ours).

  electra-convert --from=tf1 --input=electra_small/model.ckpt-1000000 --output=ckpt/small
  electra-convert --from=hf --input=path/to/hf_electra_discriminator \
      --generator_input=path/to/hf_electra_generator --output=ckpt/base
  electra-convert --from=hf --input=path/to/hf_bert_model --output=ckpt/bert
  electra-convert --to=hf --input=runs/small --output=hf_out/
  electra-convert --to=tf1 --input=runs/small --output=tf1_out/

Without installing: python -m electra_tf.commands.convert. The Python API is
electra_tf.checkpoints.converter (`load(path)` returns the derived config and the built
networks).
"""

from __future__ import annotations

from absl import flags, logging

from electra_tf import cli  # stdlib only: --help stays fast
from electra_tf.checkpoints import EXPORT_KINDS, IMPORT_KINDS  # stdlib only

FLAGS = flags.FLAGS
flags.DEFINE_enum("from", None, list(IMPORT_KINDS),
                  "Import --input, which must be of this kind, into our format at --output.")
flags.DEFINE_enum("to", None, list(EXPORT_KINDS), "Export --input (any readable checkpoint): "
                  "hf writes Hugging Face folders --output/discriminator and "
                  "--output/generator; tf1 writes the authors' TF1 checkpoint layout "
                  "(model.ckpt, checkpoint, bert_config.json, vocab.txt) in --output.")
flags.DEFINE_string("input", None, "Checkpoint: HF folder, TF1 prefix or folder, converted "
                    "folder, pretraining model_dir or discriminator export.")
flags.DEFINE_string("generator_input", None, "HF ElectraForMaskedLM folder paired with an HF "
                    "discriminator --input (the hub publishes them separately).")
flags.DEFINE_string("output", None, "Folder to create (written atomically).")
flags.DEFINE_integer("num_heads", None, "Discriminator attention heads, for TF1 checkpoints "
                     "(they do not record it). Default: a config.json beside the checkpoint, "
                     "else max(1, hidden // 64), the authors' rule.")
flags.DEFINE_bool("overwrite", False, "Replace an existing --output.")


def main(argv):
  del argv  # cli.flags_parser refuses arguments that are not flags
  logging.set_verbosity(logging.WARNING)  # TF's checkpoint INFO lines are noise here
  with cli.one_line_errors():
    from electra_tf.checkpoints import converter

    print(converter.convert(FLAGS["from"].value, FLAGS.to, FLAGS.input, FLAGS.output,
                            FLAGS.generator_input, FLAGS.num_heads, FLAGS.overwrite))


def run():
  """The console script."""
  cli.run_command(main, __name__)


if __name__ == "__main__":
  run()
