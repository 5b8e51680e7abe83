"""LightningModules, one per method, and the inference artefact they export."""
