"""trainguard inside the trainers people use: one line in a trainer's callbacks watches the fit.

- ``trainguard.integrations.lightning.TrainguardCallback``: a Lightning ``Callback``
  (``lightning.pytorch`` or ``pytorch_lightning``).
- ``trainguard.integrations.huggingface.TrainguardCallback``: a ``transformers.TrainerCallback``.

Importing this package imports neither framework; each module imports its own when it is imported.
See ``docs/integrations.md``.
"""

from trainguard.integrations._session import FindingsError

__all__ = ["FindingsError"]
