"""Toy corpora for the data tests: each document draws from its own words "w<n>"."""

from __future__ import annotations

import random

WORDS_PER_DOCUMENT = 50
NUM_DOCUMENTS = 40


def doc_word(document: int, k: int) -> str:
  """Word k of document `document`: each document draws from its own id range."""
  return f"w{document * WORDS_PER_DOCUMENT + k}"


def write_corpus(path: str, num_documents: int = NUM_DOCUMENTS, seed: int = 0,
                 sentences: tuple[int, int] = (3, 30), words: tuple[int, int] = (2, 25)) -> None:
  """One sentence a line, a blank line between documents; document d uses only its words."""
  rng = random.Random(seed)
  documents = []
  for d in range(num_documents):
    lines = []
    for _ in range(rng.randint(*sentences)):
      lines.append(" ".join(doc_word(d, rng.randrange(WORDS_PER_DOCUMENT))
                            for _ in range(rng.randint(*words))))
    documents.append("\n".join(lines))
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n\n".join(documents) + "\n")
