r"""Fine-tune a pretrained ELECTRA discriminator on SQuAD, sentence classification or tagging.

  python finetune.py --task=squad_v1.1 --init_checkpoint=ckpt/base \
      --train_file=train-v1.1.json --predict_file=dev-v1.1.json --output_dir=runs/squad
  python finetune.py --task=squad_v2.0 --init_checkpoint=... --train_file=train-v2.0.json \
      --predict_file=dev-v2.0.json --output_dir=runs/squad2
  python finetune.py --task=glue/sst2 --init_checkpoint=... --output_dir=runs/sst2   # TFDS
  python finetune.py --task=classification --train_file=train.tsv --dev_file=dev.tsv \
      --text_columns=sentence --label_column=label --output_dir=runs/mine
  python finetune.py --task=movie_reviews --init_checkpoint=... --output_dir=runs/reviews
  python finetune.py --task=tagging --train_file=train.conll --dev_file=dev.conll \
      --init_checkpoint=... --output_dir=runs/ner

SQuAD files default to the official v1.1 train/dev shipped in requirements-data.txt.
"""

from __future__ import annotations

from absl import flags, logging

from electra_tf import cli, fileio, presets  # stdlib only: --help stays fast
from electra_tf import config as config_lib
from electra_tf.commands import tokenizer_flags
from electra_tf.errors import UserError
from electra_tf.filenames import BEST_SUBDIR

# Modules that load TensorFlow are imported inside the functions that use them: --help and
# flag errors answer before TensorFlow starts.
FLAGS = flags.FLAGS

flags.DEFINE_enum("task", None, list(config_lib.FINETUNE_TASKS), "What to fine-tune on.")
flags.DEFINE_string("init_checkpoint", None,
                    "Pretrained weights: a pretrain.py model_dir or its discriminator/ export, "
                    "an electra-convert output, a Hugging Face ELECTRA/BERT folder "
                    "or an authors' TF1 checkpoint. Without it the encoder starts random "
                    "(sizes from --model_size).")
flags.DEFINE_string("model_size", "tiny", "Preset (demo, tiny, small, base, large) or preset file "
                    "for a random encoder (no --init_checkpoint).")
flags.DEFINE_string("output_dir", None, "Checkpoints, best model, predictions, eval results.")
flags.DEFINE_string("train_file", None,
                    "SQuAD train JSON, a .tsv/.csv/.jsonl file for --task=classification, or "
                    "CoNLL columns / .jsonl for --task=tagging.")
flags.DEFINE_string("predict_file", None, "SQuAD dev JSON scored after each epoch.")
flags.DEFINE_string("dev_file", None, "Classification or tagging dev file scored after each "
                    "epoch.")
flags.DEFINE_list("text_columns", None, "Classification: one column (sentence) or two (pair).")
flags.DEFINE_string("label_column", "label", "Classification: the label column.")
flags.DEFINE_bool("regression", False, "Classification: the label is a real number.")
flags.DEFINE_integer("tag_column", -1, "Tagging: the CoNLL column of the tags, 0-based from the "
                     "left or negative from the right (-1: the last); the token is column 0.")
flags.DEFINE_enum("tag_scheme", None, ["iob1", "iob2", "bioes", "none"],
                  "Tagging: the chunk scheme of the tags (default: detected from the training "
                  "file); none reads them as plain labels (part of speech).")
flags.DEFINE_string("tfds_data_dir", None, "TFDS data_dir for --task=glue/*.")
flags.DEFINE_string("vocab_file", None, "Default: the checkpoint's vocab, else bert-base-uncased.")
tokenizer_flags.define_flags()
flags.DEFINE_string("cache_dir", None, "SQuAD feature cache. Default: <output_dir>/cache.")
flags.DEFINE_integer("max_train_examples", None, "Use only the first N training questions "
                     "or examples (a fixed subset, for quick runs and benchmarks).")
flags.DEFINE_integer("max_eval_examples", None, "Score only the first N dev questions/examples.")
flags.DEFINE_enum("strategy", "one_device", list(config_lib.STRATEGIES), "tf.distribute strategy.")
flags.DEFINE_string("tpu", None, "TPU name or grpc://host:port for --strategy=tpu.")
flags.DEFINE_integer("cpu_devices", 0, "Split the host CPU into N logical devices.")
flags.DEFINE_string("export_dir", None, "After training, export the best model as a "
                    "versioned SavedModel here, as electra-export does.")

# Flags that map one-to-one onto FinetuneConfig fields (None: the default for the task/size).
_CONFIG_FLAGS = {
    "max_seq_length": ("integer", "Tokens per example (SQuAD 384, classification 128)."),
    "doc_stride": ("integer", "SQuAD, tagging: tokens between the starts of a long input's "
                   "windows (tagging: half the window by default)."),
    "max_query_length": ("integer", "SQuAD: questions are cut to this many tokens."),
    "learning_rate": ("float", "Peak LR (1e-4; 5e-5 for 24-layer models)."),
    "layerwise_lr_decay": ("float", "Layer-wise LR decay (0.8; 0.9 for 24-layer models)."),
    "authors_layer_decay": ("bool", "One more decay factor on every encoder layer, as the "
                            "authors' code (their top layer gets decay**2)."),
    "weight_decay": ("float", "AdamW weight decay (not on LayerNorm/biases)."),
    "adam_bias_correction": ("bool", "Adam's bias correction (off, as the authors; torch's "
                             "AdamW has it)."),
    "warmup_fraction": ("float", "Share of steps spent warming up (0.1)."),
    "num_train_epochs": ("float", "Epochs (3; SQuAD 2; RTE and STS-B 10)."),
    "batch_size": ("integer", "Global training batch (32)."),
    "eval_batch_size": ("integer", "Evaluation batch."),
    "seed": ("integer", "Seed for initialisation, dropout and data order."),
    "dropout_rate": ("float", "Encoder and classifier dropout (0.1)."),
    "joint_end_head": ("bool", "SQuAD: the authors' end head conditioned on the start."),
    "beam_size": ("integer", "SQuAD joint head: starts kept at inference."),
    "answerable_classifier": ("bool", "SQuAD 2.0: the answerability classifier (default on)."),
    "answerable_weight": ("float", "SQuAD 2.0: its loss weight (0.5)."),
    "n_best_size": ("integer", "SQuAD: candidates per question (20)."),
    "max_answer_length": ("integer", "SQuAD: longest answer in tokens (30)."),
    "precision": ("string", "float32, mixed_bfloat16 or mixed_float16."),
    "log_steps": ("integer", "Progress line and TensorBoard every N steps."),
    "head_initializer": ("string", "Task-head kernels: truncated_normal (the authors') or "
                         "normal (transformers'), with the encoder's initializer_range as "
                         "stddev."),
    "pooling": ("string", "Classification: what the head reads: cls, the [CLS] hidden state "
                "(the authors'), or mean, the last layer averaged over the real tokens."),
}
for _name, (_kind, _help) in _CONFIG_FLAGS.items():
  getattr(flags, f"DEFINE_{_kind}")(_name, None, _help)


def resolve_config(num_layers: int):
  """FinetuneConfig from the task's defaults, the model depth and the flags."""

  changes = {k: FLAGS[k].value for k in _CONFIG_FLAGS if FLAGS[k].value is not None}
  if FLAGS.task in config_lib.TAGGING_TASKS and "doc_stride" not in changes:
    # Tagging windows start half a window apart unless told otherwise.
    changes["doc_stride"] = max(1, (changes.get("max_seq_length", 128) - 2) // 2)
  return presets.finetune(FLAGS.task, num_layers).replace(**changes)


def check_early():
  """Refuses bad settings and unwritable outputs in a second, before TensorFlow loads."""

  for name in ("max_train_examples", "max_eval_examples"):
    if FLAGS[name].value is not None and FLAGS[name].value < 1:
      raise UserError(f"--{name} must be 1 or more, got {FLAGS[name].value}")
  resolve_config(num_layers=12)  # the values of the flags; the depth only moves defaults
  for name in ("output_dir", "export_dir", "cache_dir"):
    if FLAGS[name].value:
      cli.check_output_dir(FLAGS[name].value, f"--{name}")
  cli.check_input_paths({f"--{name}": FLAGS[name].value for name in (
      "init_checkpoint", "vocab_file", "train_file", "dev_file", "predict_file")})


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)

  with cli.one_line_errors():
    if not FLAGS.task:
      raise UserError("--task is required; one of " + ", ".join(config_lib.FINETUNE_TASKS))
    if not FLAGS.output_dir:
      raise UserError("--output_dir is required (checkpoints, predictions and results go there)")
    check_early()
    from electra_tf.tasks import runner

    runner.run_from_flags(FLAGS, resolve_config,
                          tokenizer_overrides=tokenizer_flags.given(FLAGS))
    if FLAGS.export_dir:
      from electra_tf.serving import saved_model

      path = saved_model.export_finetuned(fileio.join(FLAGS.output_dir, BEST_SUBDIR),
                                          FLAGS.export_dir)
      print(f"exported the SavedModel to {path}", flush=True)


def run():
  """The console script (and `python finetune.py` in a checkout)."""
  cli.run_command(main, __name__)


if __name__ == "__main__":
  run()
