"""TensorFlow's saved_model_cli with the tf.text ops registered, for our text signatures.

  python -m electra_tf.export.saved_model_cli show --all --dir serving/squad/1
  python -m electra_tf.export.saved_model_cli run --dir serving/squad/1 --tag_set serve \
      --signature_def answer --input_exprs "question=['Who?'];context=['Ann wrote it.']"

Plain `saved_model_cli show` works on our exports; `run` must load every function of the
model, and the text signatures use tf.text ops that only exist once tensorflow_text is
imported (TF Serving's model server ships them built in).
"""

import os
import sys

if __name__ == "__main__":
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  import tensorflow_text  # noqa: F401  (registers the ops)
  from tensorflow.python.tools.saved_model_cli import main

  sys.argv[0] = "saved_model_cli"
  sys.exit(main())
