"""pretrain.py with --gradient_accumulation_steps: kills at random points, exact resume."""

from pretrain_runs import kill_and_resume


def test_kills_at_random_points_then_resume_end_like_an_uninterrupted_run(tmp_path, shards):
  kill_and_resume(tmp_path, shards, ["--gradient_accumulation_steps=2"])
