"""The floor for the movie-review sentiment task: TF-IDF (word 1-2 grams) + logistic
regression on the same train/dev split finetune.py uses (--task=movie_reviews).

  python bench/finetune/tfidf_baseline.py [--max_train_examples=4000]

Needs scikit-learn (installed with tf-models-official). Prints accuracy and a JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--max_train_examples", type=int, default=None)
  args = parser.parse_args()
  from sklearn.feature_extraction.text import TfidfVectorizer
  from sklearn.linear_model import LogisticRegression

  from electra_tf.tasks.classification_data import movie_reviews

  _, train, dev = movie_reviews(seed=0)
  train = train[:args.max_train_examples]
  vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=1, sublinear_tf=True)
  x_train = vectorizer.fit_transform([e.texts[0] for e in train])
  model = LogisticRegression(max_iter=2000, C=4.0)
  model.fit(x_train, [e.label for e in train])
  predicted = model.predict(vectorizer.transform([e.texts[0] for e in dev]))
  accuracy = 100.0 * float(np.mean(predicted == np.array([e.label for e in dev])))
  print(f"TF-IDF + logistic regression: accuracy {accuracy:.2f} on {len(dev)} dev sentences "
        f"({len(train)} train)")
  print(json.dumps({"impl": "tfidf_logreg", "task": "movie_reviews", "accuracy": accuracy,
                    "train_examples": len(train), "eval_examples": len(dev)}))


if __name__ == "__main__":
  main()
