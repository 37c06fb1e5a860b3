"""TG202's diagnosis tells apart the two common forms of "backward through the graph a second
time": an output used by two backward calls in one iteration (a GAN's generator output used by the
discriminator's loss and, after ``opt_d.step()``, by the generator's: detach it for D) and a tensor
carried across iterations (an RNN's hidden state: detach what is carried)."""

from __future__ import annotations

from sanitize_helpers import CASES, run_in_process


def _diagnosis(case: str):
    watcher, status, _ = run_in_process(CASES / case / "buggy.py")
    assert status != 0
    [finding] = [f for f in watcher.findings if f.code == "TG202"]
    return finding


def test_a_gan_output_used_by_both_backward_calls_is_one_iteration_not_a_carried_tensor():
    finding = _diagnosis("tg202_gan_fake_used_twice")
    assert "in the same iteration (an optimizer step ran between the two backward calls" in \
        finding.message, finding.message
    assert "two backward calls through one graph" in finding.message
    assert "carried across iterations" not in finding.message
    assert "D(fake.detach())" in finding.fix and "hidden.detach()" not in finding.fix
    # reported at the discriminator's call that took `fake` whole, the second backward named
    assert finding.line == 21 and "reached it through `D(fake)` here (the second backward at " \
        "buggy.py:26)" in finding.message, finding.message


def test_the_output_named_is_one_whose_saved_tensors_are_gone():
    # the generator's output was made before the discriminator's backward too, but reached it
    # only detached: the real batch's score, whose graph that backward freed, is the one named
    finding = _diagnosis("tg202_relativistic_real_score_reused")
    assert "the output of Sequential made at buggy.py:22," in finding.message, finding.message
    # reported where the generator's loss reads that score again, after the first backward
    assert finding.line == 30 and "reads it again here" in finding.message, finding.message


def test_an_rnn_hidden_state_carried_across_iterations_is_still_called_carried():
    finding = _diagnosis("tg202_rnn_hidden_carried")
    assert "carried across iterations" in finding.message, finding.message
    assert "hidden = hidden.detach()" in finding.fix


def test_two_losses_of_one_step_are_still_the_same_step():
    finding = _diagnosis("tg202_two_losses")
    assert "already freed in the same step: two backward calls through one graph" in \
        finding.message, finding.message


CACHED = """
import torch
from torch import nn

torch.manual_seed(0)
encoder, head = nn.Linear(4, 8), nn.Linear(8, 2)
opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.1)
x, y = torch.randn(32, 4), torch.randint(0, 2, (32,))
feats = encoder(x)  # computed once, before the loop
for i in range(4):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(head(feats[i * 8:(i + 1) * 8]), y[i * 8:(i + 1) * 8])
    loss.backward()
    opt.step()
"""


def test_an_output_computed_once_before_the_loop_is_carried_not_one_iteration(tmp_path):
    # the same backward line freed it: the loop came round, so this is not a GAN's two backwards
    script = tmp_path / "cached.py"
    script.write_text(CACHED)
    watcher, status, _ = run_in_process(script)
    assert status != 0
    [finding] = [f for f in watcher.findings if f.code == "TG202"]
    assert "carried across iterations" in finding.message, finding.message
    assert "compute it again inside the loop" in finding.fix



def test_the_carried_name_is_a_whole_target_not_a_name_inside_one(tmp_path):
    # `self.fake_B = self.netG(self.real_A)` passes nothing it binds back into the call (`self`
    # is read by both sides, but `self.fake_B` is not an argument); `self.h` of
    # `out, self.h = self.rnn(x, self.h)` is carried (pix2pix-style models, as in
    # junyanz/pytorch-CycleGAN-and-pix2pix, keep their generator outputs as attributes)
    from trainguard.sanitize.core.holders import carried_names

    path = tmp_path / "train.py"
    path.write_text("self.fake_B = self.netG(self.real_A)\n"
                    "out, self.h = self.rnn(x, self.h)\n"
                    "out, h = rnn(x, h)\n"
                    "y = f(cfg.h, h=z)\n")
    assert carried_names((str(path), 1, 1)) == []
    assert carried_names((str(path), 2, 1)) == ["self.h"]
    assert carried_names((str(path), 3, 1)) == ["h"]
    assert carried_names((str(path), 4, 1)) == []
