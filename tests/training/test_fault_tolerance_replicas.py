"""The fault-injection test of test_fault_tolerance.py on two CPU replicas (MirroredStrategy).

With attention dropout on, a two-replica resume differs from the undisturbed run by ~1
float32 ulp (measured: 1.2e-7 after 6 steps; exact with attention dropout off, with hidden
dropout on), which grows over later steps; the cause is not found yet (README, "Preemption
and failures"). So this test runs without attention dropout and demands the exact state:
the input position, hidden dropout, sampling and optimizer state must all resume exactly.
"""

from pretrain_runs import kill_and_resume


def test_kills_then_resume_on_two_cpu_replicas_end_like_an_uninterrupted_run(tmp_path, shards):
  kill_and_resume(tmp_path, shards, ["--strategy=mirrored", "--cpu_devices=2",
                                     '--config_overrides={"model.attention_dropout_rate": 0.0}'])
