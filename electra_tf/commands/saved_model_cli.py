"""electra-saved-model-cli: TensorFlow's saved_model_cli with the tf.text ops registered, for
our text signatures.

  electra-saved-model-cli show --all --dir serving/squad/1
  electra-saved-model-cli run --dir serving/squad/1 --tag_set serve \
      --signature_def answer --input_exprs "question=['Who?'];context=['Ann wrote it.']"

Without installing: python -m electra_tf.commands.saved_model_cli.

Plain `saved_model_cli show` works on our exports; `run` must load every function of the
model, and the text signatures use tf.text ops that only exist once tensorflow_text is
imported (TF Serving's model server ships them built in).
"""

import os
import sys


def run():
  """The console script."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  import tensorflow_text  # noqa: F401  (registers the ops)
  from tensorflow.python.tools.saved_model_cli import main

  sys.argv[0] = "saved_model_cli"
  sys.exit(main())


if __name__ == "__main__":
  run()
