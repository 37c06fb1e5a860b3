"""TG202 backward-twice: a backward through a graph whose saved tensors an earlier backward freed.

What it watches: the outputs of outermost module calls, stamped by the watcher (in their autograd
node's metadata, ``state.MADE``) with the number of backward calls completed when they were made
and the line that made them. Nothing else runs per step.

When it fires: the script dies of PyTorch's "Trying to backward through the graph a second time".
The failing backward's graph is searched for stamped outputs made before the last successful
backward: those graphs were freed by it (of them, those whose node's saved tensors are gone, when
the graph shows any: an output given to that backward only detached was not freed). The diagnosis
names the module output and the line that made it, the earlier backward (its line and step) that
freed it, whether it was the same iteration (two backward calls through one graph: sum the losses,
or detach the output for the first one, as a GAN's discriminator step must) or an earlier one (a
tensor carried across iterations, such as an RNN hidden state: detach it), and the variable still
holding it; a state rebound through the user's helper that gives it back undetached (``hidden =
repackage_hidden(hidden)`` returning ``h`` or ``h.clone()``) is reported at that helper's
``return``. The same iteration is the same optimizer step, or a freed output whose line made no
newer output that the failing graph holds, freed by a backward on another line (a GAN's generator
output, used by the discriminator's backward and, after ``opt_d.step()``, by the generator's); a
carried tensor's line made a newer one this iteration, or the same backward line freed it (an output
computed once before the loop). One whose line has not run since (a target refreshed every few
steps, data made once) and is no carried state is reported at that line. An output freed by the
same backward line in an earlier pass of its loop, made by a module whose parameters the optimizer
stepped after that backward does not hold but another optimizer does (a critic updated several
times per generator step, KupynOrest/DeblurGAN#56), needed no graph in this loss: reported where
it enters the loss, at the assignment of the backward's variable that carries it in
(:mod:`..core.foreign_output`). A GAN's generator output taken in whole by the first loss in
another function (``loss_D = backward_D(real, fake)``, ``self.update_critic()``) is reported at
that module call, found in the graph of the first loss a user variable holds
(:mod:`..core.freed_use`).

Silent on: any run that does not raise this error; ``retain_graph=True`` backwards.

Cost: only at a failed backward: one walk of its roots' graphs, 20,000 nodes in all (twice as
many with the variables of a repeated backward's function), and one parse of the line's file
(``bounds.parse_file``).

Reference: ``torch.Tensor.backward`` docs (``retain_graph``); forum thread "RuntimeError: Trying
to backward through the graph a second time"
(https://discuss.pytorch.org/t/runtimeerror-trying-to-backward-through-the-graph-a-second-time-but-the-buffers-have-already-been-freed-specify-retain-graph-true-when-calling-backward-the-first-time/6795).
"""

from __future__ import annotations

import ast
import sys
import weakref
from typing import Any

from trainguard.sanitize.core.bounds import GRAPH_NODES, Budget
from trainguard.sanitize.core.caught import Caught
from trainguard.sanitize.core.check import Check, Diagnosis
from trainguard.sanitize.core.cuts import assigned_in_methods
from trainguard.sanitize.core.dropped_result import callee_in_traceback, dropped_cut
from trainguard.sanitize.core.foreign_output import foreign_entry
from trainguard.sanitize.core.freed_use import consumer_of
from trainguard.sanitize.core.frames import short_location, user_frame
from trainguard.sanitize.core.graph import freed_metadata, graph_nodes
from trainguard.sanitize.core.holders import carried_names, graph_metadata, rebound_before
from trainguard.sanitize.core.later_use import read_after, taken_whole
from trainguard.sanitize.core.module_state import carried_state, kept_tensors
from trainguard.sanitize.core.records import MADE as _KEY
from trainguard.sanitize.core.records import BackwardCall
from trainguard.sanitize.core.returned_dict import own_returns
from trainguard.sanitize.core.source import SourceFile, function_node

_MESSAGE = "backward through the graph a second time"


class BackwardTwice(Check):
    code = "TG202"
    stamps = "outputs"

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.caught = Caught(4)  # (error, failed call, earlier call) of each, until claimed
        self.built: weakref.WeakSet = weakref.WeakSet()  # the optimizers built

    def on_built(self, obj: Any, where: Any) -> None:
        if hasattr(obj, "param_groups"):
            self.built.add(obj)

    def on_backward_failed(self, call: BackwardCall, exc: BaseException) -> None:
        if _MESSAGE not in str(exc):
            return
        stamps = []
        budget = Budget(GRAPH_NODES)  # the roots' graphs together
        for tensor in call.tensors:
            if tensor.grad_fn is not None:
                stamps += graph_metadata(tensor.grad_fn, _KEY, budget=budget)
        freed = [s for s in stamps if s.backward_count < call.index]
        # of those, the outputs whose saved tensors are gone (not one the earlier backward never
        # reached, as a generator's output given to the critic detached)
        proven = [s for t in call.tensors if t.grad_fn is not None
                  for s in freed_metadata(t.grad_fn, _KEY, budget=Budget(GRAPH_NODES))]
        freed = [s for s in freed if any(s is p for p in proven)] or freed
        # The earliest made is the shared trunk (an encoder, the first chunk's state).
        first = min(freed, key=lambda s: (s.backward_count, s.order)) if freed else None
        call.facts["tg202_freed"] = first
        call.facts["tg202_freed_lines"] = {s.where[:2] for s in freed if s.where is not None}
        call.facts["tg202_cached"] = None if first is not None else self._cached(call.tensors)
        # A carried tensor (an RNN's hidden state) is one whose line made a newer output that
        # this graph also holds; a GAN's generator output used by the discriminator's backward
        # and then the generator's is the latest output of its line.
        call.facts["tg202_renewed"] = first is not None and any(
            s.where == first.where and s.backward_count > first.backward_count for s in stamps)
        call.facts["tg202_stale"] = first is not None and self._stale(first, stamps, call.index)
        # the script may catch it (``except RuntimeError:`` around training): reported at exit
        earlier = next((b for b in reversed(self.state.backwards) if not b.failed), None)
        # the same line's backward again, after a step, through an output of a module another
        # optimizer trains (a critic updated several times per generator step): where it enters
        again = first is not None and earlier is not None and earlier.where == call.where and \
            self.state.backwards_at_step > earlier.index and not call.facts["tg202_renewed"]
        call.facts["tg202_use"] = consumer_of(first, call.tensors, earlier.index, sys._getframe(
            1)) if first is not None and earlier is not None and not again else None
        call.facts["tg202_entry"] = foreign_entry(
            self.state, [*self.state.optimizers, *self.built], call.tensors, first,
            user_frame(sys._getframe(1)), call.where) if again else None
        self.caught.hold(exc, (exc, call, earlier))

    def _stale(self, first: Any, stamps: list, index: int) -> bool:
        """Whether the freed output ``first`` is a value kept from the step that made it, not a
        state each iteration carries on: no line of this graph's older ``stamps`` (made before
        backward call ``index``) made a newer one it holds, and no later output of ``first``'s
        line is alive (the line has not run again: a target refreshed every few steps)."""
        lines = {s.where for s in stamps if s.backward_count < index}
        if any(s.where in lines and s.backward_count >= index for s in stamps):
            return False
        for ref in list(self.state.stamps):
            made = ref()
            if made is not None and made.where == first.where and made.order > first.order:
                return False
        return True

    def on_exit(self) -> None:
        for exc, failed, earlier in self.caught.drain():
            found = self._diagnose(exc, failed, earlier)
            if found is not None:
                self.report(f"{found.message}; backward raised and the script caught the error",
                            fix=found.fix, where=found.where or failed.where)

    def _cached(self, roots: tuple) -> tuple[str, Any] | None:
        """``("RotaryEmbedding.cached_freqs", line)`` when the failing graph holds a tensor kept
        in a plain attribute of a module of the models seen (not a parameter or buffer: a cache
        filled in forward), with the line of the class that assigns it outside ``__init__``."""
        nodes: set[int] = set()
        budget = Budget(GRAPH_NODES)
        keep = []  # the walked nodes, alive while their ids are compared
        for root in roots:
            if getattr(root, "grad_fn", None) is not None:
                keep += graph_nodes(root.grad_fn, budget=budget)
        nodes.update(id(n) for n in keep)
        carried = carried_state(self.state.models, nodes, budget)
        if carried is not None:
            return carried
        for model in list(self.state.models):
            for module in model.modules():
                for attr, value in vars(module).items():
                    if any(v.grad_fn is not None and id(v.grad_fn) in nodes
                           for v in kept_tensors(value)):
                        return (f"{type(module).__name__}.{attr}",
                                assigned_in_methods(type(module), attr))
        return None

    def on_error(self, exc: BaseException) -> Diagnosis | None:
        if not isinstance(exc, RuntimeError) or _MESSAGE not in str(exc):
            return None
        held = self.caught.claim(exc)  # the run dies of it: explained here, not at exit
        if held is not None:
            return self._diagnose(exc, held[1], held[2])
        failed = next((b for b in reversed(self.state.backwards) if b.failed), None)
        earlier = next((b for b in reversed(self.state.backwards) if not b.failed), None)
        return self._diagnose(exc, failed, earlier) if failed is not None else None

    def _diagnose(self, exc: BaseException, failed: Any, earlier: Any) -> Diagnosis | None:
        """The diagnosis of the failed backward ``failed`` (``earlier``: the last that ran)."""
        made = failed.facts.get("tg202_freed")
        before = (f"the backward at {short_location(earlier.where)} "
                  f"(optimizer step {earlier.step + 1})"
                  if earlier is not None else "an earlier backward")
        cached = failed.facts.get("tg202_cached")
        if made is None and cached is not None:
            name, where = cached
            return Diagnosis(
                f"this backward runs through `{name}`, a tensor a module keeps between calls"
                + (f" (assigned at {short_location(where)})" if where else "")
                + f" with the graph of the step that made it, whose saved tensors {before} "
                "already freed: a state or cache filled in forward and reused by later steps",
                fix="keep it detached (a recurrent state: `self.hidden = tuple(h.detach() for h "
                    "in self.hidden)`, or a fresh state for each batch); a cache of fixed inputs: "
                    "compute it under torch.no_grad(); of learnable parameters: recompute it in "
                    "every forward",
                where=where or failed.where)
        if made is None:
            return Diagnosis(
                f"this backward runs through a graph whose saved tensors {before} already freed",
                fix="compute the graph again for the second backward, sum the losses and call "
                    "backward once, or pass retain_graph=True to the first backward",
                where=failed.where)
        made_step, made_where, module = made.step, made.where, made.module
        if failed.facts.get("tg202_entry"):
            return _foreign(made, before, *failed.facts["tg202_entry"])
        same_step = earlier is not None and made_step == earlier.step == failed.step
        what = f"the output of {module} made at {short_location(made_where)}"
        carried = carried_names(made_where)
        held = (f"; `{carried[0]}` is passed back into the call that made it"
                if carried else "")
        renewed = failed.facts.get("tg202_renewed", True)
        if same_step or (not renewed and earlier is not None and earlier.where != failed.where):
            # not remade since another backward line freed it: used twice in one iteration, even
            # when an optimizer step ran between the two backward calls (a GAN's D and G steps);
            # the same backward line again is the loop come round (an output cached before it)
            return _one_iteration(exc, failed, earlier, made, before, same_step)
        rebound, returned, clause = _rebound(made_where, carried, exc)
        held += clause
        once = not carried and made_step == 0 and _outside_loops(made_where)
        if once:  # data preprocessed once through a module, before the loop, graph and all
            held += ("; it was made once, outside any loop, and every step reuses it with the "
                     "graph of that one call")
        elif not carried and rebound is None and failed.facts.get("tg202_stale"):
            # a target or prototype refreshed every few steps: its line has not run since
            once = True
            held += (f"; {short_location(made_where)} has not run since, and every step after "
                     "reuses it with the graph of that call (a value refreshed only every few "
                     "steps)")
        return Diagnosis(
            f"this backward (optimizer step {failed.step + 1}) runs through {what} during "
            f"optimizer step {made_step + 1}, whose saved tensors {before} already freed: a "
            f"tensor carried across iterations keeps the old graph{held}",
            fix="make it without a graph (under torch.no_grad(), or .detach() it) when it is "
                "input data or a target, or compute it again inside the loop when its module "
                "should learn"
                if once else ("return the state detached from the helper (h.detach() for each "
                              "tensor)" if returned else "detach what is carried to the next "
                              "iteration (e.g. hidden = hidden.detach()) or compute it again "
                              "inside the loop") + "; retain_graph=True would only grow memory",
            where=returned or rebound or (made_where if carried or once else failed.where))


def _one_iteration(exc: BaseException, failed: Any, earlier: Any, made: Any, before: str,
                   same_step: bool) -> Diagnosis:
    """The diagnosis of an output used by two backward calls of one iteration (``made``: its
    stamp; ``before``: the earlier backward, in words)."""
    made_where, module = made.where, made.module
    what = f"the output of {module} made at {short_location(made_where)}"
    when = ("in the same step" if same_step else
            "in the same iteration (an optimizer step ran between the two backward calls, "
            f"and {short_location(made_where)} made no newer output)")
    # across an optimizer step (a GAN's D then G step), the first backward's module
    # call that took the output in whole is the line to change: D(fake.detach())
    taken = None if same_step or earlier is None else \
        taken_whole(made_where, earlier.where, exc)
    if taken is not None and taken[0][:2] in failed.facts.get("tg202_freed_lines", ()):
        taken = None  # that call's own output is reused (a critic's score): not a fix
    used = failed.facts.get("tg202_use") if taken is None and not same_step else None
    if used is not None:  # found through the graph the first loss still holds
        taken = used
    # else the second loss reading the output again after the first backward (a
    # critic's score of the real batch reused by the generator's loss)
    reread = None if taken or same_step or earlier is None else \
        read_after(made_where, earlier.where, failed.where)
    if reread is not None and reread[:2] == failed.where[:2]:
        reread = None
    return Diagnosis(
        (f"the backward at {short_location(failed.where)}" if reread else "this backward")
        + f" runs through {what}, whose saved tensors {before} already freed "
        f"{when}: two backward calls through one graph"
        + (f"; the first backward reached it through `{taken[1]}` here (the second "
           f"backward at {short_location(failed.where)})" if taken else "")
        + ("; the second loss reads it again here, after the first backward"
           if reread else ""),
        fix=("give the second loss the output detached here when it should be a constant "
             f"for that loss, or call {module} again after the first backward"
             if reread else
             "add the losses and call backward once (loss = loss_a + loss_b); when the "
             f"first backward should not reach {module} (a GAN's discriminator step), "
             "give it the output detached (D(fake.detach()))")
            + "; or pass retain_graph=True to the first of the two backward calls",
        where=(taken[0] if taken else reread) or failed.where)

def _foreign(made: Any, before: str, where: Any, name: str, stepped: str,
             other: str) -> Diagnosis:
    """The diagnosis of a backward repeated from one line through the output ``made`` of a
    module that the ``other`` optimizer trains, not the ``stepped`` one (see
    :mod:`..core.foreign_output`); ``name`` carries it into the loss at ``where``."""
    return Diagnosis(
        f"this backward runs through the output of {made.module} made at "
        f"{short_location(made.where)}, whose saved tensors {before} already freed (this "
        f"backward's line, one pass of its loop earlier); {made.module}'s parameters are not "
        f"in the {stepped} stepped after that backward but in another {other}, so this loss needs "
        f"no graph through it: `{name}` here takes the output in undetached",
        fix=f"give this term {made.module}'s output detached (.detach()) when this update "
            f"should not train {made.module}, or compute the output again inside the loop",
        where=where)


def _rebound(made: Any, carried: list[str], exc: BaseException) -> tuple[Any, Any, str]:
    """``(rebinding, return, clause)`` for a carried state rebound from itself through a call
    before the call at ``made`` (``hidden = repackage_hidden(hidden)`` that copies, not cuts):
    that statement's line, the helper's return that kept the history (:func:`_copy_returned`)
    and the message's clause; Nones and "" when there is none. A cut whose result is thrown
    away (``repackage_hidden(hidden)`` alone: :func:`..core.dropped_result.dropped_cut`) is
    the statement to change instead."""
    dropped = dropped_cut(made, carried[0], exc) if carried else None
    if dropped is not None:  # (``repackage_hidden(hidden)`` with its result thrown away)
        return dropped[0], None, (
            f"; `{dropped[1]}` at {short_location(dropped[0])} cuts it from the graph, but "
            f"its result is thrown away, so `{carried[0]}` still holds the old graph: bind "
            f"what it returns (`{carried[0]} = {dropped[1]}`)")
    rebound = rebound_before(made, carried[0]) if carried and made else None
    if rebound is None:
        return None, None, ""
    clause = (f"; it is rebound at {short_location(rebound)} before that call, but what that "
              "call returns still holds the old graph (a copy such as clone() keeps the "
              "history; detach() cuts it)")
    returned = _copy_returned(rebound, exc)
    if returned is None:
        return rebound, None, clause
    clause += (f"; the helper returns it at {short_location(returned[0])} (`{returned[1]}`) "
               "without detaching it")
    return rebound, returned[0], clause


_COPY_NAMES = frozenset(("tuple", "list", "torch", "autograd", "Variable", "clone", "contiguous",
                         "detach", "detach_", "requires_grad_", "data"))


def _copy_returned(rebound: Any, exc: BaseException) -> tuple[Any, str] | None:
    """``(location, "return h")`` of the one statement by which the user's helper called at
    ``rebound`` (``hidden = repackage_hidden(hidden)``, resolved in a frame of ``exc``'s
    traceback running that line) returns what it was given, or copies of it (``return h``,
    ``tuple(s.clone() for s in states)``), besides returns that recurse into the helper (over a
    tuple of states): the line that kept the history where a detach belongs. None when the
    callee is not such a helper (one that moves or transforms the state, ``h.to(device)``:
    the rebinding is the place), or it has no single such return."""
    file = SourceFile.load(rebound[0])
    assign = next((n for n in file.parents if isinstance(n, ast.Assign)
                   and n.lineno == rebound[1]), None) if file is not None else None
    call = assign.value if assign is not None else None
    if not isinstance(call, ast.Call):
        return None
    name = getattr(call.func, "attr", getattr(call.func, "id", None))
    func = callee_in_traceback(call, rebound[0], exc)
    node = function_node(func.__code__) if getattr(func, "__code__", None) else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    params = {a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]}
    returns = [r for r in own_returns(node) if r.value is not None and not any(
        isinstance(c, ast.Call) and getattr(c.func, "attr", getattr(c.func, "id", None)) == name
        for c in ast.walk(r.value))]
    if len(returns) != 1 or not _copies(returns[0].value, params):
        return None
    ret = returns[0]
    return (func.__code__.co_filename, ret.lineno, ret.col_offset + 1), ast.unparse(ret)


def _copies(value: ast.AST, params: set[str]) -> bool:
    """Whether ``value`` only gives back the parameters ``params`` or copies of them: names of
    parameters or comprehension variables, containers, indexing and the methods in
    ``_COPY_NAMES`` (no ``.to(device)``, no arithmetic, no other call)."""
    bound = params | {t.id for c in ast.walk(value) if isinstance(c, ast.comprehension)
                      for t in ast.walk(c.target) if isinstance(t, ast.Name)}
    for n in ast.walk(value):
        if isinstance(n, ast.Name) and n.id not in bound and n.id not in _COPY_NAMES:
            return False
        if isinstance(n, ast.Attribute) and n.attr not in _COPY_NAMES:
            return False
        if not isinstance(n, (ast.Name, ast.Attribute, ast.Call, ast.Tuple, ast.List,
                              ast.GeneratorExp, ast.ListComp, ast.comprehension, ast.Subscript,
                              ast.Constant, ast.Slice, ast.keyword, ast.expr_context)):
            return False
    return True


def _outside_loops(where: Any) -> bool:
    """Whether the call at ``where`` sits in no ``for``/``while`` of its function or module
    (``training_seq = to_channels(raw)`` at a script's top level, before the training loop;
    lucidrains/denoising-diffusion-pytorch#109)."""
    file = SourceFile.load(where[0]) if where is not None else None
    call = file.call_at(where[1], where[2] - 1) if file is not None else None
    return call is not None and file.loop(call, file.scope(call)) is None
