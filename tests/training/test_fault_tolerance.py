"""Fault injection on pretrain.py as users run it: kills at random points, SIGTERM, resume.

A deterministic run killed (SIGKILL, also in the middle of a checkpoint save) or stopped
(SIGTERM) and restarted each time must end with the weights and optimizer state of the
same run left alone. The kill points are drawn at random; the seed is in every failure
message. bench/resume/soak.py runs the long version (10 kills). Checkpoint corruption, a full
disk and divergence are in test_failure_handling.py; two CPU replicas in
test_fault_tolerance_replicas.py (a file of its own, so the two run in parallel). These runs
keep the fused GELU and dropout kernels that other tests' runs leave out: their dropout masks
must be drawn again exactly on resume.
"""

from pretrain_runs import kill_and_resume


def test_kills_at_random_points_then_resume_end_like_an_uninterrupted_run(tmp_path, shards):
  kill_and_resume(tmp_path, shards, ["--fused_kernels"])
