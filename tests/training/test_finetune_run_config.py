"""finetune.py's resume check on <output_dir>/finetune.json (training/finetuning.py)."""

import json

import pytest

from electra_tf.config import EncoderConfig, FinetuneConfig
from electra_tf.errors import UserError
from electra_tf.filenames import FINETUNE_RECORD as RUN_CONFIG
from electra_tf.training.finetuning import _check_run_config

ENC = EncoderConfig(vocab_size=20, hidden_size=16, num_layers=2, num_heads=2,
                    intermediate_size=32, embedding_size=8, max_position_embeddings=32)


def _record(**finetune):
  return {"task": "squad_v1.1", "encoder": ENC.to_dict(),
          "finetune": FinetuneConfig(**finetune).to_dict()}


def test_a_run_recorded_before_a_field_existed_resumes_with_its_default(tmp_path):
  old = _record()
  del old["finetune"]["head_initializer"]  # as written before the field was added
  (tmp_path / RUN_CONFIG).write_text(json.dumps(old))
  _check_run_config(str(tmp_path), _record())
  with pytest.raises(UserError, match="finetune.head_initializer: 'truncated_normal' -> 'normal'"):
    _check_run_config(str(tmp_path), _record(head_initializer="normal"))


def test_other_settings_are_refused_with_the_field_named(tmp_path):
  (tmp_path / RUN_CONFIG).write_text(json.dumps(_record(learning_rate=1e-4)))
  with pytest.raises(UserError, match=r"finetune.learning_rate: 0.0001 -> 5e-05"):
    _check_run_config(str(tmp_path), _record(learning_rate=5e-5))
