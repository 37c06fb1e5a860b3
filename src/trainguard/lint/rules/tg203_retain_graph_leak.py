"""TG203 retain-graph-leak: ``retain_graph=True`` on an iteration's last backward.

``retain_graph=True`` keeps the graph's saved tensors after backward so that a second backward
can run through it (https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html). With
no second backward in the same iteration, those buffers outlive the step; a common cargo-cult
fix for "Trying to backward through the graph a second time" that hides a missing ``detach()``.
Silent when another backward or ``torch.autograd.grad`` follows in the same iteration (GAN
discriminator/generator steps, GradNorm's gradient norms).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import is_true, kwarg
from trainguard.lint.events import events
from trainguard.lint.regions import loop_label, training_loops
from trainguard.lint.rules import Edit, Hit
from trainguard.lint.script import Script

CODE = "TG203"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    for loop in training_loops(script):
        evs = [e for e in events(script, loop.body)  # type: ignore[attr-defined]
               if e.kind in ("backward", "autograd")]
        for i, e in enumerate(evs):
            call = e.node
            assert isinstance(call, ast.Call)
            if e.kind != "backward" or not is_true(kwarg(call, "retain_graph")) or \
                    i + 1 < len(evs):
                continue  # a later backward or autograd.grad passes through the graph again
            edits = []
            if len(call.keywords) == 1 and not call.args:
                f = call.func
                edits = [Edit(f.end_lineno or f.lineno, (f.end_col_offset or 0) + 1,
                              call.end_lineno or call.lineno, (call.end_col_offset or 1) - 1, "")]
            yield Hit(call,
                      f"backward(retain_graph=True) at {script.at(call.lineno)} is the last "
                      f"backward of the iteration ({loop_label(script, loop)}): the graph's "
                      f"saved tensors stay alive after the step",
                      fix="drop retain_graph=True; if PyTorch then says 'Trying to backward "
                          "through the graph a second time', detach the state carried between "
                          "steps (e.g. hidden = hidden.detach())",
                      edits=edits, safe=False)
