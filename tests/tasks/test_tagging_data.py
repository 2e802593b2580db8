"""Tagging files: CoNLL columns and JSON lines read back as sentences, the scheme detected,
bad lines refused with their file and line, predictions written in the input's form."""

import json

import pytest

from electra_tf.tasks import tagging_data as data
from electra_tf.tasks.tables import DataFormatError

CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER


BRUSSELS NNP B-NP B-LOC
"""


def _write(tmp_path, name, text):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_conll_sentences_columns_and_line_numbers(tmp_path):
  path = _write(tmp_path, "train.conll", CONLL)
  sentences = data.read_conll(path)
  assert [s.words for s in sentences] == [("EU", "rejects", "German"),
                                          ("Peter", "Blackburn"), ("BRUSSELS",)]
  assert sentences[1].tags == ("B-PER", "I-PER") and sentences[1].lines == (7, 8)
  chunks = data.read_conll(path, tag_column=2)
  assert chunks[0].tags == ("B-NP", "B-VP", "B-NP")
  assert data.detect_scheme(sentences, path) == "iob2"
  assert data.label_list(sentences) == ("B-LOC", "B-MISC", "B-ORG", "B-PER", "I-PER", "O")


def test_schemes_are_detected(tmp_path):
  def scheme(*tag_rows):
    lines = "\n\n".join("\n".join(f"w{i} {t}" for i, t in enumerate(row)) for row in tag_rows)
    path = _write(tmp_path, "x.conll", lines + "\n")
    return data.detect_scheme(data.read_conll(path), path)

  assert scheme(["B-PER", "I-PER", "O"]) == "iob2"
  assert scheme(["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]) == "iob1"
  assert scheme(["B-PER", "E-PER", "S-LOC", "O"]) == "bioes"
  assert scheme(["NNP", "VBZ", "DT"]) == "none"
  with pytest.raises(DataFormatError, match=r"x.conll line 2: tag 'PER' has no"):
    scheme(["B-PER", "PER"])


@pytest.mark.parametrize("text,scheme,needles", [
    ("a B-PER\nb I-PER\n\nc O\nd I-LOC\n", "iob2", ["line 5", "'I-LOC' follows 'O'",
                                                    "--tag_scheme=iob1"]),
    ("a B-PER\nb S-LOC\n", "iob2", ["line 2", "'S-LOC' is not IOB2"]),
    ("a B-PER\nb X-LOC\n", "bioes", ["line 2", "'X-LOC' is not BIOES"]),
    ("a B-PER\nb I-PER\n\nc O\n", "bioes", ["line 2", "ends inside a chunk"]),
    ("a B-PER\nb O\n", "bioes", ["line 2", "closes with E-PER"]),
])
def test_tags_outside_the_scheme_name_file_and_line(tmp_path, text, scheme, needles):
  path = _write(tmp_path, "bad.conll", text)
  with pytest.raises(DataFormatError) as error:
    data.check_tags(data.read_conll(path), scheme, path)
  message = str(error.value)
  assert "bad.conll" in message and "\n" not in message
  for needle in needles:
    assert needle in message, message


def test_a_dev_tag_unknown_to_training_is_named(tmp_path):
  path = _write(tmp_path, "dev.conll", "a O\n\nb B-PER\nc B-ORG\n")
  with pytest.raises(DataFormatError, match=r"dev.conll line 4: tag 'B-ORG' is not among"):
    data.check_tags(data.read_conll(path), "iob2", path, labels=("O", "B-PER"))


@pytest.mark.parametrize("text,needle", [
    ("a NN B-NP\nb VB\n", "line 2 has 2 columns but the file's first line has 3"),
    ("a NN B-NP\nlonely\n", "line 2 has 1 column(s)"),
])
def test_wrong_column_counts(tmp_path, text, needle):
  path = _write(tmp_path, "cols.txt", text)
  with pytest.raises(DataFormatError) as error:
    data.read_tagging_file(path)
  assert needle in str(error.value) and "cols.txt" in str(error.value)


@pytest.mark.parametrize("row,needle", [
    ({"tokens": [], "tags": []}, "line 2 is a sentence with no tokens"),
    ({"tokens": ["a", "b"], "tags": ["O"]}, "line 2 has 2 tokens but 1 tags"),
    ({"tokens": ["a"], "tags": [1]}, "\"tags\" must be a list of strings"),
    ({"words": ["a"]}, "not an object with \"tokens\" and \"tags\""),
])
def test_bad_json_lines(tmp_path, row, needle):
  good = json.dumps({"tokens": ["Ann"], "tags": ["B-PER"]})
  path = _write(tmp_path, "bad.jsonl", good + "\n" + json.dumps(row) + "\n")
  with pytest.raises(DataFormatError, match="bad.jsonl") as error:
    data.read_tagging_file(path)
  assert needle in str(error.value)


def test_empty_and_non_utf8_files(tmp_path):
  with pytest.raises(DataFormatError, match="holds no sentences"):
    data.read_tagging_file(_write(tmp_path, "empty.conll", "\n\n-DOCSTART- O\n"))
  path = tmp_path / "latin1.conll"
  path.write_bytes("a O\ncaf\xe9 O\n".encode("latin-1"))
  with pytest.raises(DataFormatError, match="line 2 is not UTF-8"):
    data.read_tagging_file(str(path))


def test_predictions_are_written_in_the_input_form(tmp_path):
  conll = _write(tmp_path, "dev.conll", "Ann\tB-PER\nruns\tO\n\nBob NNP B-PER\n")
  sentences = data.read_conll(conll, same_columns=False)
  text = data.format_predictions(sentences, [["B-PER", "B-LOC"], ["O"]], jsonl=False)
  assert text == "Ann\tB-PER\tB-PER\nruns\tO\tB-LOC\n\nBob NNP B-PER O\n"
  rows = [{"tokens": ["Ann", "runs"], "tags": ["B-PER", "O"], "id": 7}]
  jsonl = _write(tmp_path, "dev.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
  text = data.format_predictions(data.read_jsonl(jsonl), [["B-PER", "O"]], jsonl=True)
  assert json.loads(text) == {**rows[0], "predicted_tags": ["B-PER", "O"]}
