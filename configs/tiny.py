"""Tiny: a ~2M-parameter model for tests and quick checks of a setup on any CPU.

Its 16-wide generator learns word frequencies and little more; for a run that learns
context, use the default demo preset. Peak LR 1e-4, below the authors' 5e-4: at 5e-4 this
64-wide, 2-layer discriminator stops finding replacements once the generator has learned
word frequencies. Warmup is 200 steps (the authors': 10,000).

A preset is a file that defines CONFIG: copy one and pass its path to --model_size.
"""

from electra_tf.config import EncoderConfig, PretrainConfig

CONFIG = PretrainConfig(
    model=EncoderConfig(hidden_size=64, num_layers=2, num_heads=2, intermediate_size=256,
                        embedding_size=32),
    generator_fraction=0.25,
    max_seq_length=64,
    mask_prob=0.15,
    batch_size=8,
    learning_rate=1e-4,
    num_train_steps=2000,
    warmup_steps=200,
    steps_per_execution=50,
    checkpoint_steps=500,
    log_steps=200,
)
