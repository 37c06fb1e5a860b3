"""One epoch of training and validation, in the order every correct PyTorch loop follows.

:func:`run_epoch` is the whole loop; everything around it (set-up, checkpoints, logging,
callbacks, several processes) lives in the other modules of this package and is reached through
``loop``, a :class:`~trainguard.loop.driver.Loop`.
"""

from __future__ import annotations

from typing import Any

import torch

from trainguard.loop.batches import epoch_batches, windows
from trainguard.loop.device import to_device
from trainguard.loop.validation import validation_sums

__all__ = ["run_epoch"]


def run_epoch(loop: Any) -> dict[str, float] | None:
    """Train one epoch, then validate.

    Returns:
        The validation metrics (``{}`` without a validation loader), or ``None`` when the run
        stopped after a step (a callback asked to; the checkpoint is written).
    """
    model, optimizer, amp, state = loop.train_forward, loop.optimizer, loop.amp, loop.state
    loop.model.train()  # Dropout samples masks, BatchNorm normalizes with batch statistics
    for window in windows(epoch_batches(loop), loop.accumulate):
        optimizer.zero_grad(set_to_none=True)  # this step's gradients only
        losses = []
        for micro_step, (batch, n, share) in enumerate(window):
            inputs, targets = to_device(batch, loop.device)
            # under DDP, only the window's last backward all-reduces the gradients
            with loop.dist.no_sync(loop.model, sync=micro_step == len(window) - 1):
                with amp.autocast():
                    outputs = model(inputs)
                    loss = loop.loss_fn(outputs, targets)  # the micro-batch's mean
                amp.backward(loss if len(window) == 1 else loss * share)
            loss = loss.detach()  # logged without its graph and without a host sync
            state.loss_sum.add_(loss, alpha=n)
            state.samples += n
            losses.append(loss)
        amp.clip(optimizer, loop.model.parameters(), loop.clip_grad_norm)
        amp.step(optimizer)
        state.step += 1
        if loop.scheduler is not None and loop.scheduler_interval == "step":
            loop.scheduler.step()
        if loop.after_step(window, losses):  # progress, loggers, callbacks, checkpoints
            return None
    if loop.val_loader is None:
        return {}
    loop.dist.sync_buffers(loop.model)  # every rank validates with rank 0's BatchNorm buffers
    loop.model.eval()  # Dropout off, BatchNorm normalizes with its running statistics
    with torch.no_grad():  # no graph: each batch's activations are freed at once
        sums = validation_sums(loop.eval_forward, loop.val_loader, loop.loss_fn,
                               device=loop.device, metrics=loop.metrics,
                               precision=loop.precision)
    loop.model.train()
    return loop.dist.reduce_means(sums, loop.device)
