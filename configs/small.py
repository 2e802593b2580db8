"""ELECTRA-Small (14M discriminator parameters), the authors' recipe."""

from electra_tf.config import EncoderConfig, PretrainConfig

CONFIG = PretrainConfig(
    model=EncoderConfig(hidden_size=256, num_layers=12, num_heads=4, intermediate_size=1024,
                        embedding_size=128),
    generator_fraction=0.25,
    max_seq_length=128,
    mask_prob=0.15,
    batch_size=128,
    learning_rate=5e-4,
    num_train_steps=1_000_000,
    warmup_steps=10_000,
)
