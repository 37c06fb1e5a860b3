"""The reference training loop: ``fit``, its history, metrics, progress and run directory."""
