"""The names of what the commands write to disk, each defined once.

A pretraining model_dir:        config.json, checkpoints/ckpt-<step>.*, discriminator/, train/,
                                eval/, data/ and eval_data/ (when built from text; a later
                                phase at another length adds data_<length>/)
A discriminator export:         config.json ({"encoder": ...}), ckpt.*, vocab.txt
A converted checkpoint folder:  config.json ({"pretrain": ...}), ckpt.*, vocab.txt
A fine-tuning output_dir:       finetune.json, checkpoints/, best/, eval_results.json, train/, eval/
A fine-tuned model (best/):     finetune.json, ckpt.*, vocab.txt, the best epoch's predictions
A pretraining data dir:         manifest.json and its shards; held_out/, a data dir of its
                                own, when built with a held-out split
A TF1 export (authors' layout): checkpoint, model.ckpt.*, bert_config.json,
                                generator_config.json (with a generator), vocab.txt

Runs and checkpoints written by earlier versions use the same names: changing one breaks
resuming, converting and exporting them.
"""

CONFIG_NAME = "config.json"  # resolved config of a run, converted folder or export
CKPT_NAME = "ckpt"  # checkpoint prefix of a converted folder, export or fine-tuned model
VOCAB_NAME = "vocab.txt"  # the WordPiece vocab copied beside weights
CHECKPOINT_SUBDIR = "checkpoints"  # numbered training checkpoints (pretraining, fine-tuning)
DISCRIMINATOR_SUBDIR = "discriminator"  # the encoder a pretraining run exports for fine-tuning
TRAIN_LOGS = "train"  # TensorBoard scalars of training
EVAL_LOGS = "eval"  # TensorBoard scalars of evaluation
DATA_SUBDIR = "data"  # pretraining data built from --text_files inside model_dir
EVAL_DATA_SUBDIR = "eval_data"  # held-out data built from the built-in corpus's dev articles
FINETUNE_RECORD = "finetune.json"  # task, encoder and fine-tuning configs of a run
BEST_SUBDIR = "best"  # the best epoch's fine-tuned model
RESULTS_NAME = "eval_results.json"  # every epoch's scores and the best
MANIFEST_NAME = "manifest.json"  # what a pretraining data dir holds and how it was built
HELD_OUT_SUBDIR = "held_out"  # the documents a data build set aside for evaluation
TF1_CKPT_NAME = "model.ckpt"  # name-based checkpoint prefix of a TF1 export
TF1_STATE_NAME = "checkpoint"  # the state file tf.train.latest_checkpoint reads
BERT_CONFIG_NAME = "bert_config.json"  # a TF1 checkpoint's (main) encoder, BERT's config keys
GENERATOR_CONFIG_NAME = "generator_config.json"  # a TF1 checkpoint's generator, the same keys
