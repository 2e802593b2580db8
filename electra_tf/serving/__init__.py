"""Deployable artifacts: SavedModels for TF Serving (signatures on ids and raw text, warmup)."""
