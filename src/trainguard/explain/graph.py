"""``trainguard.graph``: a tensor's backward graph as Graphviz DOT, summarized when large.

Nodes are ``grad_fn`` objects (https://pytorch.org/docs/stable/notes/autograd.html); leaves are
``AccumulateGrad`` nodes, labelled with the parameter's name when ``model=`` is given; each op lists
the tensors it saved for backward, read from its ``_saved_*`` attributes (autograd mechanics, "Saved
tensors": https://pytorch.org/docs/stable/notes/autograd.html#saved-tensors). Ops whose gradient is
zero everywhere (round, floor, sign) are drawn orange; with a recording, the cuts whose outputs fed
the tensor are drawn as red boxes naming the parameters they cut off.

Large graphs are summarized, not dumped: when the forward was recorded, a run of same-type repeated
blocks (``blocks.0`` ... ``blocks.11``) keeps its first block and folds the others into one node;
then nodes deeper than ``depth`` (or beyond ``max_nodes``) are folded into one "deeper" node.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from trainguard.errors import UsageError
from trainguard.explain import walk
from trainguard.explain.recording import MODULE_ID_KEY, MODULE_KEY, Recording, record

__all__ = ["graph", "Graph", "GRAPHVIZ_HINT"]

GRAPHVIZ_HINT = ("Graphviz's `dot` program is not installed, so only DOT text can be written; "
                 "install it with `apt install graphviz` (Debian/Ubuntu), `conda install graphviz` "
                 "or `brew install graphviz`, or write `-o graph.dot` and render it elsewhere")


@dataclass
class Graph:
    """A drawn backward graph.

    Attributes:
        dot: the Graphviz DOT text.
        nodes: drawn node count; ``total_nodes``: nodes in the whole graph.
        collapsed: one line per folded run of repeated blocks.
        hidden_deeper: nodes folded away by the depth limit.
        cuts: the recorded cuts drawn.
        unreached: trainable parameters of ``model`` that are no leaf of the graph (drawn as a
            note; ``explain`` says why).
        saved_bytes: bytes of the distinct tensors the drawn ops saved for backward (the
            activation memory this graph holds until backward frees it).
    """

    dot: str
    nodes: int
    total_nodes: int
    collapsed: list[str] = field(default_factory=list)
    hidden_deeper: int = 0
    cuts: list[str] = field(default_factory=list)
    saved_bytes: int = 0
    unreached: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.dot

    def to_dict(self) -> dict[str, Any]:
        return {"dot": self.dot, "nodes": self.nodes, "total_nodes": self.total_nodes,
                "collapsed": self.collapsed, "hidden_deeper": self.hidden_deeper, "cuts": self.cuts,
                "saved_bytes": self.saved_bytes, "unreached": self.unreached}

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write ``.dot`` as text, ``.svg``/``.png``/``.pdf`` through Graphviz's ``dot``.

        Raises:
            UsageError: another suffix, or ``dot`` is not installed (the message says how to get it).
        """
        path = Path(path)
        suffix = path.suffix.lower().lstrip(".")
        if suffix in ("dot", "gv"):
            path.write_text(self.dot)
            return path
        if suffix not in ("svg", "png", "pdf"):
            raise UsageError(f"cannot write {path}: use a .dot, .svg, .png or .pdf file name")
        exe = shutil.which("dot")
        if exe is None:
            raise UsageError(f"cannot write {path}: {GRAPHVIZ_HINT}")
        done = subprocess.run([exe, f"-T{suffix}", "-o", str(path)], input=self.dot.encode(),
                              capture_output=True, timeout=120)
        if done.returncode != 0:
            raise UsageError(f"Graphviz failed to write {path}: "
                             f"{done.stderr.decode(errors='replace').strip()}")
        return path


def graph(
    value: torch.Tensor | Callable[[], Any],
    *,
    model: torch.nn.Module | None = None,
    recording: Recording | None = None,
    depth: int | None = None,
    max_nodes: int = 150,
    output: str | os.PathLike[str] | None = None,
) -> Graph:
    """Draw the backward graph of ``value`` (a loss, shape ``()``, or any tensor with a ``grad_fn``).

    Args:
        value: the tensor, or a callable with no arguments that runs the forward and returns it
            (then the forward is recorded: repeated blocks fold and cuts are drawn).
        model: names the parameter leaves (``enc.0.weight``) and the modules.
        recording: a :func:`~trainguard.explain.record` recording of the forward, if ``value`` is
            a tensor produced inside one.
        depth: draw nodes at most this many edges from ``value``'s ``grad_fn``; default: all, unless
            more than ``max_nodes``.
        max_nodes: above this many nodes (after folding repeated blocks) the depth is cut to fit.
        output: also write the graph there (``.dot``, or ``.svg``/``.png``/``.pdf`` with Graphviz).

    Returns:
        A :class:`Graph`; ``str(g)`` is the DOT text.

    Raises:
        UsageError: ``value`` has no ``grad_fn`` (nothing to draw), bad ``depth``/``max_nodes``,
            or ``output`` cannot be written (see :meth:`Graph.save`).

    Example::

        trainguard.graph(lambda: F.cross_entropy(model(x), y), model=model, output="loss.svg")
    """
    if depth is not None and depth < 1:
        raise UsageError(f"graph(depth={depth}): depth must be 1 or more")
    if max_nodes < 2:
        raise UsageError(f"graph(max_nodes={max_nodes}): must be 2 or more")
    if not isinstance(value, torch.Tensor) and callable(value):
        with record(model) as recording:
            value = value()
    if not isinstance(value, torch.Tensor):
        raise UsageError(f"graph() takes a tensor or a callable returning one; got "
                         f"{type(value).__name__}")
    if value.grad_fn is None:
        raise UsageError(f"graph(): the tensor has no grad_fn (requires_grad={value.requires_grad}"
                         ", is_leaf=True), so it has no backward graph; explain(tensor) says why")
    result = _Builder(value, model, recording, depth, max_nodes).build()
    if output is not None:
        result.save(output)
    return result


class _Builder:
    def __init__(self, t: torch.Tensor, model: torch.nn.Module | None, rec: Recording | None,
                 depth: int | None, max_nodes: int) -> None:
        self.root = t.grad_fn
        self.rec = rec
        self.depth = depth
        self.max_nodes = max_nodes
        self.t = t
        self.param_names = ({id(p): n for n, p in model.named_parameters()}
                            if model is not None else {})
        self.module_names = ({id(m): n for n, m in model.named_modules() if n}
                             if model is not None else {})
        self.trainable = ({id(p) for p in model.parameters() if p.requires_grad}
                          if model is not None else set())
        self.unreached_names: list[str] = []
        self.saved_bytes: dict[tuple[int, int, Any], int] = {}

    def build(self) -> Graph:
        nodes = list(walk.iter_nodes(self.root))
        group = self._fold_repeated(nodes)  # id(node) -> representative key
        edges: set[tuple[str, str]] = set()
        adjacency: dict[str, set[str]] = {}
        for node in nodes:
            for child in walk.children(node):
                a, b = group[id(child)], group[id(node)]
                if a != b:
                    edges.add((a, b))
                    adjacency.setdefault(b, set()).add(a)
        level = self._levels(group[id(self.root)], adjacency)
        depth = self.depth
        if depth is None and len(level) > self.max_nodes:
            depth = _depth_fitting(level, self.max_nodes)
        shown = {k for k, d in level.items() if depth is None or d <= depth}
        out = ["digraph backward {", '  rankdir="TB";',
               '  node [shape=box, style="rounded,filled", fillcolor="#f4f4f4", '
               'fontname="Helvetica", fontsize=10];',
               '  edge [fontname="Helvetica", fontsize=9];']
        drawn: set[str] = set()
        for node in nodes:
            key = group[id(node)]
            if key in shown and key not in drawn:
                drawn.add(key)
                out.append(f"  {key} [{self._attrs(node, key)}];")
        for a, b in sorted(edges):
            if a in shown and b in shown:
                out.append(f"  {a} -> {b};")
        hidden = len(level) - len(shown)
        if hidden:
            out.append(f'  deeper [label="... {hidden} nodes deeper than depth {depth}", '
                       'shape=note, fillcolor="#ffffff"];')
            for b in sorted({b for a, b in edges if b in shown and a not in shown}):
                out.append(f"  deeper -> {b} [style=dotted];")
        cuts = self._cuts(out, group[id(self.root)])
        self._unreached(out, nodes)
        out.append("}")
        return Graph("\n".join(out) + "\n", nodes=len(drawn),
                     total_nodes=len(nodes), collapsed=self.collapsed, hidden_deeper=hidden,
                     cuts=cuts, saved_bytes=sum(self.saved_bytes.values()),
                     unreached=self.unreached_names)

    # -- folding repeated blocks ----------------------------------------------------------------
    def _fold_repeated(self, nodes: list[Any]) -> dict[int, str]:
        """Map each node to its DOT id; nodes of the 2nd..last block of a run of numbered,
        same-type blocks (``layers.1`` ... ``layers.N``) share one id."""
        self.collapsed: list[str] = []
        self.fold_labels: dict[str, str] = {}
        block_of: dict[int, tuple[str, int]] = {}
        members: dict[str, dict[int, int]] = {}  # container -> block index -> node count
        for node in nodes:
            name = self._module_of(node) or ""
            match = re.match(r"^(?:(.*?)\.)?(\d+)(?:\.|$)", name)
            if match:
                container, index = match.group(1) or "", int(match.group(2))
                block_of[id(node)] = (container, index)
                counts = members.setdefault(container, {})
                counts[index] = counts.get(index, 0) + 1
        fold_of: dict[tuple[str, int], str] = {}  # (container, block index) -> fold key
        for container, counts in sorted(members.items()):
            for run in _runs(counts):
                # A run of consecutive, alike blocks (same op count): the first stays drawn.
                first, last = run[0], run[-1]
                key = _dot_id(f"fold_{container or 'root'}_{first + 1}")
                prefix = f"{container}." if container else ""
                text = (f"{prefix}{first + 1} ... {prefix}{last}: {len(run) - 1} "
                        f"repeated blocks folded ({counts[first]} ops each)")
                self.fold_labels[key] = text
                self.collapsed.append(text)
                fold_of.update({(container, index): key for index in run[1:]})
        group = {}
        for number, node in enumerate(nodes):
            spot = block_of.get(id(node))
            group[id(node)] = fold_of.get(spot, f"n{number}") if spot else f"n{number}"
        if fold_of:
            self._absorb_untagged(nodes, group, block_of)
        return group

    @staticmethod
    def _absorb_untagged(nodes: list[Any], group: dict[int, str],
                         block_of: dict[int, tuple[str, int]]) -> None:
        """Fold nodes made outside the hooks' sight (a weight's ``TBackward0``, its leaf) into
        the fold whose nodes are their only consumers."""
        consumers: dict[int, set[int]] = {}
        for node in nodes:
            for child in walk.children(node):
                consumers.setdefault(id(child), set()).add(id(node))
        changed = True
        while changed:
            changed = False
            for node in nodes:
                key = id(node)
                if key in block_of or group[key].startswith("fold_"):
                    continue
                targets = {group[c] for c in consumers.get(key, ())}
                if len(targets) == 1 and next(iter(targets)).startswith("fold_"):
                    group[key] = next(iter(targets))
                    changed = True

    def _module_of(self, node: Any) -> str | None:
        """The recorded module that made ``node``, named under ``model`` when it belongs to it."""
        meta = getattr(node, "metadata", None)
        if not meta or MODULE_KEY not in meta:
            return None
        return self.module_names.get(meta.get(MODULE_ID_KEY), meta[MODULE_KEY])

    @staticmethod
    def _levels(root: str, adjacency: dict[str, set[str]]) -> dict[str, int]:
        level = {root: 0}
        queue = deque([root])
        while queue:
            key = queue.popleft()
            for child in adjacency.get(key, ()):
                if child not in level:
                    level[child] = level[key] + 1
                    queue.append(child)
        return level

    # -- node labels ------------------------------------------------------------------------------
    def _attrs(self, node: Any, key: str) -> str:
        if key in self.fold_labels:
            return f'label="{_esc(self.fold_labels[key])}", shape=box3d, fillcolor="#e8e0f8"'
        leaf = walk.leaf_of(node)
        if leaf is not None:
            name = self.param_names.get(id(leaf), "leaf")
            return (f'label="{_esc(name)}\\n{_shape(leaf)}", shape=ellipse, '
                    'fillcolor="#cfe8ff"')
        op = type(node).__name__
        lines = [op]
        module = self._module_of(node)
        if module:
            lines.append(f"in {module}")
        saved_lines, saved = _saved(node)
        lines += saved_lines
        for value in saved:  # a tensor saved by several nodes is counted once
            key = (value.data_ptr(), value.numel(), value.dtype)
            self.saved_bytes[key] = value.numel() * value.element_size()
        color = "#f4f4f4"
        if op in walk.ZERO_GRAD_NODES:
            lines.append("CUT: gradient is zero")
            color = "#ffd8a8"
        if node is self.root:
            color = "#d3f9d8"
        return f'label="{_esc(chr(10).join(lines))}", fillcolor="{color}"'

    def _unreached(self, out: list[str], nodes: list[Any]) -> None:
        """A note listing the trainable parameters of ``model`` that no leaf of the graph is."""
        leaves = {id(leaf) for leaf in map(walk.leaf_of, nodes) if leaf is not None}
        missing = [name for key, name in self.param_names.items()
                   if key not in leaves and key in self.trainable]
        if missing:
            shown = ", ".join(missing[:8]) + (f" +{len(missing) - 8}" if len(missing) > 8 else "")
            text = f"not reached (no gradient): {shown}"
            self.unreached_names = missing
            out.append(f'  unreached [label="{_esc(text)}", shape=note, fillcolor="#fff3bf"];')

    def _cuts(self, out: list[str], root_key: str) -> list[str]:
        if self.rec is None:
            return []
        texts = []
        for cut in self.rec.cuts_behind(self.t):
            cut_off = set().union(*(walk.leaves_behind(i) for i in cut.inputs))
            names = sorted(self.param_names[i] for i in cut_off if i in self.param_names)
            shown = ", ".join(names[:6]) + (f" +{len(names) - 6}" if len(names) > 6 else "")
            text = f"CUT: {cut.describe()}" + (f"\ncuts off: {shown}" if names else "")
            texts.append(text.replace("\n", "; "))
            key = f"cut{cut.site}"
            out.append(f'  {key} [label="{_esc(text)}", shape=octagon, fillcolor="#ffc9c9", '
                       'color="#c92a2a"];')
            out.append(f'  {key} -> {root_key} [style=dashed, color="#c92a2a", '
                       'label="no gradient"];')
        return texts


def _saved(node: Any) -> tuple[list[str], list[torch.Tensor]]:
    """``saved name: (shape) dtype`` lines and the tensors ``node`` saved for backward."""
    lines, tensors = [], []
    for attr in dir(node):
        if not attr.startswith("_saved_") or attr.endswith(("_sym_sizes", "_sym_strides")):
            continue
        try:
            value = getattr(node, attr)
        except RuntimeError:  # buffers freed by an earlier backward
            return ["saved tensors freed (backward already ran)"], []
        if isinstance(value, torch.Tensor):
            lines.append(f"saved {attr[len('_saved_'):]}: {_shape(value)}")
            tensors.append(value)
    return lines, tensors


def _shape(t: torch.Tensor) -> str:
    return f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"


def _runs(counts: dict[int, int]) -> list[list[int]]:
    """Runs of 3 or more consecutive block indices with the same op count."""
    runs: list[list[int]] = []
    for index in sorted(counts):
        last = runs[-1] if runs else None
        if last and index == last[-1] + 1 and counts[index] == counts[last[-1]]:
            last.append(index)
        else:
            runs.append([index])
    return [run for run in runs if len(run) >= 3]


def _depth_fitting(level: dict[str, int], max_nodes: int) -> int:
    by_depth: dict[int, int] = {}
    for d in level.values():
        by_depth[d] = by_depth.get(d, 0) + 1
    total, depth = 0, 0
    for d in sorted(by_depth):
        if total + by_depth[d] > max_nodes - 1:
            break
        total += by_depth[d]
        depth = d
    return max(depth, 1)


def _dot_id(text: str) -> str:
    return re.sub(r"\W", "_", text)


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
