r"""Export a SavedModel that TF Serving loads (a new integer version under --export_dir).

  python -m electra_tf.export --checkpoint=runs/squad --export_dir=serving/squad
  python -m electra_tf.export --checkpoint=runs/small --task=pretraining --export_dir=serving/rtd
"""

from __future__ import annotations

import os

from absl import app, flags, logging

from electra_tf import cli  # stdlib only: --help stays fast

FLAGS = flags.FLAGS
flags.DEFINE_string("checkpoint", None, "A finetune.py --output_dir (its best/ model) or a "
                    "best/ directory; for --task=pretraining, anything `python -m "
                    "electra_tf.convert` reads (a pretrain.py model_dir, HF folder, TF1 ckpt).")
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
    from electra_tf.export import saved_model

    path = saved_model.export(FLAGS.checkpoint, FLAGS.task, FLAGS.export_dir)
    print(f"exported {path}")
    print(saved_model.describe(path))


if __name__ == "__main__":
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  app.run(main, flags_parser=cli.flags_parser(FLAGS))
