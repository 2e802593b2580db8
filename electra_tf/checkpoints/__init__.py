"""Weight formats in both directions: ours (native), the authors' TF1 and Hugging Face.

Needs only model/ and config; training uses it for --init_checkpoint. The API is
converter.py; this file stays free of TensorFlow so that commands can read it quickly.
"""

# electra-convert --from=KIND: the Source kinds each accepts.
IMPORT_KINDS = {"tf1": ("tf1",), "hf": ("hf",),
                "electra_tf": ("converted", "model_dir", "discriminator_export")}
# electra-convert --to=KIND: Hugging Face folders or the authors' TF1 layout.
EXPORT_KINDS = ("hf", "tf1")
