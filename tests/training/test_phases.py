"""The phase record of a run (training/phases.py) and what a new phase may change."""

import dataclasses
import io
import json
import shutil
import types

import pytest

from electra_tf.config import PretrainConfig
from electra_tf.data.vocab import builtin_vocab_path, load_vocab
from electra_tf.errors import UserError
from electra_tf.training import artifacts, phases

PHASE_1 = PretrainConfig(max_seq_length=128, batch_size=8, num_train_steps=40)
PHASE_2 = PHASE_1.replace(max_seq_length=512, batch_size=4)  # max_predictions 19 -> 79
DATA = {"vocab_md5": "md5"}
# The built-in vocab under the md5 DATA names: phases.record copies it beside the run.
TRAIN_DATA = types.SimpleNamespace(
    vocab=dataclasses.replace(load_vocab(builtin_vocab_path()), md5="md5"),
    examples=None, tokens=None)


def _record(model_dir, config, step, new_phase=False, end_step=None):
  stream = io.StringIO()
  start = phases.record(str(model_dir), config, TRAIN_DATA, step,
                        phases.PhaseRequest(new_phase, end_step), write=True, stream=stream)
  return start, stream.getvalue()


def _saved_phases(model_dir):
  return json.loads((model_dir / "config.json").read_text())["phases"]


def test_phase_two_begins_at_the_restored_step_and_a_resume_stays_in_it(tmp_path):
  assert _record(tmp_path, PHASE_1, 0, end_step=12)[0] == 0
  start, out = _record(tmp_path, PHASE_2, 12, new_phase=True)
  assert start == 12
  assert "phase 2 of the run begins at step 12" in out
  assert "max_seq_length 128 -> 512, max_predictions_per_seq 19 -> 79, batch_size 8 -> 4" in out
  saved = json.loads((tmp_path / "config.json").read_text())
  assert saved["pretrain"]["max_seq_length"] == 512  # what a resume is checked against
  assert [(p["start_step"], p["max_seq_length"], p["end_step"]) for p in saved["phases"]] == [
      (0, 128, 12), (12, 512, None)]
  # Killed before phase 2's first checkpoint: its start is the restored step again.
  assert _record(tmp_path, PHASE_2, 12)[0] == 12
  # Killed later in phase 2: the stream keeps phase 2's origin.
  start, out = _record(tmp_path, PHASE_2, 20, new_phase=True)
  assert start == 12 and "phase 2 of the run, begun at step 12" in out
  assert len(_saved_phases(tmp_path)) == 2


def test_a_new_run_starts_a_new_record(tmp_path):
  _record(tmp_path, PHASE_1, 0, end_step=12)
  _record(tmp_path, PHASE_2, 12, new_phase=True)
  assert _record(tmp_path, PHASE_2, 0)[0] == 0  # no checkpoint: a run of its own
  assert [p["start_step"] for p in _saved_phases(tmp_path)] == [0]


def test_a_run_recorded_without_phases_is_one_phase_from_step_0(tmp_path):
  artifacts.save_or_check_run_config(str(tmp_path), PHASE_1, DATA)
  assert _record(tmp_path, PHASE_1, 30)[0] == 0
  assert _record(tmp_path, PHASE_2, 30, new_phase=True)[0] == 30


def test_a_new_phase_before_the_current_one_ended_is_refused(tmp_path):
  _record(tmp_path, PHASE_1, 0, end_step=12)
  with pytest.raises(UserError, match="ends at step 12 .* newest checkpoint is at step 8.*"
                                      "--phase_end_step=8"):
    _record(tmp_path, PHASE_2, 8, new_phase=True)


def test_a_checkpoint_older_than_the_phase_is_refused(tmp_path):
  _record(tmp_path, PHASE_1, 0, end_step=12)
  _record(tmp_path, PHASE_2, 12, new_phase=True)
  with pytest.raises(UserError, match="at step 8, before phase 2 began"):
    _record(tmp_path, PHASE_2, 8)


def test_only_the_phase_fields_may_change_and_only_with_new_phase(tmp_path):
  artifacts.save_or_check_run_config(str(tmp_path), PHASE_1, DATA)
  with pytest.raises(UserError, match="max_seq_length: saved 128 vs now 512.*add --new_phase"):
    artifacts.save_or_check_run_config(str(tmp_path), PHASE_2, DATA, write=False)
  allowed = phases.PhaseRequest(new_phase=True).may_change
  artifacts.save_or_check_run_config(str(tmp_path), PHASE_2, DATA, write=False,
                                     may_change=allowed)
  for other, needle in ((PHASE_2.replace(**{"model.hidden_size": 128}), "model: saved"),
                        (PHASE_2.replace(optimizer="lamb"), "optimizer: saved 'adamw'"),
                        (PHASE_2.replace(objective="mlm"), "objective")):
    with pytest.raises(UserError, match=needle) as error:
      artifacts.save_or_check_run_config(str(tmp_path), other, DATA, write=False,
                                         may_change=allowed)
    assert "--new_phase" not in str(error.value)
  with pytest.raises(UserError, match=r"other settings \(vocab\)"):
    artifacts.save_or_check_run_config(str(tmp_path), PHASE_2, {"vocab_md5": "other"},
                                       write=False, may_change=allowed)


def test_an_earlier_phase_command_on_a_later_phase_has_nothing_to_do(tmp_path):
  _record(tmp_path, PHASE_1, 0, end_step=12)
  _record(tmp_path, PHASE_2, 12, new_phase=True)
  # A job script rerun from its start: phase 1's command, then phase 2's.
  with pytest.raises(phases.PhaseOver, match="phase 1 of .* is over: the run is in phase 2, "
                                             "begun at step 12"):
    phases.PhaseRequest(end_step=12).check(PHASE_1, str(tmp_path), has_checkpoint=True)
  phases.PhaseRequest(new_phase=True).check(PHASE_2, str(tmp_path), has_checkpoint=True)
  phases.PhaseRequest().check(PHASE_2, str(tmp_path), has_checkpoint=True)
  # Settings of no phase of the run stay the resume check's to refuse.
  phases.PhaseRequest().check(PHASE_1.replace(batch_size=16), str(tmp_path), True)


def test_request_checks():
  with pytest.raises(UserError, match="--phase_end_step 41 must be in 1..num_train_steps"):
    phases.PhaseRequest(end_step=41).check(PHASE_1, "run", has_checkpoint=True)
  with pytest.raises(UserError, match="--new_phase continues a run, but run has no checkpoint"):
    phases.PhaseRequest(new_phase=True).check(PHASE_1, "run", has_checkpoint=False)
  assert phases.PhaseRequest(end_step=12).last_step(PHASE_1) == 12
  assert phases.DEFAULT_REQUEST.last_step(PHASE_1) == 40


def test_clip_ends_the_stages_at_the_phase_end():
  two_stage = [("generator", 10), ("discriminator", 40)]
  assert phases.clip(two_stage, 40) == two_stage
  assert phases.clip(two_stage, 25) == [("generator", 10), ("discriminator", 25)]
  assert phases.clip(two_stage, 6) == [("generator", 6)]


def test_text_data_of_another_length_goes_beside_the_first(tmp_path, shards):
  model_dir = tmp_path / "run"
  assert phases.text_data_dir(str(model_dir), "data", 128) == str(model_dir / "data")
  shutil.copytree(shards, model_dir / "data")  # built at 64
  assert phases.text_data_dir(str(model_dir), "data", 64) == str(model_dir / "data")
  assert phases.text_data_dir(str(model_dir), "data", 128) == str(model_dir / "data_128")
