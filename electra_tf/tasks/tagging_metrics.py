"""Sequence-labelling metrics as seqeval computes them: entity-level precision, recall and F1
in its default (conlleval) and strict modes, per entity type, and token accuracy.

The default mode reads chunks as the CoNLL shared tasks' conlleval script does, whatever the
scheme (an I- after O opens a chunk). The strict mode reads them by the rules of one scheme
(IOB1, IOB2, BIOES) and drops chunks that break them (an IOB2 I- after O is no chunk).
tests/tasks/test_tagging_metrics.py holds both equal to the seqeval package.
"""

from __future__ import annotations

from collections.abc import Sequence

OUTSIDE = "O"
SCHEMES = ("iob1", "iob2", "bioes")

# Strict mode: (previous prefixes, current prefixes, type condition) patterns per scheme, as
# seqeval.scheme writes them. "*" is any prefix; conditions: "any", "same" or "diff" type.
_ANY = "IOBES"
_PATTERNS = {
    "iob1": {
        "start": (("O", "I", "any"), ("I", "I", "diff"), ("B", "I", "any"), ("I", "B", "same"),
                  ("B", "B", "same")),
        "inside": (("B", "I", "same"), ("I", "I", "same")),
        "end": (("I", "I", "diff"), ("I", "O", "any"), ("I", "B", "any"), ("B", "O", "any"),
                ("B", "I", "diff"), ("B", "B", "same")),
    },
    "iob2": {
        "start": ((_ANY, "B", "any"),),
        "inside": (("B", "I", "same"), ("I", "I", "same")),
        "end": (("I", "O", "any"), ("I", "I", "diff"), ("I", "B", "any"), ("B", "O", "any"),
                ("B", "I", "diff"), ("B", "B", "any")),
    },
    "bioes": {
        "start": ((_ANY, "B", "any"), (_ANY, "S", "any")),
        "inside": (("B", "I", "same"), ("B", "E", "same"), ("I", "I", "same"),
                   ("I", "E", "same")),
        "end": (("S", _ANY, "any"), ("E", _ANY, "any")),
    },
}
ALLOWED_PREFIXES = {"iob1": "IOB", "iob2": "IOB", "bioes": "IOBES"}


def _matches(prev: tuple[str, str], cur: tuple[str, str], patterns) -> bool:
  for prev_prefixes, cur_prefixes, condition in patterns:
    if prev[0] in prev_prefixes and cur[0] in cur_prefixes and (
        condition == "any" or (condition == "same") == (prev[1] == cur[1])):
      return True
  return False


def _strict_token(tag: str) -> tuple[str, str]:
  return tag[0], tag[1:].strip("-") or "_"


def strict_entities(tags: Sequence[str], scheme: str) -> list[tuple[str, int, int]]:
  """(type, start, end exclusive) chunks of one sentence read strictly by `scheme`.

  Raises:
    ValueError: a tag whose prefix the scheme does not allow.
  """
  patterns = _PATTERNS[scheme]
  tokens = [_strict_token(t) for t in tags] + [(OUTSIDE, "_")]
  for tag, (prefix, _) in zip(tags, tokens):
    if prefix not in ALLOWED_PREFIXES[scheme]:
      raise ValueError(f"tag {tag!r} is not {scheme.upper()}")
  entities, i, prev = [], 0, tokens[-1]
  while i < len(tokens):
    token = tokens[i]
    if _matches(prev, token, patterns["start"]):
      end, inner = i + 1, token
      while end < len(tokens) and _matches(inner, tokens[end], patterns["inside"]):
        inner, end = tokens[end], end + 1
      if _matches(tokens[end - 1], tokens[end], patterns["end"]):
        entities.append((token[1], i, end))
      i = end
    else:
      i += 1
    prev = tokens[i - 1]
  return entities


def _ends(prev_tag, tag, prev_type, type_) -> bool:
  if prev_tag in "ES" or (prev_tag in "BI" and tag in "BSO"):
    return True
  return prev_tag not in (OUTSIDE, ".") and prev_type != type_


def _starts(prev_tag, tag, prev_type, type_) -> bool:
  if tag in "BS" or (prev_tag in "ESO" and tag in "EI"):
    return True
  return tag not in (OUTSIDE, ".") and prev_type != type_


def default_entities(sentences: Sequence[Sequence[str]]) -> list[tuple[str, int, int]]:
  """(type, start, end inclusive) chunks, conlleval style, over the sentences joined with an
  O between them (offsets run through all sentences, as seqeval's get_entities)."""
  flat = [tag for sentence in sentences for tag in (*sentence, OUTSIDE)]
  chunks, prev_tag, prev_type, begin = [], OUTSIDE, "", 0
  for i, chunk in enumerate(flat + [OUTSIDE]):
    tag, type_ = chunk[0], chunk[1:].split("-", maxsplit=1)[-1] or "_"
    if _ends(prev_tag, tag, prev_type, type_):
      chunks.append((prev_type, begin, i - 1))
    if _starts(prev_tag, tag, prev_type, type_):
      begin = i
    prev_tag, prev_type = tag, type_
  return chunks


def _divide(numerator: float, denominator: float) -> float:
  return numerator / denominator if denominator else 0.0


def _prf(tp: int, predicted: int, true: int) -> dict[str, float]:
  precision, recall = _divide(tp, predicted), _divide(tp, true)
  return {"precision": precision, "recall": recall,
          "f1": _divide(2 * precision * recall, precision + recall)}


def entity_scores(true: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
                  mode: str = "default", scheme: str | None = None) -> dict:
  """Micro precision/recall/F1 over entities and the same per type (with its support).

  Args:
    true, predicted: tag strings per sentence, the same lengths.
    mode: "default" (conlleval) or "strict" (needs `scheme`).
    scheme: one of SCHEMES for the strict mode.

  Returns:
    {"precision", "recall", "f1": float, "per_type": {type: {"precision", "recall", "f1",
    "support"}}}; 0 where a ratio is undefined (seqeval's zero_division default).
  """
  if len(true) != len(predicted) or any(len(a) != len(b) for a, b in zip(true, predicted)):
    raise ValueError("true and predicted tags differ in length")
  if mode == "default":
    sets = [set(default_entities(s)) for s in (true, predicted)]
  elif mode == "strict":
    if scheme not in SCHEMES:
      raise ValueError(f"the strict mode needs a scheme in {SCHEMES}, got {scheme!r}")
    sets = [{(t, n, a, b) for n, s in enumerate(seqs) for t, a, b in strict_entities(s, scheme)}
            for seqs in (true, predicted)]
  else:
    raise ValueError(f"unknown mode {mode!r}; use default or strict")
  gold, guess = sets
  per_type, totals = {}, [0, 0, 0]
  for type_ in sorted({e[0] for e in gold | guess}):
    g = {e for e in gold if e[0] == type_}
    p = {e for e in guess if e[0] == type_}
    counts = (len(g & p), len(p), len(g))
    per_type[type_] = {**_prf(*counts), "support": len(g)}
    totals = [a + b for a, b in zip(totals, counts)]
  return {**_prf(*totals), "per_type": per_type}


def token_accuracy(true: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> float:
  """Share of words whose predicted tag equals the true one (POS tagging's metric)."""
  pairs = [(a, b) for s, t in zip(true, predicted) for a, b in zip(s, t)]
  return _divide(sum(a == b for a, b in pairs), len(pairs))


def tagging_metrics(true: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
                    scheme: str | None) -> dict[str, float]:
  """The flat numbers of eval_results.json: accuracy, and for a chunk scheme the entity
  precision/recall/F1 (default mode), strict_f1 and f1_<TYPE> per entity type."""
  scores = {"accuracy": token_accuracy(true, predicted)}
  if scheme in SCHEMES:
    default = entity_scores(true, predicted, "default")
    scores.update({k: default[k] for k in ("precision", "recall", "f1")})
    scores["strict_f1"] = entity_scores(true, predicted, "strict", scheme)["f1"]
    for type_, values in default["per_type"].items():
      scores[f"f1_{type_}"] = values["f1"]
  return scores
