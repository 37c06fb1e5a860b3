"""TG701 judges where a loaded file came from, not whether the script's text mentions torch.save:
a file written before the run by someone else is reported even in a script that saves its own
checkpoints; one written in the program's own format (an earlier run's resume file), one that
pickles the program's own classes, or one written during the run stays silent. A load made by a
library (``torch.hub.load_state_dict_from_url``) is not the user's line."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

from sanitize_helpers import run_in_process, run_tg

SCRIPT = textwrap.dedent("""\
    import sys
    import torch
    from torch import nn

    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def save(path, step):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "step": step}, path)

    start = torch.load(sys.argv[1], weights_only=False)
    print(sorted(start))
    save("mine.pt", 1)
""")


def _run(tmp_path, payload):
    torch.save(payload, tmp_path / "given.pt")  # written before the run starts
    script = tmp_path / "resume.py"
    script.write_text(SCRIPT)
    report = tmp_path / "r.json"
    done = run_tg("run", "--report", str(report), str(script), str(tmp_path / "given.pt"),
                  cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return [(f["code"], f["line"]) for f in json.loads(report.read_text())["findings"]]


def test_a_foreign_file_is_reported_in_a_script_that_saves_its_own(tmp_path):
    foreign = {"state_dict": torch.nn.Linear(3, 2).state_dict(), "arch": "linear-3-2"}
    assert _run(tmp_path, foreign) == [("TG701", 12)]


def test_a_file_in_the_programs_own_format_is_silent(tmp_path):
    model = torch.nn.Linear(3, 2)
    own = {"model": model.state_dict(),
           "optimizer": torch.optim.SGD(model.parameters(), lr=0.1).state_dict(), "step": 7}
    assert _run(tmp_path, own) == []


HUB = textwrap.dedent("""\
    import os, pathlib, sys
    import torch
    os.environ["TORCH_HOME"] = os.path.join(os.getcwd(), "hub")
    state = torch.hub.load_state_dict_from_url(pathlib.Path(sys.argv[1]).as_uri(),
                                               progress=False, weights_only=False)
    torch.nn.Linear(3, 2).load_state_dict(state)
""")


def test_a_library_load_of_pretrained_weights_is_not_the_users_line(tmp_path):
    torch.save(torch.nn.Linear(3, 2).state_dict(), tmp_path / "weights.pth")
    script = tmp_path / "hub.py"
    script.write_text(HUB)
    report = tmp_path / "r.json"
    done = run_tg("run", "--report", str(report), str(script), str(tmp_path / "weights.pth"),
                  cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(report.read_text())["findings"] == []


GENERATE = textwrap.dedent("""\
    import numpy as np
    import torch
    torch.save(np.sin(np.arange(40.0)).reshape(4, 10), open("{name}", "wb"))
""")
TRAIN = textwrap.dedent("""\
    import torch
    data = torch.load("traindata.pt", weights_only=False)
    print(data.shape)
""")


def _generated_then_trained(tmp_path, written_name):
    # the generator script runs first, alone; then the training script is watched
    (tmp_path / "generate.py").write_text(GENERATE.format(name=written_name))
    (tmp_path / "train.py").write_text(TRAIN)
    # (the generator's own run is not watched: its code runs here, writing into tmp_path)
    exec(GENERATE.format(name=str(tmp_path / "traindata.pt")), {})
    report = tmp_path / "r.json"
    done = run_tg("run", "--report", str(report), str(tmp_path / "train.py"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return [(f["code"], f["line"]) for f in json.loads(report.read_text())["findings"]]


def test_a_file_a_sibling_script_saves_is_the_projects_own(tmp_path):
    # pytorch/examples time_sequence_prediction: generate_sine_wave.py saves traindata.pt with
    # torch.save, train.py loads it with weights_only=False (a numpy array)
    assert _generated_then_trained(tmp_path, "traindata.pt") == []


def test_a_sibling_that_saves_another_file_does_not_vouch_for_it(tmp_path):
    assert _generated_then_trained(tmp_path, "other.pt") == [("TG701", 2)]


WRITTEN_IN_RUN = textwrap.dedent("""\
    import io, os
    import torch
    state = {{"model": torch.nn.Linear(3, 2).state_dict(), "step": 1}}
    {write}
    loaded = torch.load("ckpt.pt", weights_only=False)
""")


@pytest.mark.parametrize("write, expected", [
    # raw bytes written by this process: a download or a copy, whatever the file holds
    ('buf = io.BytesIO(); torch.save(state, buf); open("ckpt.pt", "wb").write(buf.getvalue())',
     [("TG701", 5)]),
    # this process's torch.save: to the path, through an open file, to a name renamed onto it
    ('torch.save(state, "ckpt.pt")', []),
    ('f = open("ckpt.pt", "wb"); torch.save(state, f); f.close()', []),
    ('torch.save(state, "ckpt.pt.tmp"); os.replace("ckpt.pt.tmp", "ckpt.pt")', []),
])
def test_a_file_written_during_the_run_is_trusted_only_from_torch_save(tmp_path, monkeypatch,
                                                                      write, expected):
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "load.py"
    script.write_text(WRITTEN_IN_RUN.format(write=write))
    watcher, status, stderr = run_in_process(script)
    assert status == 0, stderr
    assert [(f.code, f.line) for f in watcher.findings if f.code == "TG701"] == expected, stderr
