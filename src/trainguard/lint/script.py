"""``Script``: one parsed file and what the rules need to know about it.

It resolves import aliases (``F.dropout`` is ``torch.nn.functional.dropout``), names the models,
optimizers, schedulers and scalers (through names and attributes: ``net``, ``self.model``,
``model.module``), finds same-file functions behind calls (``validate(model, loader)``,
``self.evaluate()``) and says whether a node runs with grad disabled (``with torch.no_grad()``,
``inference_mode``, ``set_grad_enabled(False)``, their decorator forms, or a function only ever
called from such a region).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from functools import cached_property
from typing import TYPE_CHECKING

from trainguard.apifacts import training_read_matters
from trainguard.lint.astutil import (SCOPES, dotted, is_false, is_true, parent, set_parents,
                                     walk_local)
from trainguard.lint.project import MODE_DEPENDENT as _MODE_DEPENDENT
from trainguard.lint.project import Builder
from trainguard.lint.source import cell_line

if TYPE_CHECKING:
    from trainguard.lint.callgraph import CallGraph, Target

__all__ = ["Script", "NO_GRAD", "is_backward"]

Func = ast.FunctionDef | ast.AsyncFunctionDef

_OPTIM_CLASS = re.compile(
    r"^(torch\.optim\.|bitsandbytes\.optim\.|bnb\.optim\.|apex\.optimizers\.|transformers\.)"
    r"|^(SGD|Adam|AdamW|Adagrad|Adadelta|Adamax|RMSprop|Rprop|NAdam|RAdam|LBFGS|SparseAdam|"
    r"ASGD|Adafactor|Lion|LAMB|Lamb|FusedAdam|FusedLAMB|AdamW8bit|Adam8bit)$"
)
_OPTIM_NAME = re.compile(r"(^|[._])(optim\w*|opt|opt_\w+|\w+_opt|optimi[sz]er\w*|\w+_optimi[sz]er|"
                         r"opt[A-Z]\w*|solver)$")
_SCHED_CLASS = re.compile(r"(lr_scheduler\.|LR$|Scheduler$|ReduceLROnPlateau$|"
                          r"get_\w*schedule\w*$|schedule_with_warmup$)")
_SCHED_NAME = re.compile(r"(^|[._])\w*(sched|scheduler|lr_policy)\w*$", re.I)
_LR_SCHED_NAME = re.compile(r"(sched|scheduler|lr_policy)s?$|(^|[._])lr|lr([._]|$)", re.I)
DEEP_COPIES = ("copy.deepcopy", "deepcopy")  # (as written: ``import copy`` or ``from copy``)
_MODEL_NAME = re.compile(
    r"^(self\.)?(model|net|network|\w+_model|model_\w+|\w*net|net\w*|encoder|decoder|classifier|"
    r"backbone|generator|discriminator|net[GD]|G|D|policy|critic|actor|student|teacher|module)"
    r"_?$"  # (skorch's fitted attributes end in ``_``: ``self.module_``)
)
_MODEL_CALLS = {"train", "eval", "parameters", "named_parameters", "state_dict",
                "load_state_dict", "zero_grad", "requires_grad_", "modules", "named_modules",
                "children", "forward", "generate"}
_MODEL_CTOR = re.compile(r"^(torchvision\.models\.|timm\.create_model|torch\.nn\.Sequential|"
                         r"torch\.nn\.(Linear|Bilinear|LazyLinear|Conv[123]d|ConvTranspose[123]d|"
                         r"LSTM|GRU|RNN|Embedding|EmbeddingBag|Transformer\w*|"
                         r"MultiheadAttention)$|"
                         r"torch\.nn\.parallel\.DistributedDataParallel|torch\.nn\.DataParallel|"
                         r"torch\.compile$)|\.from_pretrained$|^(DDP|FSDP)$")
# Classes whose from_pretrained() builds no nn.Module (diffusers' DiffusionPipeline, the
# transformers pipelines, tokenizers, processors, configs, diffusers' noise schedulers).
_NOT_A_MODULE = re.compile(r"(Pipeline|Tokenizer|TokenizerFast|Processor|FeatureExtractor|"
                           r"Config|Scheduler)\.from_pretrained$")
# Top-level packages that are never a file of the user's project: the standard library and the
# libraries training scripts import most.
_NOT_PROJECT = frozenset(sys.stdlib_module_names) | {
    "torch", "torchvision", "torchaudio", "torchtext", "timm", "transformers", "numpy", "np",
    "pandas", "sklearn", "scipy", "matplotlib", "PIL", "cv2", "tqdm", "wandb", "lightning",
    "pytorch_lightning", "accelerate", "datasets", "einops", "yaml", "hydra", "omegaconf"}


class Script:
    """A parsed script. ``lines`` are the source lines (0-based list); nodes know their parent."""

    def __init__(self, *, source: str, path: str, tree: ast.Module,
                 cells: list[tuple[int, int]] | None = None) -> None:
        self.source = source
        self.path = path
        self.cells = cells or []  # a notebook's (first joined line, cell number) per code cell
        self.tree = tree
        self.lines = source.splitlines()
        self.nodes = set_parents(tree)
        self.calls = [n for n in self.nodes if isinstance(n, ast.Call)]
        self.aliases: dict[str, str] = {}
        self.functions: dict[str, list[Func]] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        stars: list[ast.ImportFrom] = []
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        self.aliases.setdefault(a.name.split(".")[0], a.name.split(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    if a.name == "*":
                        stars.append(node)
                    else:
                        self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
        if stars:
            self._star_aliases(stars)
        self._grad_memo: dict[int, bool] = {}
        self._qual_memo: dict[int, str | None] = {}
        self._backward_memo: dict[int, bool] = {}

    def at(self, line: int) -> str:
        """How a message names a line of this file: ``line 12``, or in a notebook the cell and
        the line within it (``cell 3, line 4``), as the finding's own place is printed; the
        joined script's line numbers exist in no cell."""
        cell, shown = cell_line(self.cells, line)
        return f"line {shown}" if cell is None else f"cell {cell}, line {shown}"

    def at_lines(self, lines: list[int]) -> str:
        """Several lines: ``lines 12, 30``, or ``cell 2, line 5 and cell 4, line 1``."""
        if not self.cells:
            return f"line {lines[0]}" if len(lines) == 1 else \
                "lines " + ", ".join(str(n) for n in lines)
        return " and ".join(self.at(n) for n in lines)

    def _star_aliases(self, stars: list[ast.ImportFrom]) -> None:
        """Resolve the names ``from torch.nn.functional import *`` (or ``torch``, ``torch.nn``,
        ``torch.optim``, ...) binds: ``softmax`` -> ``torch.nn.functional.softmax``. The later
        star import wins, as in Python; names the file imports explicitly or binds itself
        (``def softmax``, ``softmax = ...``, a parameter) keep their own meaning."""
        from trainguard.lint.torch_exports import EXPORTS

        star_names: dict[str, str] = {}
        for node in sorted(stars, key=lambda n: (n.lineno, n.col_offset)):
            for name in EXPORTS.get(node.module or "", ()):
                star_names[name] = f"{node.module}.{name}"
        if not star_names:
            return
        bound = set(self.functions) | set(self.classes)
        for node in self.nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                bound.add(node.id)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
        for name, full in star_names.items():
            if name not in self.aliases and name not in bound:
                self.aliases[name] = full

    @cached_property
    def _segment_lines(self) -> list[str]:
        """Source lines split as ``ast`` counts them (``\r\n``, ``\r``, ``\n``), ends kept."""
        return re.split(r"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)", self.source)

    def segment(self, node: ast.AST) -> str | None:
        """The source text of ``node``, like ``ast.get_source_segment`` but without splitting
        the whole file on every call (columns are UTF-8 byte offsets, as in ``ast``)."""
        try:
            first, last = node.lineno - 1, node.end_lineno - 1  # type: ignore[attr-defined]
            col, end_col = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        except AttributeError:
            return None
        if end_col is None or last is None:
            return None
        lines = self._segment_lines
        if first == last:
            return lines[first].encode()[col:end_col].decode(errors="replace")
        head = lines[first].encode()[col:].decode(errors="replace")
        tail = lines[last].encode()[:end_col].decode(errors="replace")
        return "".join([head, *lines[first + 1:last], tail])

    # -- names -------------------------------------------------------------------------------

    def qualname(self, node: ast.AST | None) -> str | None:
        """The dotted name with its first part resolved through imports (``F.relu`` ->
        ``torch.nn.functional.relu``; ``nn.Dropout`` -> ``torch.nn.Dropout``)."""
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        full = self.aliases.get(head, head)
        return f"{full}.{rest}" if rest else full

    def call_qualname(self, call: ast.AST) -> str | None:
        if not isinstance(call, ast.Call):
            return None
        memo = self._qual_memo
        k = id(call)
        if k not in memo:
            memo[k] = self.qualname(call.func)
        return memo[k]

    @staticmethod
    def key(node: ast.AST | None) -> str | None:
        """A stable key for an object reached through names and attributes: ``model.module`` and
        ``model`` share the key ``model``; ``self.model`` stays ``self.model``, and so does
        ``self.module``: a wrapper's or trainer's own attribute (skorch's estimators hold the
        network as ``self.module``), not DistributedDataParallel's unwrapping of ``self``."""
        name = dotted(node)
        if name is None or "()" in name or "[]" in name:
            return None
        parts = name.split(".")
        parts = [p for i, p in enumerate(parts)
                 if p != "module" or (i == 1 and parts[0] == "self")]
        return ".".join(parts) or None

    @cached_property
    def assignments(self) -> dict[str, list[ast.expr]]:
        """key -> every value assigned to it (plain and annotated assignments)."""
        out: dict[str, list[ast.expr]] = {}
        for node in self.nodes:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            for t in targets:
                if isinstance(t, (ast.Tuple, ast.List)) and \
                        isinstance(value, (ast.Tuple, ast.List)) and len(t.elts) == len(value.elts):
                    pairs = list(zip(t.elts, value.elts))  # self.model, self.opt = model, opt
                else:
                    pairs = [(t, value)]
                for target, v in pairs:
                    k = self.key(target)
                    if k:
                        out.setdefault(k, []).append(v)
                        while isinstance(v, ast.IfExp):  # GradScaler() if amp else None
                            out[k] += [v.body, v.orelse]
                            v = v.orelse
        return out

    def _keys_built_by(self, pattern: re.Pattern[str]) -> set[str]:
        keys = set()
        for k, values in self.assignments.items():
            for v in values:
                q = self.call_qualname(v)
                if q and (pattern.search(q) or pattern.search(q.rsplit(".", 1)[-1])):
                    keys.add(k)
        return keys

    @cached_property
    def optimizers(self) -> set[str]:
        keys = self._keys_built_by(_OPTIM_CLASS)
        keys |= {k for k, vs in self.assignments.items()
                 if any(self.call_qualname(v) and
                        re.search(r"(create|build|make|get|configure)_?optimi[sz]er",
                                  self.call_qualname(v) or "") for v in vs)}
        keys |= {k for k, vs in self.assignments.items() if any(
            isinstance(v, ast.Call) and _OPTIM_CLASS.search(self._parameter_default(v.func))
            for v in vs)}
        return keys - set(self.schedulers)

    def _parameter_default(self, func: ast.AST) -> str:
        """The qualified name of the default of the parameter ``func`` names in its function
        (``optimizer_cls=torch.optim.Adam``, then ``optimizer_cls(model.parameters())``), or
        ""."""
        if not isinstance(func, ast.Name):
            return ""
        scope = self.enclosing_function(func)
        if scope is None:
            return ""
        args = scope.args
        positional = [*args.posonlyargs, *args.args]
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        return next((self.qualname(d) or "" for a, d in pairs if a.arg == func.id), "")

    @cached_property
    def schedulers(self) -> dict[str, str]:
        """key -> the scheduler class (last part of its qualified name)."""
        out = {}
        for k, values in self.assignments.items():
            for v in values:
                q = self.call_qualname(v)
                if q and _SCHED_CLASS.search(q) and "GradScaler" not in q:
                    out[k] = q.rsplit(".", 1)[-1]
        return out

    @cached_property
    def scheduler_lists(self) -> dict[str, str]:
        """Containers of learning-rate schedulers, key -> the class of their last entry:
        ``self.schedulers.append(LambdaLR(opt, f))``, ``scheds = [StepLR(o, 10) for o in
        opts]``; stepped as ``for s in self.schedulers: s.step()``."""
        out: dict[str, str] = {}

        def note(key: str | None, values: list[ast.AST]) -> None:
            for v in values:
                v = v.elt if isinstance(v, ast.ListComp) else v
                q = self.call_qualname(v) if isinstance(v, ast.Call) else None
                if key and q and _SCHED_CLASS.search(q) and "GradScaler" not in q:
                    out[key] = q.rsplit(".", 1)[-1]

        for call in self.calls:
            f = call.func
            if isinstance(f, ast.Attribute) and f.attr in ("append", "extend") and call.args:
                arg = call.args[0]
                note(self.key(f.value), list(arg.elts) if isinstance(arg, (ast.List, ast.Tuple))
                     else [arg])
        for k, values in self.assignments.items():
            note(k, [e for v in values for e in (v.elts if isinstance(v, (ast.List, ast.Tuple))
                                                 else [v]) if not isinstance(v, ast.Call)])
        return out

    @cached_property
    def scalers(self) -> set[str]:
        return {k for k, vs in self.assignments.items()
                for v in vs if (self.call_qualname(v) or "").endswith("GradScaler")}

    def is_optimizer(self, key: str | None) -> bool:
        if not key or key in self.schedulers or key in self.scalers:
            return False
        return key in self.optimizers or bool(_OPTIM_NAME.search(key)) and \
            not _SCHED_NAME.search(key) and not self._built_as_module(key)

    def _built_as_module(self, key: str) -> bool:
        """``solver = Solver()`` with ``Solver`` a module class of the file: a model, whatever
        its name says (a continual learner's "solver" is no Caffe solver)."""
        return any(isinstance(v, ast.Call) and dotted(v.func) in self.module_classes
                   for v in self.assignments.get(key, []))

    @cached_property
    def module_classes(self) -> set[str]:
        """Names of the classes of the file that define ``forward``."""
        return {name for name, cls in self.classes.items()
                if any(isinstance(b, ast.FunctionDef) and b.name == "forward" for b in cls.body)}

    def is_scheduler(self, key: str | None) -> bool:
        """A learning-rate scheduler: built by a ``torch.optim.lr_scheduler`` class (or a
        known scheduler factory), or named like one when the file never builds it (a
        parameter). A name like ``schedule`` bound to anything else (a pipeline-parallel
        schedule, a noise schedule) is not one."""
        if not key:
            return False
        if key in self.schedulers:
            return True
        if not _SCHED_NAME.search(key):
            return False
        values = list(self.assignments.get(key, []))
        while any(isinstance(v, ast.IfExp) for v in values):  # X(...) if flag else None
            values = [w for v in values for w in ((v.body, v.orelse) if isinstance(v, ast.IfExp)
                                                  else (v,))]
        for v in values:
            if not isinstance(v, ast.Call):
                continue
            name = (self.call_qualname(v) or "").rsplit(".", 1)[-1]
            if name[:1].isupper():
                return False  # built by a class that is not a learning-rate scheduler
        # a parameter, or a factory (build_scheduler(opt, cfg)) named for one; a bare
        # "schedule" (a noise, beta or pipeline schedule) names no learning-rate scheduler
        return bool(_LR_SCHED_NAME.search(key))

    @cached_property
    def models(self) -> set[str]:
        """Keys that name a model: built by a model constructor or a same-file module class,
        or used like one (``.train()``, ``.eval()``, ``.parameters()``) under a model-like name.
        ``X.from_pretrained(...)`` builds a module only when ``X`` is a model class: a
        diffusers or transformers pipeline (its ``__call__`` runs under no_grad and returns
        images or text), a tokenizer, processor, config or noise scheduler is no
        ``nn.Module``."""
        keys = {k for k, values in self.assignments.items()
                if any((q := self.call_qualname(v)) and not _NOT_A_MODULE.search(q) and
                       (_MODEL_CTOR.search(q) or _MODEL_CTOR.search(q.rsplit(".", 1)[-1]))
                       for v in values)}
        for k, values in self.assignments.items():
            for v in values:
                if isinstance(v, ast.Call) and dotted(v.func) in self.module_classes:
                    keys.add(k)
                elif isinstance(v, ast.Call) and (dotted(v.func) or "").endswith(".to") \
                        and self.key(v.func.value) in keys:  # type: ignore[attr-defined]
                    keys.add(k)
                elif isinstance(v, ast.Call) and (dotted(v.func) or "") in DEEP_COPIES and \
                        v.args and self.key(v.args[0]) in keys:  # ``copy.deepcopy(model)``
                    keys.add(k)
        for call in self.calls:
            f = call.func
            if isinstance(f, ast.Attribute) and f.attr in _MODEL_CALLS:
                k = self.key(f.value)
                if k and _MODEL_NAME.match(k):
                    keys.add(k)
            q = self.call_qualname(call) or ""
            if _OPTIM_CLASS.search(q) or _OPTIM_CLASS.search(q.rsplit(".", 1)[-1]):
                # whatever hands its parameters to an optimizer is a model being trained (also
                # through a name: ``params = list(copy.parameters())``, ``Adam(params)``)
                given = [call] + [v for a in call.args if isinstance(a, ast.Name)
                                  for v in self.assignments.get(a.id, [])[:4]]
                for arg in (n for g in given for n in ast.walk(g)):
                    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and \
                            arg.func.attr in ("parameters", "named_parameters"):
                        k = self.key(arg.func.value)
                        if k and "[]" not in k:
                            keys.add(k)
        keys |= self._stored_models(keys)
        bad = self.optimizers | set(self.schedulers) | self.scalers
        return {k for k in keys if k not in bad and not self.is_optimizer(k)}

    def _stored_models(self, keys: set[str]) -> set[str]:
        """``self.inception`` where a class of the file stores an ``__init__`` argument so
        (``self.inception = inception``) and the file builds it handed a model in that place
        (``FIDCallback(feature_net, real)``, ``feature_net = FeatureNet()``): a callback or
        metric holding a network under a name no model pattern knows."""
        out: set[str] = set()
        built = {dotted(c.func) for c in self.calls}
        for name, cls in self.classes.items():
            init = next((b for b in cls.body if isinstance(b, ast.FunctionDef)
                         and b.name == "__init__"), None) if name in built else None
            if init is None:
                continue
            for target, param in _self_stores(init):
                values = self.graph.parameter_values(init, param) or []
                if any(self.key(v) in keys for v in values):
                    out.add(target)
        return out

    def is_model(self, key: str | None) -> bool:
        if not key or key.startswith("<"):
            return False
        return key in self.models or bool(_MODEL_NAME.match(key)) and not self.is_optimizer(key) \
            and not self.is_scheduler(key)

    @cached_property
    def _code_words(self) -> str:
        """The names the code uses (identifiers, attributes, keywords, imports), without
        comments and strings: ``# no Dropout here`` shows no Dropout."""
        words, plain = set(), self.plain_classes
        for n in self.nodes:
            if isinstance(n, ast.Name):
                if n.id not in plain:
                    words.add(n.id)
            elif isinstance(n, ast.Attribute):
                words.add(n.attr)
            elif isinstance(n, ast.keyword) and n.arg:
                words.add(f"{n.arg}=")
            elif isinstance(n, ast.alias):
                words.add(n.name)
            if isinstance(n, ast.Call) and "InstanceNorm" in (dotted(n.func) or "") and \
                    any(k.arg == "track_running_stats" for k in n.keywords):
                words.add("InstanceNorm(track_running")
        return " ".join(sorted(words))

    @cached_property
    def plain_classes(self) -> frozenset[str]:
        """Classes of this file whose own ``forward`` does not depend on the mode
        (:func:`~trainguard.apifacts.training_read_matters`): a ``FrozenBatchNorm2d`` written
        here is a name, not a BatchNorm; its base classes (``nn.BatchNorm2d``) still count."""
        out = set()
        for name, cls in self.classes.items():
            forward = next((f for f in cls.body if isinstance(f, ast.FunctionDef)
                            and f.name == "forward"), None)
            if forward is None or not training_read_matters(forward):
                out.add(name)
        return frozenset(out)

    @cached_property
    def mode_dependent(self) -> bool:
        """Whether the file shows modules whose behaviour depends on train/eval mode, itself or
        through a model built by a class or function of another file of the project
        (``model = make()`` with ``from models import make``)."""
        if _MODE_DEPENDENT.search(self.source) and _MODE_DEPENDENT.search(self._code_words):
            return True
        return any(b.mode_dependent for b in self.model_builders.values())

    @cached_property
    def project_imports(self) -> dict[str, tuple[int, str, str | None]]:
        """Names the file imports from modules that may be files of its own project
        (relative imports, and absolute ones outside the standard library and common
        libraries): name -> (level, module, imported attribute or None)."""
        from trainguard.lint.project import import_specs

        return {name: spec for name, spec in import_specs(
            n for n in self.nodes if isinstance(n, (ast.Import, ast.ImportFrom))).items()
            if spec[0] > 0 or spec[1].split(".")[0] not in _NOT_PROJECT}

    @cached_property
    def graph(self) -> "CallGraph":
        """Receiver types and call targets (:mod:`trainguard.lint.callgraph`)."""
        from trainguard.lint.callgraph import CallGraph

        return CallGraph(self)

    @property
    def model_builders(self) -> dict[int, Builder]:
        """``id(value)`` -> the same-project class or function it builds a model with, for the
        values assigned to model keys (``model = make()``, ``net = models.Net().to(device)``)."""
        return self._project_models[0]

    @property
    def project_model_keys(self) -> set[str]:
        """The keys assigned a model built by a class or function of another project file."""
        return self._project_models[1]

    @cached_property
    def _project_models(self) -> tuple[dict[int, Builder], set[str]]:
        from trainguard.lint.project import imported_builder

        wanted: list[tuple[str, ast.expr, list[str]]] = []
        for key, values in self.assignments.items():
            if not self.is_model(key):
                continue
            for value in values:
                names = [n for n in (dotted(c.func) for c in ast.walk(value)
                                     if isinstance(c, ast.Call)) if n and "(" not in n]
                if names:
                    wanted.append((key, value, names))
        wanted += self._handed_models()
        found: dict[int, Builder] = {}
        keys: set[str] = set()
        if not wanted:
            return found, keys
        imports = self.project_imports
        known: dict[str, Builder | None] = {}
        for key, value, names in wanted:
            for name in names:
                if name.split(".")[0] not in imports:
                    continue
                if name not in known:
                    known[name] = imported_builder(self.path, imports, name)
                if known[name] is not None:
                    found[id(value)] = known[name]  # type: ignore[assignment]
                    keys.add(key)
                    break
        return found, keys

    def _handed_models(self) -> list[tuple[str, ast.expr, list[str]]]:
        """``(parameter, argument, [name])`` for a model built by a name the file imports from
        another module and handed straight to a function of this file whose parameter is a
        model: ``train(FeatureNet(), domains)`` with ``def train(model, domains)``."""
        from trainguard.lint.callgraph import bind_arguments

        imports = self.project_imports
        out = []
        for call in self.calls:
            built = [a for a in [*call.args, *(k.value for k in call.keywords)]
                     if isinstance(a, ast.Call) and (dotted(a.func) or "(").split(".")[0]
                     in imports]
            func = self.callee(call) if built and isinstance(call.func, ast.Name) else None
            if func is None or self.enclosing_class(func) is not None:
                continue
            params = [a.arg for a in func.args.posonlyargs + func.args.args]
            out += [(name, arg, [dotted(arg.func)])
                    for name, arg in bind_arguments(params, call).items()
                    if arg in built and self.is_model(name)]
        return out

    # -- functions and calls -----------------------------------------------------------------

    def callee(self, call: ast.Call) -> Func | None:
        """The same-file function a call runs, if there is one: ``f(...)``, ``self.f(...)``
        (inherited methods too), ``obj.f(...)`` on an object of a same-file class
        (``trainer.fit()``, ``self.model.predict(x)``), ``super().f(...)``. Calling a module
        instance (``model(x)``) is a forward, not a call of a helper: see ``targets``."""
        found = [t for t in self.graph.targets(call) if t.script is self and not t.instance]
        return found[0].func if len(found) == 1 else None

    def targets(self, call: ast.Call) -> list["Target"]:
        """Every function ``call`` may run, in this file or another file of the project."""
        return self.graph.targets(call)

    def call_sites(self, func: Func) -> list[ast.Call]:
        return [c for c in self.graph.sites(func) if self.callee(c) is func]

    def reachable(self, node: ast.AST, *, depth: int = 4) -> list[ast.AST]:
        """``node`` and the same-file functions it calls, transitively (``depth`` levels); a
        call that may run several (``cb.on_batch_end(self)`` over a trainer's callbacks) reaches
        each of them."""
        seen: dict[int, ast.AST] = {id(node): node}
        frontier = [node]
        for _ in range(depth):
            nxt = []
            for n in frontier:
                for sub in walk_local(n):
                    if isinstance(sub, ast.Call):
                        found = [t.func for t in self.graph.targets(sub)
                                 if t.script is self and not t.instance][:4]
                        for target in found:
                            if id(target) not in seen:
                                seen[id(target)] = target
                                nxt.append(target)
            frontier = nxt
        return list(seen.values())

    def calls_reached(self, node: ast.AST) -> list[ast.Call]:
        return [c for n in self.reachable(node) for c in walk_local(n) if isinstance(c, ast.Call)]

    def may_reach(self, word: str) -> bool:
        """Whether ``word`` is in this file or in a project file it imports: code that no call
        can reach needs no call graph (``backward`` for training loops)."""
        memo = self.__dict__.setdefault("_tg_may_reach", {})
        if word not in memo:
            from trainguard.lint.project import imports_mention

            memo[word] = word in self.source or imports_mention(self, word)
        return memo[word]

    def has_backward(self, node: ast.AST) -> bool:
        if not self.may_reach("backward"):
            return False
        k = id(node)
        if k not in self._backward_memo:
            self._backward_memo[k] = any(is_backward(c) for c in self.calls_reached(node))
        return self._backward_memo[k]

    @staticmethod
    def enclosing_function(node: ast.AST) -> Func | None:
        n = parent(node)
        while n is not None and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n = parent(n)
        return n

    @staticmethod
    def enclosing_class(node: ast.AST) -> ast.ClassDef | None:
        n = parent(node)
        while n is not None and not isinstance(n, ast.ClassDef):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    not isinstance(parent(n), ast.ClassDef):
                return None
            n = parent(n)
        return n

    @staticmethod
    def enclosing_loops(node: ast.AST) -> list[ast.AST]:
        """Loops around ``node`` within its function, innermost first."""
        out = []
        n = parent(node)
        while n is not None and not isinstance(n, SCOPES):
            if isinstance(n, (ast.For, ast.AsyncFor, ast.While)):
                out.append(n)
            n = parent(n)
        return out

    # -- grad mode ---------------------------------------------------------------------------

    def grad_context(self, expr: ast.AST, _depth: int = 0) -> bool | None:
        """True when ``expr`` (a ``with`` item or decorator) disables grad, False when it enables
        it, None when it says nothing about grad mode. A non-literal ``set_grad_enabled(flag)``
        counts as disabling: it may, and a rule must not fire on a maybe; so does a conditional
        expression with a disabling branch, or a name bound to one."""
        if isinstance(expr, ast.IfExp):
            # ``torch.no_grad() if phase == "val" else nullcontext()``: a maybe, as above
            kinds = {self.grad_context(expr.body, _depth), self.grad_context(expr.orelse, _depth)}
            return True if True in kinds else False if kinds == {False} else None
        if isinstance(expr, ast.Name) and _depth < 3:
            # ``ctx = torch.no_grad() if ... else nullcontext()`` then ``with ctx:``
            values = self.assignments.get(self.key(expr) or "", [])
            kinds = {self.grad_context(v, _depth + 1) for v in values
                     if isinstance(v, (ast.IfExp, ast.Call))}
            if True in kinds:
                return True
        q = self.call_qualname(expr) if isinstance(expr, ast.Call) else self.qualname(expr)
        if q in NO_GRAD:
            if isinstance(expr, ast.Call) and expr.args and is_false(expr.args[0]):
                return False
            return True
        if q in ("torch.set_grad_enabled", "torch.autograd.set_grad_enabled"):
            if isinstance(expr, ast.Call) and expr.args and is_true(expr.args[0]):
                return False
            return True
        if q in ("torch.enable_grad", "torch.autograd.enable_grad"):
            return False
        last = (q or "").rsplit(".", 1)[-1]
        if "no_grad" in last or "inference_mode" in last:
            return True  # project helpers such as yolov5's @smart_inference_mode()
        if isinstance(expr, ast.Call) and _depth < 3:
            from trainguard.lint.contexts import enters_no_grad

            if enters_no_grad(self, expr, _depth + 1):
                return True  # with eval_mode(model): a context manager of the file
        return None

    def grad_disabled(self, node: ast.AST, _stack: frozenset[int] = frozenset()) -> bool:
        """Whether ``node`` runs with grad disabled, looking through ``with`` blocks, decorators,
        and, for a function, every same-file call site of it (all must be disabled)."""
        n = node
        switched = "set_grad_enabled(" in self.source
        while (p := parent(n)) is not None:
            if switched:
                mode = self._grad_switch_before(p, n)
                if mode is not None:
                    return mode
            if isinstance(p, (ast.With, ast.AsyncWith)) and n in p.body:
                for item in p.items:
                    kind = self.grad_context(item.context_expr)
                    if kind is not None:
                        return kind
            if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not p.args:
                for d in p.decorator_list:
                    kind = self.grad_context(d)
                    if kind is not None:
                        return kind
                if id(p) in self._grad_memo:
                    return self._grad_memo[id(p)]
                if id(p) in _stack:
                    return False
                sites = self.call_sites(p)
                result = bool(sites) and all(self.grad_disabled(s, _stack | {id(p)})
                                             for s in sites)
                self._grad_memo[id(p)] = result
                return result
            n = p
        return False


    def _grad_switch_before(self, block: ast.AST, stmt: ast.AST) -> bool | None:
        """A statement ``torch.set_grad_enabled(False)`` (or ``True``) above ``stmt`` in the
        same statement list of ``block``, the nearest one: grad stays switched until the next
        (PyTorch's global grad mode; https://pytorch.org/docs/stable/generated/torch.set_grad_enabled.html)."""
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(block, field, None)
            if isinstance(stmts, list) and stmt in stmts:
                for prev in reversed(stmts[:stmts.index(stmt)]):
                    if isinstance(prev, ast.Expr) and isinstance(prev.value, ast.Call) and \
                            prev.value.args and self.call_qualname(prev.value) in (
                                "torch.set_grad_enabled", "torch.autograd.set_grad_enabled"):
                        flag = prev.value.args[0]
                        if isinstance(flag, ast.Constant) and isinstance(flag.value, bool):
                            return not flag.value
                return None
        return None


NO_GRAD = frozenset({"torch.no_grad", "torch.autograd.no_grad", "torch.inference_mode",
                     "torch.autograd.grad_mode.no_grad", "torch.autograd.inference_mode"})
"""The context managers (and decorators) that disable grad whatever their argument, but
``False``: ``no_grad`` and ``inference_mode`` under their public names."""


def is_backward(call: ast.AST) -> bool:
    """``loss.backward()``, ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``,
    ``torch.autograd.backward(...)``."""
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
        call.func.attr == "backward"


def _self_stores(func: ast.FunctionDef) -> Iterator[tuple[str, str]]:
    """``("self.x", "x")`` for each ``self.x = x`` (also unpacked: ``self.x, self.y = x, y``)
    in ``func``'s own body."""
    for stmt in ast.walk(func):
        if not isinstance(stmt, ast.Assign):
            continue
        for t in stmt.targets:
            pairs = zip(t.elts, stmt.value.elts) if isinstance(t, ast.Tuple) and \
                isinstance(stmt.value, ast.Tuple) and len(t.elts) == len(stmt.value.elts) \
                else [(t, stmt.value)]
            for target, value in pairs:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                        and target.value.id == "self" and isinstance(value, ast.Name):
                    yield f"self.{target.attr}", value.id
