"""Child processes started by user code through ``torch.multiprocessing`` are watched: each runs
under a watcher of its own and its findings reach the parent's summary and JSON report (Hogwild
workers, ranks started with ``mp.spawn``). A child that cannot be watched (a ``Process`` subclass
with its own ``run()``) or that sent nothing is named; processes started by libraries (DataLoader
workers) are neither watched nor counted. Cases with real reports: ``cases/tg602_*`` and
``cases/hogwild_shared_model_silent``."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap

from cliutil import cli_env
from sanitize_helpers import run_tg

HOGWILD = textwrap.dedent("""\
    import os
    import torch
    import torch.multiprocessing as mp
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    def train(model):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        model.eval()
        for _ in range(3):
            loss = model(torch.randn(4, 3)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    class Own(mp.Process):
        def run(self):
            pass

    def dies():
        os._exit(0)

    if __name__ == "__main__":
        model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 1))
        model.share_memory()
        workers = [mp.get_context("fork").Process(target=train, args=(model,)) for _ in range(2)]
        workers += [Own(), mp.Process(target=dies)]
        for p in workers:
            p.start()
        for p in workers:
            p.join()
        loader = DataLoader(TensorDataset(torch.randn(8, 3)), batch_size=4, num_workers=2)
        print(sum(len(b[0]) for b in loader))
""")


def test_children_are_watched_and_their_findings_reported(tmp_path):
    script = tmp_path / "hogwild.py"
    script.write_text(HOGWILD)
    report = tmp_path / "report.json"
    done = run_tg("run", "--report", str(report), str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(report.read_text())
    assert [(f["code"], f["line"], f["ranks"]) for f in data["findings"]] == [("TG102", 9, [0, 1])]
    assert "TG102  train-in-eval-mode  child 0,1  hogwild.py:9" in done.stderr
    assert "2 of 3 child processes started with Process at hogwild.py:29 watched" in done.stderr
    assert "child 2 started with Process at hogwild.py:29 sent no report: it exited" in done.stderr
    assert [(c["index"], c["watched"], c["steps"]) for c in data["children"]] == [
        (0, True, 3), (1, True, 3), (2, False, None)]
    assert "1 child process started through torch.multiprocessing at hogwild.py:29 was NOT " \
           "watched" in done.stderr
    assert data["unwatched_child_processes"] == [
        {"count": 1, "start_method": "default", "path": str(script), "line": 29}]


def test_a_run_without_children_says_nothing_of_them(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import torch\nprint(torch.zeros(1).sum().item())\n")
    report = tmp_path / "report.json"
    done = run_tg("run", "--report", str(report), str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "child" not in done.stderr
    assert {"unwatched_child_processes", "children"}.isdisjoint(json.loads(report.read_text()))


def test_the_wrapper_pickles_with_the_function_it_runs():
    from trainguard.config import Config
    from trainguard.sanitize.ranks.children import Child, Setup
    from trainguard.sanitize.watcher import Watcher

    setup = Setup(watcher=Watcher, config=Config(select=["TG6"]), every_step=False, folder="/tmp/x", job=0,
                  world_size=2)
    child = pickle.loads(pickle.dumps(Child(textwrap.dedent, setup, None)))
    assert child.fn is textwrap.dedent and child.setup == setup and child.index is None


NUMERICS = textwrap.dedent("""\
    import sys
    import torch
    import torch.multiprocessing as mp

    def train(i, out):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.3),
                                    torch.nn.Linear(8, 1))
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(5):
            loss = model(torch.randn(16, 4)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with open(out, "w") as f:
            f.write(repr([p.sum().item() for p in model.parameters()]))

    if __name__ == "__main__":
        mp.start_processes(train, args=(sys.argv[1],), nprocs=1, start_method="fork")
""")


def test_a_watched_child_computes_what_it_computes_unwatched(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(NUMERICS)
    plain = subprocess.run([sys.executable, str(script), str(tmp_path / "plain.txt")],
                           env=cli_env(), capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    done = run_tg("run", str(script), str(tmp_path / "watched.txt"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 of 1 child processes started with mp.start_processes" in done.stderr
    assert (tmp_path / "watched.txt").read_text() == (tmp_path / "plain.txt").read_text()


CYCLE = textwrap.dedent("""\
    import gc
    import sys
    import torch.multiprocessing as mp

    class Node:
        def __init__(self, path):
            self.path, self.me = path, self

        def __del__(self):
            with open(self.path, "w") as f:
                f.write("at exit" if sys.is_finalizing() else "while alive")

    def work(rank, path):
        node = Node(path)
        gc.collect()  # the cycle is old now: only a full collection frees it

    if __name__ == "__main__":
        mp.spawn(work, args=(sys.argv[1],), nprocs=1)
""")


def test_a_watched_child_frees_its_garbage_cycles_before_exit(tmp_path):
    # A DistributedDataParallel model is such a cycle; left to the interpreter's exit, its
    # process group is freed there and a gloo thread can abort the process.
    script = tmp_path / "cycle.py"
    script.write_text(CYCLE)
    done = run_tg("run", str(script), str(tmp_path / "freed.txt"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "freed.txt").read_text() == "while alive"
