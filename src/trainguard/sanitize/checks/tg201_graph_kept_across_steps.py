"""TG201 graph-kept-across-steps: graphs of earlier steps kept alive by an accumulator.

What it watches: every outermost module output that carries a ``grad_fn`` (and, for models that
are not ``nn.Module``s, every backward root). Each root node carries a :class:`~trainguard.sanitize.core.records.Made` stamp in its own
``metadata`` dict (the watcher stamps module outputs; this check stamps backward roots), and the
check keeps only a weak reference to the stamp: the stamp dies with the node, so the check knows
which graphs are still alive without keeping any alive.

When it fires: after an optimizer step (for a run without steps, at the first backward it sees
past every 16th and at exit, counting backward calls instead, or outermost forwards when there is
no backward either: the forwards of one unrolled sequence belong to one update, as in a char-RNN
updated by hand; a run that takes ``torch.autograd.grad`` outside a forward and has no backward,
a simulation's forces from a learned energy, counts those calls and looks at the first outermost
forward past every 16th, ClementiGroup/mlcg#17; such a loop after training, with no backward or
step since, is clocked by its grad calls the same way, over the graphs made since: sbi-dev/sbi#198),
graphs made at three or more distinct earlier
iterations, each at least two iterations old, are all still alive. An iteration is one optimizer
step, or, with several optimizers alive that have stepped, one step of each (a GAN's two steps
make one). Something holds them: ``total += loss``, ``losses.append(loss)``,
``preds.append(out)``. The finding names the
variable found in the user's frames that holds them and points at the line that accumulates into it
(for a meter whose method stores what it is given, the call that gives it the tensor, or,
through objects that only pass it on, a logger of meters, the call that gives the outermost of
them the tensor: ``core.handing``);
when an object's attribute holds them (``model.train_losses``) and the frame that holds the object
never writes to it, at the line in a method of the object's class that does
(``self.train_losses.append(loss)`` in a LightningModule's ``training_step``, called by the
framework's loop); for a variable's attribute that no method grows (``state.metrics`` of a
dataclass, a ``SimpleNamespace``), at the line of the frame's own code that grows it, else of a
function the frame passes the object to (``record(run_log, pred, y)``); else, when three more
looks (or the end of the run) find no holder either, at the line that made the oldest graph.

Silent on: a list of losses summed and backpropagated in the same iteration (graphs die at the end
of the step); gradient accumulation over micro-batches (one optimizer step); one output kept for
later (one graph is not a growing leak); accumulating ``loss.item()`` or ``loss.detach()``; a
holder that is a ``deque`` with a ``maxlen`` (a window of its last entries, which stops growing
once full: pytorch/tutorials#842).

Cost: per checked optimizer step (and at exit), one pass over the followed stamps (weak references,
2,048 at most); only when graphs of 3 earlier iterations are alive, one holder search
(``holders.find_holder``: 32 user frames, 4,096 values, 20,000 graph nodes), one parse of the
frame's file (``bounds.parse_file``) and 4 x 64 nodes read for freed buffers.

Reference: PyTorch FAQ, "My model reports cuda runtime error(2): out of memory" — "Don't accumulate
history across your training loop" (https://pytorch.org/docs/stable/notes/faq.html).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.frames import short_location
from trainguard.sanitize.core.growth import (accumulation_line, attribute_accumulation_line,
                                             passed_accumulation_line)
from trainguard.sanitize.core.handing import handing_call
from trainguard.sanitize.core.holders import (ROOT, find_holder, graphs_released, path_key,
                                              window_size)
from trainguard.sanitize.core.records import BackwardCall, Made

_MIN_ITERATIONS = 3  # distinct old iterations whose graphs are alive at once
_MIN_AGE = 2         # iterations a graph must have outlived
_KEEP = 512          # stamps followed at most
_HOLD_AGE = 4        # steps the oldest live graph may have outlived before the steps stay checked
_BY_HAND_EVERY = 16  # backward calls between two looks when no optimizer steps
_HOLDER_TRIES = 3    # looks without a holder before the finding goes to the model line


class GraphKeptAcrossSteps(Check):
    code = "TG201"
    stamps = "outputs"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        # weak references to Made stamps: the watcher adds every stamped outermost output, on
        # settled steps too, so a graph kept only now and then is still seen
        self.followed: list[Any] = self.state.stamps
        # optimizer steps per iteration: the optimizers alive that have stepped (a GAN's two make
        # one iteration, so a loss kept until the next iteration is not two steps old)
        self.per = 1
        self.held_once = False  # a holder was found and reported
        self.windowed = False  # a holder found was a bounded window (deque(maxlen=N))
        self.unheld = 0  # looks that found old graphs but no holder
        self.grown: set[str] = set()  # holder paths reported at the line that grows them
        self.next_look = _BY_HAND_EVERY  # backward count of the next look without optimizer
        self.next_grad_look = _BY_HAND_EVERY  # the same, in autograd.grad calls, without backward
        self.grads_at_mark = 0  # grad calls at the last backward or optimizer step
        self.by_grads = False  # a look at a loop of grad calls after training: clocked by them

    def _clock(self, made: Made) -> int:
        if self.by_grads:
            return made.grads
        if self.state.step:
            return made.step // self.per
        # no optimizer: a loop that updates by hand counts its backward calls (the forwards of
        # one unrolled sequence, a char-RNN's steps, make one iteration); without backward, its
        # torch.autograd.grad calls (forces from an energy, one per step); else the forwards
        if self.state.backward_count:
            return made.backward_count
        return made.grads if self.state.grad_count else made.order

    def on_backward(self, call: BackwardCall) -> None:
        # Module outputs are stamped by the watcher, and a loss's graph holds its model's output:
        # stamp the loss itself only for models that are not nn.Modules.
        # (also when no outermost output of this iteration was stamped: an output object the
        # stamper cannot read, such as a model returning its own class of record)
        last = self.followed[-1]() if self.followed else None
        unstamped = last is None or last.backward_count < call.index
        if (self.state.root_forwards == 0 or unstamped) and call.tensors \
                and call.tensors[0].grad_fn is not None:
            made = Made(call.index, self.state.step, call.where, "backward root",
                        self.state.root_forwards)
            call.tensors[0].grad_fn.metadata[ROOT] = made
            self.followed.append(weakref.ref(made))
        self.grads_at_mark = self.state.grad_count
        if not self.state.step and self.state.backward_count >= self.next_look:
            # a loop updating by hand (a line search, a closure) has no step to look at: look
            # while its frames, and the list it appends to, are alive (at the first backward
            # this check sees past each 16th: settled iterations are not all delivered)
            self.next_look = self.state.backward_count + _BY_HAND_EVERY
            self._inspect()

    def on_root_forward(self, call: Any) -> None:
        # a loop without backward or step that takes gradients with torch.autograd.grad (a
        # simulation's forces from a learned energy): look while its frames are alive, at the
        # first forward past each 16th grad call; also such a loop after training (a model
        # fitted, then a dynamics run with it), clocked by the grad calls made since
        state = self.state
        if state.grad_count >= self.next_grad_look:
            self.next_grad_look = state.grad_count + _BY_HAND_EVERY
            if not state.step and not state.backward_count:
                self._inspect()
            elif state.grad_count - self.grads_at_mark >= _BY_HAND_EVERY:
                self._inspect(by_grads=True)

    def on_step(self, optimizer: Any) -> None:
        self.grads_at_mark = self.state.grad_count
        self._inspect()

    def on_exit(self) -> None:
        self._inspect(final=True)
        self.followed.clear()

    def _inspect(self, final: bool = False, by_grads: bool = False) -> None:
        """Look for graphs of old iterations alive; ``by_grads``: only those made since the last
        backward and optimizer step, their iterations counted in grad calls."""
        state = self.state
        self.followed[:] = [ref for ref in self.followed if ref() is not None]
        if len(self.followed) < 2:  # the usual case: last step's graphs only
            return
        self.per = max(1, len(state.optimizers))
        clock = state.grad_count if by_grads else state.step // self.per if state.step else \
            state.backward_count or state.grad_count or state.root_forwards
        alive = [made for made in (ref() for ref in self.followed) if made is not None]
        if by_grads:
            alive = [m for m in alive if m.backward_count == state.backward_count
                     and m.step == state.step]
        self.by_grads = by_grads
        try:
            self._judge(alive, clock, final)
        finally:
            self.by_grads = False

    def _judge(self, alive: list[Made], clock: int, final: bool) -> None:
        """:meth:`_inspect` of the stamps ``alive``, at ``clock``."""
        state = self.state
        limit = clock - _MIN_AGE
        old = [made for made in alive if self._clock(made) <= limit]
        ages = {self._clock(made) for made in old}
        if len(ages) >= 2 and clock - min(ages) > _HOLD_AGE:
            # graphs of two earlier steps, one of them older than a GAN's or an accumulation's
            # overlap, still alive: the start of a leak (on a settled run, seen on its sampled
            # steps). Keep the next steps checked in full so that it is stamped at every step.
            self.hold()
        if len(ages) < _MIN_ITERATIONS:
            del self.followed[:-_KEEP]
            return
        if self.by_grads or not state.step:
            unit = "backward call" if state.backward_count and not self.by_grads else \
                "torch.autograd.grad call" if state.grad_count else "forward"
        else:
            unit = "optimizer step" if self.per == 1 else "iteration"
        oldest = min(old, key=self._clock)
        oldest_what = oldest.module if oldest.module == "backward root" else \
            f"output of {oldest.module}"
        held = find_holder(
            lambda stamps: len({self._clock(s) for s in stamps if self._clock(s) <= limit})
            >= _MIN_ITERATIONS, sys._getframe(1))
        where = oldest.where
        seen = (f"the graphs of {len(ages)} earlier {unit}s (from {unit} {min(ages)} on) are "
                f"still alive at {unit} {clock}")
        if unit == "iteration":
            seen += f" (an iteration: one step of each of the {self.per} optimizers)"
        if held is not None and window_size(held) is not None:
            # a deque(maxlen=N) keeps the graphs of its last N entries only: they stop piling up
            # once it is full, so no step's memory grows (the mechanism of TG201 is absent)
            self.windowed = True
            self._forget(alive, old)
            return
        if held is not None:
            where, message = self._held_message(held, seen, where)
            if where == oldest.where and held.path in self.grown:
                where = None  # (the same holder, reported where it grows: a caller's copy)
            elif where != oldest.where:
                self.grown.add(held.path)
        elif self.held_once or self.windowed:
            where = None  # (at exit, after the frames that held them ended: reported already,
            # or a bounded window)
        elif not final and self.unheld < _HOLDER_TRIES:
            self.unheld += 1  # look again at the next steps: the holder may be found then
            return
        else:
            message = (f"{seen}, first made by the {oldest_what} here: something keeps these "
                       "tensors with their grad_fn across iterations, so memory grows every step")
        self._forget(alive, old)
        self.held_once = self.held_once or held is not None
        del alive, old, held
        if where is not None:
            self.report(message, where=where, iterations=sorted(ages)[:8], clock=clock)

    def _forget(self, alive: list[Made], old: list[Made]) -> None:
        """Forget what was seen so that the same graphs are not counted again."""
        old_ids = {id(m) for m in old}
        self.followed[:] = [ref for ref in self.followed if (m := ref()) is not None
                            and id(m) not in old_ids][-_KEEP:]

    @staticmethod
    def _held_message(held: Any, seen: str, where: Any) -> tuple[Any, str]:
        """The line to report and the message, for graphs that ``held`` keeps."""
        # at the line that grows it: in the holder's class (``self.sum += loss`` in a meter,
        # ``self.trace.append(h)``, ``self.train_losses.append(loss)``), else in the frame
        # that holds it
        # (else in a function the frame passes the object to: ``update(agent, batch, state)``)
        line = attribute_accumulation_line(held) or passed_accumulation_line(held)
        stored_at = line
        if line is not None:  # a meter's update() storing what it is given: the call
            line = handing_call(held, line) or line
        if line is None and not held.path.startswith(f"{held.name}."):
            # (for ``self.stats``, a line growing ``self.baseline`` is not the one)
            line = accumulation_line(held.frame.f_code, held.name, path_key(held.path))
        made = f"; the oldest was made at {short_location(where)}" if line not in (None, where) \
            else ""
        if line is not None:
            where = line
        stored = f", stored by {short_location(stored_at)} from what this call passes" \
            if stored_at and stored_at != where else ""
        holder = f"`{held.path}` holds them" + (
            f" (a tensor that keeps a grad_fn{stored})" if held.kind == "tensor"
            else f" (tensors with grad_fn{stored})")
        if graphs_released(held.tensors):
            # backward already freed the saved activations: the autograd history (node
            # objects, and a running sum's own graph) still grows every step (PyTorch FAQ).
            message = (f"{seen}: {holder}, so every step's autograd history stays alive (a "
                       "backward or autograd.grad already freed their saved activations, so "
                       "memory grows slowly, but it grows every step)")
        else:
            message = f"{seen}: {holder}, so every step's graph and activations stay in memory"
        return where, message + made
