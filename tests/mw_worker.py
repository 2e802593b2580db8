"""One localhost worker of the multi-worker test: trains a few steps, saves its final weights.

Usage (TF_CONFIG set by the test):
  python tests/mw_worker.py DATA_DIR MODEL_DIR OUT.npz [GRADIENT_ACCUMULATION_STEPS]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(data_dir: str, model_dir: str, out: str, accumulation: str = "1") -> None:
  import numpy as np

  from electra_tf import presets
  from electra_tf.data import manifest, vocab
  from electra_tf.training import pretraining
  from electra_tf.training import strategy as strategy_lib

  strategy = strategy_lib.make_strategy("multi_worker_mirrored")
  config = presets.get("tiny").replace(num_train_steps=6, steps_per_execution=2,
                                       checkpoint_steps=3, log_steps=3, batch_size=8,
                                       gradient_accumulation_steps=int(accumulation))
  data = pretraining.TrainData(manifest.read_manifest(data_dir).shard_paths,
                               vocab.load_vocab(vocab.builtin_vocab_path()))
  result = pretraining.run_pretraining(config, data, model_dir, strategy)
  np.savez(out, *result.model.get_weights())


if __name__ == "__main__":
  main(*sys.argv[1:5])
