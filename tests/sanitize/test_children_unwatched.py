"""Child processes started by user code through ``torch.multiprocessing`` are not watched: the run's
summary and JSON report say so (Hogwild training, ranks started with ``mp.spawn``), and processes
started by libraries (DataLoader workers) are not counted."""

from __future__ import annotations

import json
import textwrap

from sanitize_helpers import run_tg

HOGWILD = textwrap.dedent("""\
    import torch
    import torch.multiprocessing as mp
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    def train(model):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for _ in range(3):
            loss = model(torch.randn(4, 3)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    if __name__ == "__main__":
        model = nn.Linear(3, 1)
        model.share_memory()
        workers = [mp.get_context("fork").Process(target=train, args=(model,)) for _ in range(2)]
        for p in workers:
            p.start()
        for p in workers:
            p.join()
        loader = DataLoader(TensorDataset(torch.randn(8, 3)), batch_size=4, num_workers=2)
        print(sum(len(b[0]) for b in loader))
""")


def test_children_started_by_user_code_are_said_to_be_unwatched(tmp_path):
    script = tmp_path / "hogwild.py"
    script.write_text(HOGWILD)
    report = tmp_path / "report.json"
    done = run_tg("run", "--report", str(report), str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert ("2 child processes started through torch.multiprocessing at hogwild.py:19 were NOT "
            "watched") in done.stderr
    section = json.loads(report.read_text())["unwatched_child_processes"]
    assert section == [{"count": 1, "start_method": "fork", "path": str(script), "line": 19}] * 2


def test_a_run_without_children_says_nothing_of_them(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import torch\nprint(torch.zeros(1).sum().item())\n")
    report = tmp_path / "report.json"
    done = run_tg("run", "--report", str(report), str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "NOT watched" not in done.stderr
    assert "unwatched_child_processes" not in json.loads(report.read_text())
