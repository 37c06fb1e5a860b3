"""TG304 params-not-in-optimizer: parameters that receive gradients but no optimizer updates.

What it watches: at the end of optimizer steps 2, 7, 13, 25, 49 and then every 32 steps (settled
steps included: ``on_step`` is one of its ``always`` events), the parameters of each model seen (the
outermost modules called, and modules they keep in a plain list, tuple or dict attribute): those
that require grad and hold a gradient are compared with the parameters of every optimizer that has
stepped. Each such suspect gets a post-accumulate-grad hook
(``Tensor.register_post_accumulate_grad_hook``) and a note of its value (version counter and sum).
Five steps later (or at the end of the run) it is reported when it received a gradient since (a
``.grad`` left over from an earlier phase does not count), its value did not change (a parameter
updated by hand is being trained), and no optimizer holds it: neither one that has stepped nor,
looked up once with ``gc`` on this rare path, one that exists but has not stepped yet (a backbone
optimizer that starts after a warm-up). While a suspect waits, the loop is not settled.

When it fires: a model trained by an optimizer has parameters that receive gradients but that no
optimizer holds: a head added after the optimizer was built, a layer replaced after ``optimizer =
Adam(model.parameters())``, a submodule kept in a plain list, a frozen backbone unfrozen later
without ``add_param_group``, a part left out of the optimizer but not frozen. Also: a separate model
in series with a trained one on the way to the loss that no optimizer holds (a classifier called on
an encoder's output, a decoder, an embedding table in front of the model, with the optimizer built
over one of them only), in training mode: a trained model's outermost call took its output (directly
or through other modules), or it took a trained model's output (likewise) and a loss was computed on
its output or a later module's, while the trained model's output went to no loss directly and no
loss compared two of its outputs (a perceptual-style loss network); or losses of a trained model's
outputs were computed inside its call or passed to it, and its own parameters are applied after them
in its output (learned multi-task loss weights, ifzhang/FairMOT#19) or inside them (a loss module
with its own parameters, such as an ArcFace margin head computing the cross-entropy in its call: its
parameters are leaves of the loss's graph, found within 64 nodes, and it took no floating target of
the prediction's shape). Read from the ``Made`` stamps on outermost outputs and a mark on each
watched loss's ``grad_fn``. Also: a model no optimizer holds receives gradients while no optimizer
that steps (in the last 8 steps: an earlier phase's optimizer, still alive with its last gradients,
does not count) has a gradient on any of its parameters (None, or zeros): an optimizer built once
for the first model of a k-fold or hyper-parameter loop that builds a new model each time, or built
before the model was replaced by one loaded from a checkpoint (NVIDIA/Megatron-LM#174).

Silent on: frozen parameters (``requires_grad=False``; also held by an optimizer), parameters that
never get a gradient (unused branches, EMA teachers), parameters updated by other means (by hand, a
dual variable), separate models no optimizer trains (evaluation, feature extraction, a teacher left
trainable, a loss network applied to a prediction that is itself a loss's input, a module in eval
mode) while some stepping optimizer's own parameters have gradients, GANs and other multi-optimizer
setups where each part has its optimizer; parameters the optimizer's own list filtered out (``[p for
p in model.parameters() if id(p) not in bn_ids]``: ``core/param_filter.py``).

Parameters added to a model already built: at the line that added them (or the call in the first
function outwards holding an optimizer, or a local object keeping one, a trainer; registered
by the model's own call, a submodule built in ``forward()`` on the first call: where the
optimizer was built, ``core/left_out.py``); left out of groups written by hand: at the last group
listed (generated from a table: at its last entry, ``core/group_table.py``; their lists filled by
a loop that sorts the model's parameters under conditions: at its last conditional append,
``core/group_sorter.py``); a stale optimizer whose function built the model class again after
it, or rebound the name it took ``.parameters()`` from (``net = deepen(net)``): at that line. A
separate model beside an optimizer given some parameters twice (line/open-universe#5): at the line
that wrote that list.
Cost: at steps 2, 7, 13, 25, 49, then every 32, one pass over the models' parameters and the
optimizers' parameter ids; per checked outermost forward and loss, 32 graph nodes per input and 64
per output (4) at most; per suspect, one heap scan for optimizers not stepped yet.

Reference: ``torch.optim`` "Constructing it" https://pytorch.org/docs/stable/optim.html; an encoder
and a classifier with the optimizer over both (https://r2d.info/2019/01/15/pytorch/).
"""

from __future__ import annotations

import sys
import weakref
from itertools import islice
from typing import Any

from trainguard.sanitize.core.bounds import live_objects
from trainguard.sanitize.core.check import Check
from trainguard.sanitize.core.callstack import cause_line, running_line, user_stack
from trainguard.sanitize.core.frames import frame_location, user_frames, user_location
from trainguard.sanitize.core.graph import (LOSS_OUT, node_metadata, stamped_models,
                                            weighs_losses)
from trainguard.sanitize.core.left_out import in_model_call, left_out_cause
from trainguard.sanitize.core.loss_path import Flow, Suspect, own_leaf_in, takes_a_target_like
from trainguard.sanitize.core.param_filter import filtered_out
from trainguard.sanitize.core.params import (ParamMap, all_parameters, doubled_parameters, held_ids,
                                             no_gradients)
from trainguard.sanitize.core.records import graph_tensors
from trainguard.sanitize.core.source import built_again, params_line

_CONFIRM_AFTER = 5  # steps between noting a suspect and confirming it
_EVERY = 32  # the most steps between two looks
_RECENT = 8  # optimizers that stepped within this many steps are the ones stepping now


class ParamsNotInOptimizer(Check):
    code = "TG304"
    stamps = "outputs"  # outputs carry Made stamps naming their model
    # Looks are made on their schedule whether or not the step is settled: a change late in a run
    # (an unfreeze in its last 30 steps) is then still looked at before the run ends.
    always = ("on_step",)

    def __init__(self, bus: Any) -> None:
        super().__init__(bus)
        self.next_step = 1  # the step before which the next look is made
        self.suspects: dict[int, Suspect] = {}  # id(param): noted at the last look
        self.done = ParamMap()  # parameters reported, or found trained some other way
        # parameter -> (the line that added it, in the function holding an optimizer when one
        # does; the innermost line when that differs, else None; the user's stack when a model's
        # call made it, else None) (on_params_added)
        self.added_at = ParamMap()
        # optimizer -> the user's line that built it (on_built): where parameters were left out
        self.built_at: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
        self.built_stacks: dict[Any, Any] = {}  # that line -> the user's stack there
        self.idle: weakref.WeakSet[Any] = weakref.WeakSet()  # optimizers found by gc, not stepped
        # optimizer -> the step count at its latest step: an optimizer of an earlier phase (a
        # pre-training run's, kept alive by a reference cycle with its scheduler) does not step
        self.last_step: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()
        self.where: Any = None  # the step line where the suspects were noted
        # What the looks read, replaced at each look after which checked steps brought a new
        # record (a settled loop repeats the same calls), and that record.
        self.flow = Flow()
        self.fresh: Flow | None = None
        # outermost call -> models whose outputs the losses computed inside it took
        self.inner_losses: dict[int, set[int]] = {}

    def _records(self) -> Flow:
        if self.fresh is None:
            self.fresh = Flow()
        return self.fresh

    def on_root_forward(self, call: Any) -> None:
        if not call.grad_enabled:
            return
        key = id(call.module)
        behind_losses = self.inner_losses.pop(key, set())  # losses computed inside this call
        for a in graph_tensors(call.args, call.kwargs):
            losses: list[bool] = []
            made_by = stamped_models(a, losses=losses) - {key}
            if made_by:
                self._records().consumed.setdefault(key, set()).update(made_by)
                if losses:  # it took a loss (or something computed from one)
                    behind_losses |= made_by
        if behind_losses and (weighs_losses(call.output, key)
                              or (not takes_a_target_like(call)
                                  and own_leaf_in(call.output, call.module))):
            # its own parameters enter after the losses (learned loss weights, uncertainty
            # weighting) or inside them (a loss module with parameters: learned class weights,
            # an ArcFace margin head): they are on the path of the loss
            self._records().weighs.setdefault(key, set()).update(behind_losses)

    def on_loss(self, call: Any) -> None:
        made_by: set[int] = set()
        if getattr(call.input, "grad_fn", None) is not None:
            made_by = stamped_models(call.input)
            self._records().loss_inputs.update(made_by)
        node = getattr(call.output, "grad_fn", None)
        if node is not None:
            meta = node_metadata(node)
            if meta is not None:
                meta[LOSS_OUT] = True
            modules = self.state.modules
            if made_by and modules and modules[0] is not call.module:
                # computed inside an outermost call (a multi-task loss module)
                self.inner_losses.setdefault(id(modules[0]), set()).update(made_by)
        if getattr(call.target, "grad_fn", None) is not None:
            self._records().loss_targets.update(stamped_models(call.target))

    def on_step(self, optimizer: Any) -> None:
        self.last_step[optimizer] = self.state.step
        step = self.state.step - 1  # steps completed before this one
        if step < self.next_step:
            return
        if self.fresh is not None:
            self.flow, self.fresh = self.fresh, None
        found = self._missing(optimizer)
        noted = self.suspects
        confirmed: list[Suspect] = []
        self.suspects = {}
        new = False
        for k, (p, *described) in found.items():
            old = noted.pop(k, None)
            if old is None or old.ref() is not p:
                if old is not None:
                    old.release()
                v = Suspect(p, *described)  # its value is read only now, when first noted
                v.watch()
                self.suspects[k] = v
                new = True
            elif not old.trained:  # a .grad left over, no new one: looked at again later
                self.suspects[k] = old
            else:
                old.release()
                if old.changed(p):
                    self.done[p] = True  # updated by other means: trained after all
                else:
                    confirmed.append(old)
        for old in noted.values():
            old.release()
        if new:
            self.where = user_location(sys._getframe(1))
            self.hold()  # check the next steps in full while it waits
        # After 1, 6, 12, 24, 48 completed steps, then every 32; a new suspect is looked at again
        # 5 steps later.
        self.next_step = step + (_CONFIRM_AFTER if new
                                 else max(_CONFIRM_AFTER, min(step, _EVERY)))
        if confirmed:
            self._report(self._not_held_by_idle(confirmed))

    def on_built(self, obj: Any, where: Any) -> None:
        if where is not None and hasattr(obj, "param_groups"):
            self.built_at[obj] = where
            if len(self.built_stacks) < 64:  # (the user's stack: rare, one per optimizer)
                self.built_stacks[where] = user_stack(sys._getframe(1))

    def on_params_added(self, module: Any, params: list, where: Any) -> None:
        # (a head assigned to a model already built, a parameter made in a hook). When a helper
        # made the change (``model = prune(model)``), the call in the function that holds the
        # optimizer (or an object that keeps it: ``trainer = Trainer(model)``) is the line
        # after which it must be rebuilt.
        optimizers = {id(o) for o in [*self.state.optimizers, *self.built_at.keys()]}
        inner, start = where, sys._getframe(1)
        for frame in user_frames(start) if optimizers else ():
            held = [*frame.f_locals.values(), *getattr(frame.f_locals.get("self"), "__dict__",
                                                       {}).values()]
            kept = [v for o in islice(frame.f_locals.values(), 256)
                    if type(o).__module__ not in ("builtins", "typing")
                    and isinstance(d := getattr(o, "__dict__", None), dict)
                    for v in islice(d.values(), 64)]
            if any(id(v) in optimizers for v in held + kept):
                where = frame_location(frame)
                break
        else:
            frame = None
        # built by the model's own call (on its first, a dry run's): the user's stack then
        lazy = user_stack(start) if in_model_call(start, frame) else None
        for p in params:
            self.added_at[p] = (where, inner if inner != where else None, lazy)

    def release(self) -> None:
        for v in self.suspects.values():
            v.release()
        self.suspects = {}

    def on_exit(self) -> None:
        """Suspects noted at the last look that got a gradient since are reported, unless an
        optimizer holds them now or their value changed. One already freed (the script's names
        are gone by now) was never held: an optimizer would have kept it alive."""
        suspects, self.suspects = self.suspects, {}
        still = []
        held = held_ids([*self.state.optimizers, *self.idle])
        for k, v in suspects.items():
            v.release()
            p = v.ref()
            if v.trained and (p is None or (k not in held and not v.changed(p))):
                still.append(v)
        if still:
            where = self.where or self.state.last_backward_where()
            self._report(self._not_held_by_idle(still), where=where)

    def _missing(self, optimizer: Any) -> dict[int, tuple[Any, str, str, str, str, str, Any]]:
        """Parameters that require grad and hold a gradient, of a model some optimizer trains
        (or of any model, when no optimizer that steps has a single gradient), that no optimizer
        holds: ``id(p) -> (p, name, model class, stale optimizer's class or "", container,
        series phrase, the line that built the optimizer they were left out of or None)``."""
        held = held_ids([*self.state.optimizers, *self.idle])
        stale: bool | None = None  # worked out only when a model no optimizer trains has grads
        out = {}
        models = list(self.state.models)
        params = {id(m): all_parameters(m) for m in models}
        trained = {id(m): m for m in models if any(id(p) in held for _, p, _ in params[id(m)])}
        for model in models:
            named = params[id(model)]
            cause = series = ""
            doubled = blame = None  # the optimizer the parameters were left out of
            if id(model) not in trained:
                # No optimizer trains this model: evaluation, a frozen teacher, feature extraction
                # -- or an optimizer left holding an earlier model's parameters, or a separate
                # module in series with a trained model that was never given to an optimizer.
                if not any(p.requires_grad and p.grad is not None for _, p, _ in named):
                    continue
                series = self.flow.series(model, trained)
                doubled = None if series else doubled_parameters(self.state.optimizers)
                if doubled is not None:  # ``a.parameters()`` twice where ``b`` was meant
                    blame, series = doubled
                if not series:
                    if stale is None:
                        stale = no_gradients([o for o in self.state.optimizers if
                                              self.last_step.get(o, 0) > self.state.step - _RECENT])
                    if not stale:
                        continue
                    cause = type(optimizer).__name__
                    blame = optimizer
            for name, p, listed in named:
                if (p.requires_grad and p.grad is not None and id(p) not in held
                        and p not in self.done):
                    blame = blame or self._holder(model, named, trained)
                    built = self.built_at.get(blame) if blame is not None else None
                    if id(model) in trained and not series and built is not None and \
                            p not in self.added_at and filtered_out(built, name, model):
                        continue  # left out by the optimizer list's own condition: a choice
                    if doubled is not None and built is not None:  # the doubled list's line
                        built = (built[0], params_line(built) or built[1], 1)
                    out[id(p)] = (p, name, type(model).__name__, cause, listed, series, built)
        return out

    def _holder(self, model: Any, named: list, trained: dict[int, Any]) -> Any:
        """The optimizer that holds some of ``model``'s parameters (for a separate model: one
        that holds a parameter of a trained model), or None; on the rare path of a suspect."""
        optimizers = [*self.state.optimizers, *self.idle]
        if id(model) in trained:
            ids = {id(p) for _, p, _ in named}
        else:
            ids = {id(p) for m in trained.values() for _, p, _ in all_parameters(m)}
        for o in optimizers:
            if any(id(p) in ids for g in o.param_groups for p in g["params"]):
                return o
        return None

    def _not_held_by_idle(self, still: list[Suspect]) -> list[Suspect]:
        """Leave out parameters an optimizer that has not stepped yet holds (``gc``, once per
        confirmation; the optimizers found count as holding from then on)."""
        from torch.optim import Optimizer

        # by type(): isinstance() may touch lazy module attributes
        for o in live_objects(lambda o: Optimizer in type(o).__mro__):
            if o not in self.idle:
                self.idle.add(o)
        held = held_ids([*self.state.optimizers, *self.idle])
        return [v for v in still if id(v.ref()) not in held]  # (a freed one: id(None))

    def _report(self, still: list[Suspect], where: Any = None) -> None:
        if not still:
            return
        for v in still:
            p = v.ref()
            if p is not None:
                self.done[p] = True
        built = next((v.built for v in still if v.built is not None), None)
        # a line that added them to a model already built (a layer swapped in by a pruning
        # helper after the optimizer was made): the cause, whatever the optimizer holds now
        added = next((a for a in (self.added_at.get(v.ref()) for v in still) if a), None)
        if built is not None and added is None and (not still[0].stale or running_line(built)):
            # the cause: the line that built the optimizer without them (a line that added them
            # to a model already built, when known, is named below instead). An optimizer built
            # for an earlier model is blamed where it was built only while the function that
            # built it still runs (it builds the models too: a fold loop); one carried into
            # another object (a copied estimator) is reported where it steps.
            where = built
        total = sum(v.numel for v in still)
        names = ", ".join(f"`{v.name}` {v.shape}" for v in still[:4])
        more = f" and {len(still) - 4} more" if len(still) > 4 else ""
        n = len(still)
        them, s = ("it", "s") if n == 1 else ("them", "")
        models = " and ".join(dict.fromkeys(v.model for v in still))
        head = (f"{n} parameter{'s' if n != 1 else ''} of {models} ({total} "
                f"value{'s' if total != 1 else ''}: {names}{more}) receive{s} gradients but no "
                f"optimizer holds {them}, so {them.replace('them', 'they')} never change{s}")
        listed = next((v.listed for v in still if v.listed), "")
        series = next((v.series for v in still if v.series), "")
        if series:
            self.report(
                f"{head}: {still[0].model} is a separate module ({series}), and "
                f"{'their' if len({v.model for v in still}) > 1 else 'its'} parameters were never "
                "given to an optimizer",
                fix=f"to train it, add its parameters to the optimizer (e.g. Adam([*model."
                    f"parameters(), *{still[0].model.lower()}.parameters()])) or make it a "
                    "submodule of the model; if it is meant to stay fixed (a feature or loss "
                    "network), call requires_grad_(False) on it instead (no gradient is then "
                    "computed for it)",
                where=where)
        elif listed:
            self.report(
                f"{head}: their modules are kept in the plain Python container `{listed}`, which "
                "nn.Module does not register, so model.parameters() does not list them",
                fix="keep submodules in nn.ModuleList / nn.ModuleDict (or register them), then "
                    "build the optimizer",
                where=where)
        elif still[0].stale and added is None:
            again = built_again(built, still[0].model) if built is not None else None
            where = (built[0], again, 1) if again else where
            why = (f"built at line {built[1]}, before this line built a new {still[0].model}"
                   if again else "it was built for an earlier model, e.g. once before a loop "
                   "that builds a new model per fold or per run")
            self.report(f"{head}; the {still[0].stale} that steps holds parameters none of which "
                        f"has a gradient ({why})", where=where,
                        fix="build the optimizer (and scheduler) after the model, each time a new "
                            "model is built")
        else:
            if added is not None and added[2] and built in self.built_stacks:
                # the optimizer's construction, in the function that also called the model
                built = cause_line(self.built_stacks[built], added[2]) or built
            where, why = left_out_cause(built, where, added, them, s, still[0].model)
            self.report(
                f"{head} ({why})", where=where,
                fix="to train them, build the optimizer after the model is complete, or add them "
                    "with optimizer.add_param_group({'params': [...]}); to keep them fixed, call "
                    "requires_grad_(False) on them (no gradient is then computed)")

