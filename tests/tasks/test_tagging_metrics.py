"""Entity-level tagging metrics equal to seqeval's (the reference we did not write), in its
default (conlleval) and strict modes, on hand-built and on random predictions."""

import random

import pytest
from seqeval import metrics as seqeval_metrics
from seqeval import scheme as seqeval_scheme

from electra_tf.tasks.tagging_metrics import (
  default_entities,
  entity_scores,
  strict_entities,
  tagging_metrics,
  token_accuracy,
)

SEQEVAL_SCHEMES = {"iob1": seqeval_scheme.IOB1, "iob2": seqeval_scheme.IOB2,
                   "bioes": seqeval_scheme.IOBES}

# Hand-built cases: a chunk cut short, an I- after O, types switching inside a chunk, B- after
# B- of the same type, E-/S- in and out of place, a chunk running to the sentence end.
HAND_BUILT = {
    "iob2": (
        [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "I-LOC"], ["O", "B-ORG", "O"],
         ["B-MISC", "B-MISC", "I-MISC", "O", "B-PER"]],
        [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O"], ["O", "I-ORG", "O"],
         ["B-MISC", "I-MISC", "I-PER", "O", "B-PER"]],
    ),
    "iob1": (
        [["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "O"], ["I-ORG", "I-ORG", "I-MISC"]],
        [["I-PER", "I-PER", "O", "I-LOC", "I-LOC", "O"], ["B-ORG", "I-ORG", "I-MISC"]],
    ),
    "bioes": (
        [["B-PER", "E-PER", "O", "S-LOC", "O", "B-ORG", "I-ORG", "E-ORG"], ["S-MISC", "O"]],
        [["B-PER", "I-PER", "O", "S-LOC", "E-LOC", "B-ORG", "I-ORG", "E-ORG"], ["I-MISC", "O"]],
    ),
}


def _seqeval(true, predicted, mode, scheme):
  kwargs = {} if mode == "default" else {"mode": "strict", "scheme": SEQEVAL_SCHEMES[scheme]}
  return {name: getattr(seqeval_metrics, f"{name}_score")(true, predicted, **kwargs)
          for name in ("precision", "recall", "f1")}


def _random_sentences(rng, prefixes, n=40):
  types = ("PER", "LOC", "ORG")
  tags = ["O"] * 4 + [f"{p}-{t}" for p in prefixes for t in types]
  return [[rng.choice(tags) for _ in range(rng.randint(1, 9))] for _ in range(n)]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("scheme", sorted(HAND_BUILT))
@pytest.mark.parametrize("mode", ["default", "strict"])
def test_hand_built_scores_equal_seqeval(scheme, mode):
  true, predicted = HAND_BUILT[scheme]
  ours = entity_scores(true, predicted, mode, scheme)
  for name, value in _seqeval(true, predicted, mode, scheme).items():
    assert ours[name] == pytest.approx(value, abs=1e-12), (name, ours)
  if mode == "default":
    report = seqeval_metrics.classification_report(true, predicted, output_dict=True)
  else:
    report = seqeval_metrics.classification_report(
        true, predicted, output_dict=True, mode="strict", scheme=SEQEVAL_SCHEMES[scheme])
  for type_, values in ours["per_type"].items():
    assert values["f1"] == pytest.approx(report[type_]["f1-score"], abs=1e-12), type_
    assert values["support"] == report[type_]["support"]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("scheme,prefixes", [("iob2", "BI"), ("iob1", "BI"), ("bioes", "BIES")])
def test_random_predictions_equal_seqeval(scheme, prefixes):
  rng = random.Random(7)
  for _ in range(25):
    true = _random_sentences(rng, prefixes)
    predicted = [[rng.choice([t, "O", f"{rng.choice(prefixes)}-PER"]) for t in s] for s in true]
    for mode in ("default", "strict"):
      ours = entity_scores(true, predicted, mode, scheme)
      for name, value in _seqeval(true, predicted, mode, scheme).items():
        assert ours[name] == pytest.approx(value, abs=1e-12), (mode, name)


def test_entities_read_as_the_schemes_say():
  assert default_entities([["O", "I-PER", "I-PER", "B-PER"]]) == [("PER", 1, 2), ("PER", 3, 3)]
  # Strict IOB2: an I- after O opens no chunk; strict BIOES needs the closing E-.
  assert strict_entities(["O", "I-PER", "I-PER", "B-PER"], "iob2") == [("PER", 3, 4)]
  assert strict_entities(["B-LOC", "I-LOC"], "bioes") == []
  assert strict_entities(["B-LOC", "E-LOC", "S-PER"], "bioes") == [("LOC", 0, 2),
                                                                   ("PER", 2, 3)]
  with pytest.raises(ValueError, match="not IOB2"):
    strict_entities(["S-PER"], "iob2")


def test_nothing_to_find_scores_zero_and_token_accuracy():
  assert entity_scores([["O", "O"]], [["O", "O"]])["f1"] == 0.0
  assert token_accuracy([["NN", "VB"], ["DT"]], [["NN", "NN"], ["DT"]]) == pytest.approx(2 / 3)
  scores = tagging_metrics([["B-PER", "I-PER", "O"]], [["B-PER", "I-PER", "B-LOC"]], "iob2")
  assert scores["f1"] == pytest.approx(2 / 3) and scores["f1_PER"] == 1.0
  assert scores["f1_LOC"] == 0.0 and scores["strict_f1"] == pytest.approx(2 / 3)
  assert set(tagging_metrics([["NN"]], [["NN"]], "none")) == {"accuracy"}
  with pytest.raises(ValueError, match="differ in length"):
    entity_scores([["O"]], [["O", "O"]])
