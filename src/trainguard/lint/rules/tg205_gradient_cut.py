"""TG205 gradient-cut: the loss reaches the model only through a cut, so nothing learns.

The loss that ``backward()`` runs on is built from ``output.detach()``, ``output.data``,
``output.item()``, ``output.argmax(1)`` or an integer cast, a NumPy round trip, or is re-wrapped as a new leaf with
``torch.tensor(value, requires_grad=True)`` (the usual answer to "element 0 of tensors does not
require grad and does not have a grad_fn", which silences the error and trains nothing:
https://discuss.pytorch.org/t/element-0-of-tensors-does-not-require-grad-and-does-not-have-a-grad-fn/32908).
Silent when any uncut path from the loss to a model output or to ``parameters()`` exists.
``float(x)``/``int(x)`` are cuts too (REINFORCE written with ``-float(log_prob) * ret``); values
are followed through tuple unpacking, loop variables (``zip`` parts), lists filled with
``append``, and a helper's parameters (what the file's calls pass); the backward may sit in a
function the training loop calls.

Per model, when only some terms of the loss are cut: a model that an optimizer stepped after
the backward holds, reached only through cuts, gets no gradient (an actor's policy mean sent
through NumPy and summed with the critic's loss: https://discuss.pytorch.org/t/74548).

Per term, when the loss as a whole reaches a model: a summed term that reaches no model
except through a cut of a value (:mod:`trainguard.lint.terms`; a policy term built from
``log_prob.item()`` next to the value term of the same two-headed network) adds no gradient.

A submodule built in ``__init__`` that nothing ever calls (:mod:`trainguard.lint.unused`) gets
no gradient either: reported where ``__init__`` builds it.
So does one whose output ``forward`` keeps in a name that nothing reads afterwards
(:mod:`trainguard.lint.discarded`; ``x = self.blocks[i](x)`` in ``for i, x in enumerate(xs)``):
reported at that assignment.

Inside a module's ``forward``, a submodule with parameters whose output reaches the returned
value only through a cut (:mod:`trainguard.lint.cuts`) never learns either: reported at the cut.
What the class's forward hooks store on ``self`` (:mod:`trainguard.lint.hooks`) is the hooked
module's output there: ``self.latents = output.detach()`` in a hook cuts it.
So do the layers before a module whose ``forward`` returns its input only through a cut, when
an ``nn.Sequential`` stacks it after them (a NumPy gather of the input, ligerlac/torchlogix#17).

A loss rebuilt from graph values (:mod:`trainguard.lint.rebuilds`): ``torch.tensor(log_probs)``,
``torch.as_tensor``, ``torch.Tensor(...)`` or a NumPy round trip on a list whose elements a
model computed copies their numbers into a new leaf with no ``grad_fn``
(https://pytorch.org/docs/stable/generated/torch.tensor.html: "torch.tensor() always copies
data"). When the tensor ``backward()`` runs on is built from it and nothing else there carries a
graph, reported at the rebuild; silent when another term carries a graph (a rebuilt target is a
stop-gradient) or part of the loss cannot be followed. ``torch.stack``/``torch.cat`` keep it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import dotted, walk_local
from trainguard.lint.cuts import forward_cuts, input_cuts
from trainguard.lint.discarded import discarded_outputs
from trainguard.lint.cut_trace import Focus, aliases, trace
from trainguard.lint.events import events
from trainguard.lint.frozen import frozen_models
from trainguard.lint.frozen_heads import frozen_heads
from trainguard.lint.optimizers import held_leaves, held_modules
from trainguard.lint.rebuilds import REBUILD, loss_sources
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.script import DEEP_COPIES, Script, is_backward
from trainguard.lint.terms import summed_terms
from trainguard.lint.unused import unused_submodules

CODE = "TG205"
SKIP_IN_TESTS = True  # about a training run; test files are not runs


def check(script: Script) -> Iterator[Hit]:
    yield from _rebuilt_losses(script)
    seen: set[int] = set()
    for loop in training_loops(script):
        for call in _backwards_run(script, loop):
            if id(call) in seen:
                continue
            seen.add(id(call))
            target = call.func.value  # type: ignore[attr-defined]
            if isinstance(target, ast.Call) and target.args and \
                    (script.key(target.func) or "").endswith("scale"):
                target = target.args[0]
            uncut, cuts = trace(script, target, call, depth=14)
            if cuts and not uncut:
                cut, how = cuts[0]
                if _rebuild_reported(script, target, cut):
                    continue
                yield Hit(cut, f"the loss that backward() runs on at {script.at(call.lineno)} "
                               f"reaches the model only through {how}: no gradient flows to the "
                               f"parameters, so they never change")
            else:
                hits = list(_cut_models(script, loop, call, target, seen_cut=bool(cuts)))
                if not hits and cuts:
                    term = _cut_term(script, call, target)
                    hits = [term] if term is not None else []
                yield from hits
    for fh in frozen_heads(script):
        layer = dotted(fh.attach.targets[0])
        yield Hit(fh.freeze, f"this freezes every parameter of {fh.model}, {layer} "
                             f"attached at {script.at(fh.attach.lineno)} included, and nothing "
                             f"sets requires_grad back: no parameter of {fh.model} can get a "
                             f"gradient, so backward() fails with 'element 0 of tensors does not "
                             f"require grad' or, if silenced, nothing learns",
                  fix=f"freeze before attaching {layer}, or loop over the backbone's "
                      f"parameters only (not {fh.model}.parameters())")
    if not script.may_reach("backward") or "forward" not in script.source:
        return
    for u in unused_submodules(script):
        yield Hit(u.assign, f"{u.cls.name}.__init__ builds self.{u.attr}, a submodule with "
                            f"parameters, but nothing ever calls it: its parameters get no "
                            f"gradient, so they never change",
                  fix=f"call self.{u.attr} in forward, or do not build it (guard it with the "
                      f"config switch meant to turn it on)")
    for d in discarded_outputs(script):
        after = f"the loop at {script.at(d.loop.lineno)} rebinds it" if d.loop is not None \
            else f"{d.cls.name}.forward() never reads it again"  # type: ignore[attr-defined]
        yield Hit(d.stmt, f"the output of {d.module} is kept in `{d.name}`, but nothing reads "
                          f"`{d.name}` afterwards ({after}): the submodule's output reaches "
                          f"nothing, so its parameters get no gradient and never change",
                  fix="use the output where forward goes on (store it back where the rest "
                      "of forward reads, or return it), or remove the submodule")
    for fc in forward_cuts(script):
        names = " and ".join(f"self.{a}" for a in fc.attrs)
        one = len(fc.attrs) == 1
        yield Hit(fc.cut, f"what {names} {'computes reaches' if one else 'compute reach'} what "
                          f"{fc.cls.name}.forward() returns only through {fc.how}: no gradient "
                          f"flows to {'its' if one else 'their'} parameters, so they never "
                          f"change",
                  fix=f"keep {names} in the graph (drop the cut), or freeze "
                      f"{'it' if one else 'them'} (requires_grad_(False)) if not meant to learn")
    for ic in input_cuts(script):
        kind = (script.call_qualname(ic.stack) or "nn.Sequential").rsplit(".", 1)[-1]
        yield Hit(ic.cut, f"{ic.cls.name}.forward() returns its input `{ic.name}` only through "
                          f"{ic.how}, and {ic.cls.name} follows other layers in the "
                          f"nn.{kind} at {script.at(ic.stack.lineno)}: no gradient flows "
                          f"back through it, so the layers before it never change",
                  fix=f"hand {ic.name} on as it is (torch.as_tensor({ic.name}) keeps its "
                      f"history; torch.tensor({ic.name}) copies it into a new leaf)"
                  if (script.call_qualname(ic.cut) or "") == "torch.tensor" else
                  f"compute with torch operations on {ic.name} (indexing, torch.gather) "
                  f"instead of a detached or NumPy copy")


def _backwards_run(script: Script, loop: ast.AST) -> list[ast.Call]:
    """The backward calls one iteration of ``loop`` runs: in its body, or in a same-file
    function or method it calls (two calls deep: ``self.update(batch)`` in ``fit``)."""
    out: list[ast.Call] = []
    frontier, seen = [loop], {id(loop)}
    for level in range(3):
        nxt = []
        for node in frontier:
            for call in walk_local(node):
                if not isinstance(call, ast.Call):
                    continue
                if is_backward(call):
                    out.append(call)
                elif level < 2:
                    for t in script.targets(call):
                        if t.script is script and not t.instance and id(t.func) not in seen:
                            seen.add(id(t.func))
                            nxt.append(t.func)
        frontier = nxt
    return out


def _rebuild_reported(script: Script, target: ast.AST, cut: ast.AST) -> bool:
    """_rebuilt_losses reports this cut: a list of graph values rebuilt into a new tensor
    that makes the whole loss (backward raises rather than training nothing)."""
    found = loss_sources(script, target)
    return not found.graph and not found.unknown and any(r is cut for r, _ in found.rebuilds)


def _rebuilt_losses(script: Script) -> Iterator[Hit]:
    """The loss that backward() runs on is built only from a tensor rebuilt out of graph
    values (:mod:`trainguard.lint.rebuilds`): reported at the rebuild."""
    if "backward" not in script.source or not any(
            (script.call_qualname(c) or "") in REBUILD and c.args and
            not isinstance(c.args[0], ast.Constant) for c in script.calls):
        return
    done: set[int] = set()
    for call in script.calls:
        if not is_backward(call) or not isinstance(call.func, ast.Attribute):
            continue
        target = call.func.value
        if isinstance(target, ast.Call) and target.args and \
                (dotted(target.func) or "").endswith("scale"):
            target = target.args[0]
        found = loss_sources(script, target)
        if found.graph or found.unknown:
            continue
        for rebuild, box in found.rebuilds:
            if id(rebuild) in done:
                continue
            done.add(id(rebuild))
            how = script.call_qualname(rebuild) or "torch.tensor"
            yield Hit(rebuild, f"{how}(...) copies the values in {box} into a new tensor cut "
                               f"from the graph, and the loss that backward() runs on at "
                               f"{script.at(call.lineno)} is built from it: the parameters get "
                               f"no gradient, and backward fails with 'element 0 of tensors "
                               f"does not require grad' when nothing else carries a graph",
                      fix=f"keep the graph: torch.stack({box}) (or torch.cat) instead of "
                          f"rebuilding a tensor from the values")


def _cut_models(script: Script, loop: ast.AST, call: ast.Call, target: ast.AST, *,
                seen_cut: bool) -> Iterator[Hit]:
    """Per model: a model that an optimizer stepped after this backward holds, reached by the
    loss only through cuts while other terms reach other models (an actor whose policy mean
    went through NumPy, summed with a critic's loss), or only through a value computed under
    ``torch.no_grad()`` (an encoder whose features feed the critic's loss but were computed
    without a graph, while ``encoder_opt.step()`` follows). A GAN's discriminator step, which
    detaches the generator that its optimizer does not hold, stays silent, as does a model an
    earlier backward of the same step reaches uncut (a critic's loss first). Unless the loss
    showed a cut already (``seen_cut``), only where the steps hold two models or more."""
    evs = events(script, loop.body)  # type: ignore[attr-defined]
    at = next((i for i, e in enumerate(evs) if e.kind == "backward" and e.node is call), None)
    if at is None:
        return
    stepped: list[str] = []
    steps: dict[str, ast.AST] = {}
    for e in evs[at + 1:]:
        if e.kind == "backward":
            break
        if e.kind == "step" and e.key:
            stepped.append(e.key)
            steps.setdefault(e.key, e.node)
    # a model frozen whole (requires_grad False) is meant to get no gradient: a frozen encoder
    # run under no_grad, handed over in a parameter list filtered by ``p.requires_grad``
    frozen = frozen_models(script)
    leaves = {opt: held_leaves(script, opt) for opt in stepped}
    # the models whose parameters it holds and the tensors it is given by name, both: a
    # learned log-variance listed next to model.parameters() is stepped like they are
    held = {opt: sorted((set(held_modules(script, opt, steps[opt]) or ()) | leaves[opt]) -
                        frozen) for opt in stepped}
    copied = _copy_stepped(script, loop, call, target, held)
    if copied is not None:
        yield copied
        return
    if not seen_cut and sum(map(len, held.values())) < 2:
        return
    # the backwards of the same step before this one (an actor-critic's critic loss, with
    # retain_graph=True): a model they reach gets its gradient there
    earlier = []
    for e in reversed(evs[:at]):
        if e.kind in ("step", "zero"):
            break
        if e.kind == "backward" and isinstance(e.node, ast.Call) and \
                isinstance(e.node.func, ast.Attribute):
            earlier.append(e.node)
    for opt in stepped:
        for model in held[opt]:
            others = frozenset(m for ms in held.values() for m in ms if m != model)
            leaf = model in leaves[opt]  # a tensor, not a model
            focus = Focus(model, others, aliases(script, model), leaf)
            uncut, cuts = trace(script, target, call, depth=14, focus=focus)
            if cuts and not uncut and any(
                    trace(script, b.func.value, b, depth=14, focus=focus)[0] for b in earlier):
                continue  # an earlier backward of the step reaches it uncut
            if cuts and not uncut:
                cut, how = cuts[0]
                if _rebuild_reported(script, target, cut):
                    continue
                no_grad = how.startswith("a value computed under")
                whose, end = (model, "it never changes") if leaf else \
                    (f"{model}'s parameters", "they never change")
                yield Hit(cut, f"the loss that backward() runs on at {script.at(call.lineno)} "
                               f"reaches {model} only through {how}: {opt}.step() finds no "
                               f"gradient for {whose}, so {end}",
                          fix=f"compute it outside the no_grad block (keep only values meant "
                              f"as fixed targets under it), or drop {opt} if {model} is meant "
                              f"to stay frozen" if no_grad else None)
                return


def _copy_stepped(script: Script, loop: ast.AST, call: ast.Call, target: ast.AST,
                  held: dict[str, list[str]]) -> Hit | None:
    """The optimizer stepped after the backward holds a deep copy of a model (``modelcp =
    copy.deepcopy(model)``, an adapted copy for test-time training) that the loss never
    reaches, while it reaches the original, or the other way round (skorch-dev/skorch#317):
    the stepped one gets no gradient. Reported at the other one's call, the line to change."""
    copies = [(k, script.key(v.args[0])) for k, vs in script.assignments.items() for v in vs
              if isinstance(v, ast.Call) and v.args and
              (dotted(v.func) or "") in DEEP_COPIES]
    for opt, models in held.items():
        for model in models:
            # the other one of a copy and its original (either may be the one stepped)
            original = next((b if a == model else a for a, b in copies if model in (a, b)
                             and (b if a == model else a) not in models), None)
            if not original:
                continue
            reach = trace(script, target, call, depth=12,
                          focus=Focus(model, frozenset(), aliases(script, model)))
            if reach[0] or reach[1]:
                continue
            if not trace(script, target, call, depth=12,
                         focus=Focus(original, frozenset(), aliases(script, original)))[0]:
                continue
            kin = "its deep copy" if (model, original) in copies else \
                f"the model {original} was copied from"
            site = next((c for scope in (loop, script.enclosing_function(call) or loop)
                         for c in walk_local(scope) if isinstance(c, ast.Call) and
                         script.key(c.func) == original and c.lineno <= call.lineno), None)
            if site is None:
                continue
            return Hit(site, f"the loss that backward() runs on at {script.at(call.lineno)} "
                             f"is computed with {original}, but {opt} steps {model}, "
                             f"{kin}, which the loss never reaches: {model}'s parameters get no "
                             f"gradient and never change",
                       fix=f"call {model} here, or give {opt} the parameters of {original}")
    return None


def _copies_model_output(script: Script, cut: ast.AST) -> bool:
    """``cut`` copies into a new tensor (``torch.tensor(x)``) a value the file shows to come
    from a model: traced back through the file's calls to a model's output or parameters
    (a scoring helper handed the network's predicted mean and spread), not merely a parameter
    whose callers are unknown (``torch.tensor(margin)``)."""
    if not (isinstance(cut, ast.Call) and cut.args):
        return False
    for model in sorted(script.models)[:6]:
        focus = Focus(model, frozenset(), aliases(script, model))
        if trace(script, cut.args[0], cut, depth=12, focus=focus)[0]:
            return True
    return False


def _cut_term(script: Script, call: ast.Call, target: ast.AST) -> Hit | None:
    """A summed term of the loss (:mod:`trainguard.lint.terms`) that reaches no model except
    through cuts while the loss as a whole reaches one uncut: the term adds no gradient, so what
    it was computed from (a policy head whose log-probabilities went through ``.item()``, next
    to a value loss that trains the shared trunk) does not learn from it. A term that trains
    one model and is cut from another (an actor's term with the critic's advantage detached)
    is not one. A cut of a value (``.item()``, ``float()``, ``.detach()``) must be among the
    term's cuts, or a new tensor copied from a value the file shows a model computed
    (``torch.tensor(x)`` in a helper handed the prediction): a new tensor made from a value the
    file does not show is not enough."""
    terms = summed_terms(script, target, call)
    if len(terms) < 2:
        return None
    for term, where in terms:
        uncut, cuts = trace(script, term, where, depth=12)
        if cuts and all(how == ".data" for _, how in cuts):
            continue  # a term made from a parameter's .data: TG206's (data_terms)
        if uncut or not cuts:
            continue
        # (a cut of a value, or else a copy of what the file shows a model computed)
        shown = cuts[0] if any(not h.startswith("a new tensor") for _, h in cuts) else \
            next(((c, h) for c, h in cuts if _copies_model_output(script, c)), None)
        if shown is not None:
            cut, how = shown
            if _rebuild_reported(script, target, cut):
                return None
            text = ast.unparse(term)
            text = f"the term {text}" if len(text) <= 40 else "a term"
            fix = "use the tensor itself in this term, not a copy cut from the graph (.item(), " \
                "float(), .detach()); torch.stack a list of tensors"
            if how.startswith("a new tensor"):  # torch.tensor(x) copies without history
                fix = "hand the tensor on as it is (torch.as_tensor(x) returns a tensor with " \
                    "its history; torch.tensor(x) copies it into a new leaf)"
            elif "argm" in how or "integer" in how:  # indices: no gradient is defined for them
                fix = "compute this term from probabilities (softmax), not from class indices"
            elif "comparison" in how:  # a step function: zero gradient almost everywhere
                fix = "compute this term from the values themselves (min/max, clamp, or a " \
                    "sigmoid of the difference), not from comparisons of them"
            return Hit(cut, f"{text} of the loss that backward() runs on at "
                            f"{script.at(call.lineno)} reaches the model only through {how}: it "
                            f"adds no gradient, so the layers it was computed from do not learn "
                            f"from it", fix=fix)
    return None


