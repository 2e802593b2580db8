"""ELECTRA-Base (110M discriminator parameters), the authors' recipe."""

from electra_tf.config import EncoderConfig, PretrainConfig

CONFIG = PretrainConfig(
    model=EncoderConfig(hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072,
                        embedding_size=768),
    generator_fraction=1 / 3,
    max_seq_length=512,
    mask_prob=0.15,
    batch_size=256,
    learning_rate=2e-4,
    num_train_steps=766_000,
    warmup_steps=10_000,
)
