r"""electra-export: deployable artifacts. By default a SavedModel that TF Serving loads (a new
integer version under --export_dir); --format picks another consumer (docs/exports.md).

  electra-export --checkpoint=runs/squad --export_dir=serving/squad
  electra-export --checkpoint=runs/small --task=pretraining --export_dir=serving/rtd
  electra-export --format=tfhub --checkpoint=runs/small --export_dir=hub/small
  electra-export --format=onnx --checkpoint=runs/sst2 --export_dir=onnx/sst2
  electra-export --format=tflite --checkpoint=runs/sst2 --export_dir=tflite/sst2
  electra-export --format=keras_hub --checkpoint=runs/small --export_dir=presets/small

Without installing: python -m electra_tf.commands.export.
"""

from __future__ import annotations

from absl import flags, logging

from electra_tf import cli, fileio  # stdlib only: --help stays fast

FLAGS = flags.FLAGS
flags.DEFINE_string("checkpoint", None, "A finetune.py --output_dir (its best/ model) or a "
                    "best/ directory; for --task=pretraining and the encoder formats, anything "
                    "electra-convert reads (a pretraining model_dir, HF folder, TF1 ckpt).")
flags.DEFINE_string("task", None, "pretraining, or the fine-tuned task to check against the "
                    "checkpoint (default: the checkpoint's own task); with --format=onnx, "
                    "'encoder' exports the encoder of a fine-tuning run instead of its task model.")
flags.DEFINE_string("export_dir", None, "saved_model: the model base path (version N+1 is "
                    "written inside); other formats: the directory to write.")
flags.DEFINE_string("format", "saved_model", "saved_model, tfhub, onnx, tflite or keras_hub.")
flags.DEFINE_list("length_buckets", [], "saved_model: pad each raw-text batch to the "
                  "smallest of these lengths that holds its longest sequence (max_seq_length "
                  "is always one) instead of to that sequence's own length, e.g. 32,64,128; "
                  "docs/serving.md, 'Performance'.")
flags.DEFINE_enum("serving_dtype", "float32", ["float32", "bfloat16"], "saved_model: "
                  "bfloat16 multiplies by bfloat16 copies of the transformer kernels (for CPUs "
                  "with AMX or AVX512-BF16; accuracy: docs/benchmarks.md).")
flags.DEFINE_bool("jit_compile", False, "saved_model: run the model XLA-compiled (TF Serving "
                  "needs --xla_cpu_compilation_enabled=true; every new input shape compiles "
                  "once, so use it with --length_buckets).")
flags.DEFINE_bool("overwrite", False, "Replace an existing --export_dir (formats other than "
                  "saved_model, whose versions are never replaced).")


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  from electra_tf.errors import UserError
  from electra_tf.serving import formats

  with cli.one_line_errors():
    fmt = formats.get(FLAGS.format)
    if not FLAGS.checkpoint or not FLAGS.export_dir:
      raise UserError("--checkpoint and --export_dir are required")
    fileio.check_path(FLAGS.checkpoint, "--checkpoint")
    if not fileio.exists(FLAGS.checkpoint):
      raise UserError(f"--checkpoint {FLAGS.checkpoint} does not exist")
    cli.check_output_dir(FLAGS.export_dir, "--export_dir")
    if fmt.name == "saved_model":
      from electra_tf.serving import saved_model
      from electra_tf.serving.signatures import ServingOptions

      try:
        buckets = tuple(int(b) for b in FLAGS.length_buckets)
      except ValueError:
        raise UserError(f"--length_buckets={','.join(FLAGS.length_buckets)} must be "
                        "comma-separated integers, e.g. 32,64,128") from None
      options = ServingOptions(length_buckets=buckets, dtype=FLAGS.serving_dtype,
                               jit_compile=FLAGS.jit_compile)
      path = saved_model.export(FLAGS.checkpoint, FLAGS.task, FLAGS.export_dir, options)
      print(f"exported {path}")
      print(saved_model.describe(path))
      return
    if FLAGS.length_buckets or FLAGS.serving_dtype != "float32" or FLAGS.jit_compile:
      raise UserError("--length_buckets, --serving_dtype and --jit_compile are for "
                      "--format=saved_model")
    formats.check_new_dir(FLAGS.export_dir, FLAGS.overwrite)
    from electra_tf.serving import exporters

    print(exporters.export(fmt.name, FLAGS.checkpoint, FLAGS.task, FLAGS.export_dir))


def run():
  """The console script."""
  cli.run_command(main, __name__)


if __name__ == "__main__":
  run()
