r"""electra-export: deployable artifacts; a SavedModel that TF Serving loads (a new integer
version under --export_dir).

  electra-export --checkpoint=runs/squad --export_dir=serving/squad
  electra-export --checkpoint=runs/small --task=pretraining --export_dir=serving/rtd

Without installing: python -m electra_tf.commands.export.
"""

from __future__ import annotations

import os

from absl import flags, logging

from electra_tf import cli  # stdlib only: --help stays fast

FLAGS = flags.FLAGS
flags.DEFINE_string("checkpoint", None, "A finetune.py --output_dir (its best/ model) or a "
                    "best/ directory; for --task=pretraining, anything electra-convert reads (a "
                    "pretraining model_dir, HF folder, TF1 ckpt).")
flags.DEFINE_string("task", None, "pretraining, or the fine-tuned task to check against the "
                    "checkpoint (default: the checkpoint's own task).")
flags.DEFINE_string("export_dir", None, "Model base path; version N+1 is written inside.")


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  from electra_tf.errors import UserError

  with cli.one_line_errors():
    if not FLAGS.checkpoint or not FLAGS.export_dir:
      raise UserError("--checkpoint and --export_dir are required")
    if not os.path.exists(FLAGS.checkpoint):
      raise UserError(f"--checkpoint {FLAGS.checkpoint} does not exist")
    cli.check_output_dir(FLAGS.export_dir, "--export_dir")
    from electra_tf.serving import saved_model

    path = saved_model.export(FLAGS.checkpoint, FLAGS.task, FLAGS.export_dir)
    print(f"exported {path}")
    print(saved_model.describe(path))


def run():
  """The console script."""
  cli.run_command(main, __name__)


if __name__ == "__main__":
  run()
