"""TG305 scheduler-before-optimizer: ``scheduler.step()`` before ``optimizer.step()``, or an
epoch scheduler stepped every batch.

Since PyTorch 1.1 ``lr_scheduler.step()`` must follow ``optimizer.step()``; called first, the
first value of the schedule is skipped
(https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate). A ``StepLR``,
``MultiStepLR`` or ``ExponentialLR`` with literal epoch counts stepped inside the batch loop of
an epoch loop runs its schedule once per batch; the epoch loop may be around every call of the
function that holds the batch loop (``train_one_epoch``, a trainer's ``__call__``). OneCycleLR, CyclicLR and warmup (Lambda)
schedulers are per batch by design and stay silent; so do schedules sized from the loader
(``step_size=len(loader) * 30``) and ``ExponentialLR`` with ``gamma >= 0.99`` (a per-iteration
decay). A ``ReduceLROnPlateau`` stepped per batch counts when its patience (in epochs: not
longer than the run) is fixed. The scheduler may be built from a config, a registry, a
factory, or wrapped in a policy that forwards to it (:mod:`trainguard.lint.schedules`). The schedule's arguments and
the epoch count may come from constants, from an estimator's ``__init__`` defaults
(``gamma=self.gamma``), from a config every call passes (``settings["step_size"]``,
``self.cfg["epochs"]``) or from an ``argparse`` option's default (the namespace parsed
in place, returned by a helper, or handed in by every call: ``main(get_args())``, ``train(args)``). Only learning-rate
schedulers count: a ``schedule`` built by anything else (a pipeline-parallel
schedule) is not one. The per-batch step may be reached through a helper, a method or a
callback or policy hook the batch loop calls, or be a handler of a training engine's events
(:mod:`trainguard.lint.handlers`: ``@trainer.on(Events.EPOCH_STARTED)`` runs before the
engine's ``optimizer.step()``, ``ITERATION_COMPLETED`` once per batch). A scheduler handed to
the training function or to a trainer's ``__init__`` is the one every call passes
(:func:`trainguard.lint.schedules.schedule_settings`); a loop that holds another training loop
(``for phase in ("train", "val")``) is no batch loop, and no epoch loop either: around a batch
loop inside ``while steps < max_steps:`` it leaves a run counted in updates (piergiaj/pytorch-i3d).
With gradient accumulation (the optimizer steps under ``if (i + 1) % accum == 0:``), a
scheduler stepped in every iteration whose length was counted in optimizer updates (divided by
that ``accum``) runs ``accum`` times too fast (starVLA/starVLA#210).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from trainguard.lint.astutil import (SCOPES, assigned_pairs, dotted, encloses, exclusive,
                                     ifs_between, parent, walk_local)
from trainguard.lint.dataflow import last_assignment
from trainguard.lint.consts import UNKNOWN, resolve
from trainguard.lint.events import Event, events
from trainguard.lint.handlers import BEFORE_STEP, PER_ITERATION, engine_handlers, handler_body
from trainguard.lint.regions import training_loops
from trainguard.lint.rules import Hit
from trainguard.lint.schedules import schedule_settings, span_of
from trainguard.lint.script import Script

CODE = "TG305"
SKIP_IN_TESTS = True  # about a training run; test files are not runs
_EPOCH_SCHEDULERS = {"StepLR", "MultiStepLR", "ExponentialLR"}
_AFTER = {"STARTED": "EPOCH_COMPLETED", "EPOCH_STARTED": "EPOCH_COMPLETED",
          "ITERATION_STARTED": "ITERATION_COMPLETED"}


def check(script: Script) -> Iterator[Hit]:
    loops = training_loops(script)
    for loop in loops:
        evs = events(script, loop.body)  # type: ignore[attr-defined]
        any_step = next(i for i, e in enumerate(evs) if e.kind == "step")
        for k, e in enumerate(evs):
            if e.kind != "sched":
                continue
            own = _own_first_step(script, evs, e)  # (a warm-up optimizer's steps came first)
            first_step = own if own is not None else any_step
            if k >= first_step or _skips_first_pass(script, e.via or e.node, loop):
                continue
            key = (_handed_scheduler(script, e.node) if e.via else None) or e.key or ""
            if (script.schedulers.get(key) or script.scheduler_lists.get(key) or
                    schedule_settings(script, key, e.node)[0]) == "ReduceLROnPlateau":
                continue
            hook = _hook_override(script, e)
            through = f" (through the call at {script.at(e.via.lineno)})" \
                if e.via is not None and not e.foreign else ""
            if hook:
                through += f", in the {script.enclosing_function(e.node).name} hook"  # type: ignore
            what = f"{key}.step()" if key not in script.scheduler_lists else \
                f"{ast.unparse(e.node.func)}() for each scheduler of {key}"  # type: ignore
            # two calls the loop itself makes, in the wrong order (``model.update_lr()`` before
            # ``model.optimize()``): the fault is where the loop calls them
            # (unless the step sits in a callback's hook that the call dispatches to: the
            # hook chosen is the fault, the dispatch serves every callback)
            at = e.via if e.via is not None and not e.foreign and \
                evs[first_step].via is not e.via and not hook and \
                next(iter(script.enclosing_loops(e.via)), None) is loop else e.node
            yield Hit(at,
                      f"{what} runs before the first {evs[first_step].key}.step() "
                      f"({evs[first_step].place(script)}){through}: the schedule's first "
                      f"learning rate is skipped",
                      fix=f"call {what.split(' for each')[0]} after optimizer.step()" +
                      (" (in a hook that runs after the optimizer steps)" if hook else ""))
            break
    yield from _handler_steps(script)
    yield from _per_micro_batch(script, loops)
    alternatives: set[int] = set()  # per-batch steps configured as the per-epoch one's other
    yield from _stepped_twice(script, loops, alternatives)
    nested = {id(p) for x in loops for p in script.enclosing_loops(x)}
    for loop in loops:
        if id(loop) in nested:
            continue  # a training loop runs inside it: it is no batch loop (`for phase in ...`)
        around = _epoch_loops(script, loop)
        while around and _over_phases(around[0]):
            around = around[1:]  # `for phase in ["train", "val"]`: no epochs
        if not around or not isinstance(around[0], (ast.For, ast.AsyncFor)):
            continue  # no epoch loop around it (a `while step < N` loop counts iterations)
        epochs = _epoch_count(script, around)
        for call, key, via in _batch_steps(script, loop, loops):
            if id(call) in alternatives:
                continue
            cls, settings = schedule_settings(script, key or "", call)
            if cls in _SIZED and epochs is not UNKNOWN:
                span = span_of(script, key or "", call)
                if isinstance(span, int) and 0 < span <= epochs:
                    through = f" (through the call at {script.at(via.lineno)})" if via else ""
                    yield Hit(call, f"{key} is a {cls} sized in epochs (its schedule spans "
                                    f"{span} steps, the run {epochs} epochs), but it is stepped "
                                    f"inside the batch loop at {script.at(loop.lineno)}"
                                    f"{through}: it runs its whole course in the first {span} "
                                    f"batches",
                              fix=f"call {key}.step() once per epoch, after the batch loop (or "
                                  f"size it in batches: epochs * len(loader))")
                continue
            if cls not in _EPOCH_SCHEDULERS and cls != "ReduceLROnPlateau" or \
                    settings is UNKNOWN or _per_iteration_decay(cls, settings):
                continue
            length = _schedule_length(cls, settings)
            if length is not UNKNOWN and epochs is not UNKNOWN and length > epochs:
                continue  # longer than the run in epochs: it counts batches
            through = f" (through the call at {script.at(via.lineno)})" if via else ""
            if cls == "ReduceLROnPlateau":
                yield Hit(call, f"{key} is a ReduceLROnPlateau with patience {length}, "
                                f"stepped inside the batch loop at {script.at(loop.lineno)}"
                                f"{through}: its patience counts batches, so the learning "
                                f"rate is cut after {length} batches without improvement "
                                f"instead of {length} epochs",
                          fix=f"call {key}.step(val_loss) once per epoch, after the batch loop")
                continue
            sized = "" if length is UNKNOWN or epochs is UNKNOWN else \
                f" (its schedule spans {length} steps, the run {epochs} epochs)"
            yield Hit(call, f"{key} is a {cls}, a per-epoch schedule{sized}, but it is "
                            f"stepped inside the batch loop at "
                            f"{script.at(loop.lineno)}{through}: it runs once per batch",
                      fix=f"call {key}.step() once per epoch, after the batch loop")


_SIZED = {"CosineAnnealingLR", "LinearLR", "PolynomialLR", "SequentialLR"}


def _hook_override(script: Script, e: Event) -> bool:
    """``e`` (reached through ``e.via``) sits in a method that overrides one of its class's
    base (``LRDecay(Callback).on_epoch_start``) and that ``e.via`` does not call directly
    (``self._emit("on_epoch_start")``, a callback list's ``on_epoch_start``): a callback hook.
    The call fires the event for every callback; the scheduler step was put in a hook that
    runs before the optimizer steps, and that hook is what to change."""
    func = script.enclosing_function(e.node)
    cls = script.enclosing_class(func) if func is not None else None
    if e.via is None or e.foreign or cls is None or \
            any(t.func is func for t in script.targets(e.via)):
        return False
    for base in cls.bases:
        ref = script.graph.class_named(dotted(base))
        if ref is not None and ref.node is not cls and \
                script.graph.method(ref, func.name) is not None:  # type: ignore[union-attr]
            return True
    return False


def _skips_first_pass(script: Script, node: ast.AST, loop: ast.AST) -> bool:
    """``node`` runs only under a test that is false in the loop's first pass, so it first runs
    after a whole iteration (and its optimizer step): the loop's counter over ``range(n)`` or
    ``enumerate(...)`` past 0 (``if epoch > 0:``, ``if epoch:``), or an optimizer's state,
    which is empty until its first step (``if opt.state:``)."""
    counter = _first_pass_counter(loop)
    for p in ifs_between(node, loop):
        if any(encloses(b, node) for b in p.body) and any(
                _false_at_start(script, t, counter) for t in _conjuncts(p.test)):
            return True
    return False


def _conjuncts(test: ast.expr) -> list[ast.expr]:
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [t for v in test.values for t in _conjuncts(v)]
    return [test]


def _first_pass_counter(loop: ast.AST) -> str | None:
    """The name that is 0 in the first pass of ``for epoch in range(n)`` (``range(0, n)``) or
    ``for i, x in enumerate(xs)`` (no start)."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or not isinstance(loop.iter, ast.Call):
        return None
    call, target = loop.iter, loop.target
    name = dotted(call.func)
    if name == "range" and 2 <= len(call.args) <= 3 and not (
            isinstance(call.args[0], ast.Constant) and call.args[0].value == 0):
        return None
    if name == "enumerate" and len(call.args) == 1 and not call.keywords and \
            isinstance(target, ast.Tuple) and target.elts:
        target = target.elts[0]
    elif name != "range" or call.keywords or not 1 <= len(call.args) <= 3:
        return None
    return target.id if isinstance(target, ast.Name) else None


def _false_at_start(script: Script, test: ast.expr, counter: str | None) -> bool:
    if isinstance(test, ast.Attribute) and test.attr == "state":
        return script.is_optimizer(script.key(test.value))  # if opt.state: (stepped once)
    if isinstance(test, ast.Call) and dotted(test.func) == "len" and len(test.args) == 1:
        return _false_at_start(script, test.args[0], counter)
    if counter is None:
        return False
    if isinstance(test, ast.Name):
        return test.id == counter  # if epoch:
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(right, ast.Name) and right.id == counter:  # 0 < epoch
        left, right = right, left
        op = {ast.Lt: ast.Gt(), ast.LtE: ast.GtE()}.get(type(op), op)
    if not (isinstance(left, ast.Name) and left.id == counter and
            isinstance(right, ast.Constant) and isinstance(right.value, int)):
        return False
    bound = right.value
    return isinstance(op, ast.Gt) and bound >= 0 or isinstance(op, ast.GtE) and bound >= 1 or \
        isinstance(op, ast.NotEq) and bound == 0


def _own_first_step(script: Script, evs: list[Event], sched: Event) -> int | None:
    """The index of the first step of the optimizer ``sched``'s scheduler was built on
    (``StepLR(joint_optimizer, ...)``), when the loop steps it; None when unknown."""
    built = [v for v in script.assignments.get(sched.key or "", [])
             if isinstance(v, ast.Call) and v.args]
    owner = script.key(built[0].args[0]) if len(built) == 1 else None
    return next((i for i, e in enumerate(evs) if e.kind == "step" and e.key == owner),
                None) if owner else None


def _epoch_loops(script: Script, loop: ast.AST) -> list[ast.AST]:
    """The loops around a batch loop, innermost first: in its function, or, when its function
    holds no loop around it (``def train_one_epoch(...)``, a trainer's ``__call__``), around
    the calls of that function, when every call sits in one."""
    kinds = (ast.For, ast.AsyncFor, ast.While)
    around = [p for p in script.enclosing_loops(loop) if isinstance(p, kinds)]
    func = script.enclosing_function(loop)
    if around or func is None:
        return around
    sites = script.graph.sites(func)
    if not sites and func.name == "__call__":
        sites = script.graph.instance_sites(func)
    outer = [[p for p in script.enclosing_loops(s) if isinstance(p, kinds)] for s in sites]
    return outer[0] if outer and all(outer) else []


def _helper_local(script: Script, e: Event, key: str) -> bool:
    """The step runs in a function the loop calls (``via``) and ``key`` names a local variable
    of that function (assigned there, no parameter): the helper's own scheduler (a warmup
    ``LambdaLR`` built inside ``train_one_epoch``), whatever the caller's variable of the same
    name holds."""
    if e.via is None or "." in key:
        return False
    func = script.enclosing_function(e.node)
    if func is None:
        return False
    params = {a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs}
    if key in params:
        return False
    return any(isinstance(n, ast.Name) and n.id == key and isinstance(n.ctx, ast.Store)
               for n in walk_local(func))


def _stepped_twice(script: Script, loops: list[ast.AST], alternatives: set[int]
                   ) -> Iterator[Hit]:
    """One scheduler stepped both once per batch (in a training loop, or a helper it calls) and
    once per epoch (in the loop around it, after the batch loop): whatever its schedule counts,
    every epoch advances it by the number of batches plus one. Reported at the step the
    schedule's kind does not count (the per-batch one, or the per-epoch one of a OneCycleLR or
    CyclicLR); silent when both sit under conditions (``if interval == "step"`` beside ``if
    interval == "epoch"``: one is configured off), and the per-batch step is then added to
    ``alternatives`` (ids of nodes), which the per-epoch-schedule test passes over too."""
    done: set[int] = set()
    for outer in loops:
        batch: dict[str, Event] = {}
        epoch: dict[str, Event] = {}
        for e in events(script, outer.body):  # type: ignore[attr-defined]
            if e.kind != "sched" or not e.key or e.foreign:
                continue
            around = [x for x in script.enclosing_loops(e.node) if x is not outer]
            if e.via is not None:
                around += [x for x in script.enclosing_loops(e.via) if x is not outer]
            if any(x in loops for x in around):
                batch.setdefault(e.key, e)
            elif not around:  # (not in a loop over callbacks or phases)
                epoch.setdefault(e.key, e)
        for key in batch.keys() & epoch.keys():
            b, ep = batch[key], epoch[key]
            if _helper_local(script, b, key) or _helper_local(script, ep, key):
                continue  # a name local to the helper that steps it: another scheduler
            if exclusive(b.via or b.node, ep.via or ep.node) or \
                    (_conditional(b.node) and _conditional(ep.node)):
                alternatives.add(id(b.node))
                continue
            if id(b.node) in done:
                continue
            done.add(id(b.node))
            cls, _ = schedule_settings(script, key, b.node)
            by_batch = cls in ("OneCycleLR", "CyclicLR")
            at, other = (ep, b) if by_batch else (b, ep)
            yield Hit(at.site,
                      f"{key} ({f'a {cls}' if cls else 'a scheduler'}) is stepped once per batch "
                      f"({b.place(script)}) and again once per epoch ({ep.place(script)}): each "
                      f"epoch advances the schedule by the number of batches plus one, so it "
                      f"reaches its milestones after a fraction of the planned "
                      f"{'batches' if by_batch else 'epochs'}",
                      fix=f"step {key} in one place only, once per "
                          f"{'batch' if by_batch else 'epoch'}: remove this call and keep the "
                          f"one at {other.place(script)}")


def _conditional(node: ast.AST) -> bool:
    """``node`` runs under an ``if`` inside its innermost loop (or function)."""
    n = node
    while (p := parent(n)) is not None and not isinstance(p, (ast.For, ast.AsyncFor, ast.While)) \
            and not isinstance(p, SCOPES):
        if isinstance(p, ast.If) and n is not p.test:
            return True
        n = p
    return False


def _handler_steps(script: Script) -> Iterator[Hit]:
    """A scheduler stepped by a handler of a training engine's events
    (:mod:`trainguard.lint.handlers`): at ``EPOCH_STARTED`` (or ``STARTED``,
    ``ITERATION_STARTED``) it runs before the step function's ``optimizer.step()``; at an
    iteration event, once per batch. Reported where the handler is attached: the event is the
    cause."""
    for h in engine_handlers(script):
        for e in events(script, handler_body(h.func)):
            if e.kind != "sched" or e.foreign or not isinstance(e.node, ast.Call):
                continue
            cls, settings = schedule_settings(script, e.key or "")
            if cls is None:
                continue  # not a torch scheduler the file builds (ignite's own wrappers)
            stepped = f"{e.key}.step() at {script.at(e.node.lineno)}"
            if h.event in BEFORE_STEP and cls != "ReduceLROnPlateau" and not e.node.args \
                    and not e.node.keywords:
                where = f" (the step function {h.step_function.name} at " \
                        f"{script.at(h.step_function.lineno)})" if h.step_function else ""
                yield Hit(h.site, f"{stepped} runs at Events.{h.event}, before the engine's "
                                  f"optimizer.step(){where}: the schedule's first learning "
                                  f"rate is skipped",
                          fix=f"attach it to Events.{_AFTER[h.event]}")
                break
            if h.event in PER_ITERATION and _epoch_schedule(cls, settings, h.epochs):
                yield Hit(h.site, f"{e.key} is a {cls}, a per-epoch schedule, but "
                                  f"{stepped} runs at Events.{h.event}: once per batch",
                          fix="attach it to Events.EPOCH_COMPLETED")
                break


def _epoch_schedule(cls: str | None, settings: object, epochs: object) -> bool:
    """A schedule whose steps count epochs: a per-epoch class with fixed settings, not longer
    than the run when both are known."""
    if cls not in _EPOCH_SCHEDULERS or settings is UNKNOWN or \
            _per_iteration_decay(cls, settings):  # type: ignore[arg-type]
        return False
    length = _schedule_length(cls, settings)  # type: ignore[arg-type]
    return length is UNKNOWN or epochs is UNKNOWN or not length > epochs  # type: ignore[operator]


def _batch_steps(script: Script, loop: ast.AST, loops: list[ast.AST]
                 ) -> Iterator[tuple[ast.AST, str | None, ast.Call | None]]:
    """``(node, scheduler key, call site)`` for each ``.step()`` the batch loop runs once per
    batch: written in it, or reached through a helper, a method or a callback hook called in it
    (the key then in the loop's terms)."""
    for call in walk_local(loop):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                call.func.attr == "step" and _inner_most(script, call, loop):
            yield call, script.key(call.func.value), None
    seen: set[int] = set()
    for e in events(script, loop.body):  # type: ignore[attr-defined]
        if e.kind == "sched" and e.via is not None and not e.foreign and \
                _per_batch(script, e.via, loop, loops) and id(e.node) not in seen:
            seen.add(id(e.node))
            yield e.node, _handed_scheduler(script, e.node) or e.key, e.via


def _handed_scheduler(script: Script, step: ast.AST) -> str | None:
    """``self.lr_scheduler.step()`` in a wrapper or callback class that was handed the scheduler
    (``LRPolicy(sched)``, ``self.lr_scheduler = lr_scheduler`` in ``__init__``): the key of the
    scheduler built where the class is instantiated."""
    recv = step.func.value if isinstance(step, ast.Call) and \
        isinstance(step.func, ast.Attribute) else None  # type: ignore[attr-defined]
    cls = script.enclosing_class(step)
    if not (isinstance(recv, ast.Attribute) and isinstance(recv.value, ast.Name) and
            recv.value.id == "self" and cls is not None):
        return None
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and
                 f.name == "__init__"), None)
    if init is None:
        return None
    params = {a.arg: a for a in init.args.args[1:]}
    for n in ast.walk(init):
        if not isinstance(n, ast.Assign):
            continue
        for target, value in assigned_pairs(n.targets, n.value):  # self.a, self.s = a, s
            if isinstance(value, ast.Name) and value.id in params and \
                    script.key(target) == f"self.{recv.attr}":
                found = {script.key(v)
                         for v in script.graph._param_values(init, params[value.id])}
                found = {k for k in found if k in script.schedulers}
                return found.pop() if len(found) == 1 else None
    return None


def _epoch_count(script: Script, around: list[ast.AST]) -> object:
    """N for ``for epoch in range(N)`` (or ``range(start, N)``) around the batch loop when the
    program fixes N (a constant, a config entry, an option's default); loops over a literal
    list in between (``for phase in ["train", "val"]``) are passed through."""
    for loop in around:
        if isinstance(loop, (ast.For, ast.AsyncFor)) and \
                isinstance(loop.iter, (ast.List, ast.Tuple)) and \
                all(isinstance(e, ast.Constant) for e in loop.iter.elts):
            continue
        return _range_count(script, loop) if isinstance(loop, (ast.For, ast.AsyncFor)) \
            else UNKNOWN
    return UNKNOWN


def _range_count(script: Script, loop: ast.For | ast.AsyncFor) -> object:
    it = loop.iter
    if isinstance(it, ast.Call) and dotted(it.func) == "range" and it.args:
        stop = resolve(script, it.args[-1] if len(it.args) <= 2 else it.args[1])
        start = resolve(script, it.args[0]) if len(it.args) >= 2 else 0
        if isinstance(stop, int) and isinstance(start, int):
            return stop - start
    return UNKNOWN


def _schedule_length(cls: str | None, settings: dict) -> object:
    """How many steps the schedule spans: StepLR's step_size, MultiStepLR's last milestone,
    ReduceLROnPlateau's patience (10 by default)."""
    v = settings.get({"StepLR": "step_size", "MultiStepLR": "milestones",
                      "ReduceLROnPlateau": "patience"}.get(cls or "", ""), UNKNOWN)
    if cls == "ReduceLROnPlateau" and "patience" not in settings:
        return 10
    if isinstance(v, list):
        return max(v) if v and all(isinstance(x, (int, float)) for x in v) else UNKNOWN
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else UNKNOWN


def _over_phases(loop: ast.AST) -> bool:
    """``for phase in ["train", "val"]``: a loop over a literal of strings (phases, splits)."""
    it = getattr(loop, "iter", None)
    return isinstance(it, (ast.List, ast.Tuple)) and bool(it.elts) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in it.elts)


def _per_iteration_decay(cls: str | None, settings: dict) -> bool:
    """``ExponentialLR`` with ``gamma >= 0.99``: a decay per iteration by design."""
    gamma = settings.get("gamma")
    return cls == "ExponentialLR" and isinstance(gamma, (int, float)) and gamma >= 0.99


def _per_batch(script: Script, call: ast.AST, loop: ast.AST, loops: list[ast.AST]) -> bool:
    """``call`` runs once per iteration of the batch ``loop``: in it, and at most inside a loop
    that is no training loop (``for cb in self.callbacks:``)."""
    inner = script.enclosing_loops(call)
    if loop not in inner:
        return False
    return not any(x in loops for x in inner[:inner.index(loop)])


def _inner_most(script: Script, call: ast.AST, loop: ast.AST) -> bool:
    loops = script.enclosing_loops(call)
    return bool(loops) and loops[0] is loop


def _per_micro_batch(script: Script, loops: list[ast.AST]) -> Iterator[Hit]:
    """Gradient accumulation: the optimizer steps only under a remainder test of a counter the
    loop advances (``if (micro + 1) % accum == 0:``), while its scheduler steps in every
    iteration, outside that test, and the schedule's length was counted in optimizer updates
    (an argument divided by the same ``accum``: ``epochs * len(loader) // accum``): the
    schedule advances once per micro-batch and runs ``accum`` times too fast
    (starVLA/starVLA#210). A schedule sized in micro-batches keeps pace and stays silent."""
    for loop in loops:
        evs = events(script, loop.body)  # type: ignore[attr-defined]
        for step in (e for e in evs if e.kind == "step" and not e.foreign):
            gate, divisor = _accumulation_gate(step.via or step.node, loop)
            if gate is None:
                continue
            for e in evs:
                at = e.via or e.node
                if e.kind != "sched" or e.foreign or not e.key or encloses(gate, at) or \
                        _conditional(at) or not _same_loop(script, at, gate) or \
                        not _sized_in_updates(script, e.key, divisor, at):
                    continue
                yield Hit(e.site, f"{step.key or 'the optimizer'}.step() runs only when "
                                  f"{ast.unparse(gate.test)} ({script.at(gate.lineno)}), but "
                                  f"{e.key}.step() runs every micro-batch, and its schedule "
                                  f"was sized in optimizer updates (divided by {divisor}): it "
                                  f"runs {divisor} times too fast and ends early",
                          fix=f"move {e.key}.step() under the same if, after "
                              f"{step.key or 'optimizer'}.step()")
                return


def _accumulation_gate(node: ast.AST, loop: ast.AST) -> tuple[ast.If | None, str]:
    """The ``if`` inside ``loop`` around ``node`` whose test takes a remainder of a value the
    loop changes (``(i + 1) % accum``), and the divisor's source."""
    n = node
    while (p := parent(n)) is not None and p is not loop and not isinstance(p, SCOPES):
        if isinstance(p, ast.If) and n in p.body:
            stored = {x.id for x in ast.walk(loop) if isinstance(x, ast.Name) and
                      isinstance(x.ctx, ast.Store)}
            for m in ast.walk(p.test):
                if isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mod) and \
                        stored & {x.id for x in ast.walk(m.left) if isinstance(x, ast.Name)}:
                    return p, ast.unparse(m.right)
        n = p
    return None, ""


def _same_loop(script: Script, a: ast.AST, b: ast.AST) -> bool:
    loops_a, loops_b = script.enclosing_loops(a), script.enclosing_loops(b)
    return bool(loops_a) and bool(loops_b) and loops_a[0] is loops_b[0]


def _sized_in_updates(script: Script, key: str, divisor: str, at: ast.AST) -> bool:
    """The scheduler ``key`` is built from a value divided by ``divisor`` (followed through
    the names its construction reads, two assignments deep)."""
    todo = [v for v in script.assignments.get(key, []) if isinstance(v, ast.Call)]
    seen: set[int] = set()
    for _ in range(3):
        nxt = []
        for expr in todo:
            if id(expr) in seen:
                continue
            seen.add(id(expr))
            for m in ast.walk(expr):
                if isinstance(m, ast.BinOp) and isinstance(m.op, (ast.Div, ast.FloorDiv)) and \
                        ast.unparse(m.right) == divisor:
                    return True
                if isinstance(m, ast.Name) and isinstance(m.ctx, ast.Load):
                    value = last_assignment(m.id, m)
                    if value is not None:
                        nxt.append(value)
        todo = nxt
    return False
