"""Checkpoints, RNG capture, seeding and the weights fingerprint."""
