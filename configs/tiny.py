"""Tiny: a ~2M-parameter model that trains on a laptop CPU in minutes (tests and the demo)."""

from electra_tf.config import EncoderConfig, PretrainConfig

CONFIG = PretrainConfig(
    model=EncoderConfig(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=256,
                        embedding_size=32),
    generator_fraction=0.25,
    max_seq_length=64,
    mask_prob=0.15,
    batch_size=8,
    learning_rate=5e-4,
    num_train_steps=2000,
    warmup_steps=200,
    steps_per_execution=50,
    checkpoint_steps=500,
    log_steps=100,
)
