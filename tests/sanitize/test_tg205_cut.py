"""TG205 names where the path is cut: the submodules holding the parameters without gradient are
looked at for one step (their output's grad_fn and the line that called them), and the loss of the
next backward that trains the same optimizer is searched for those outputs."""

from __future__ import annotations

import torch
from torch import nn

from sanitize_helpers import CASES, findings_of, run_in_process
from trainguard.sanitize.checks.tg205_gradient_cut import GradientCut


def test_the_detached_branch_case_names_the_line_of_the_cut():
    script = CASES / "tg205_detached_branch" / "buggy.py"
    line = next(n for n, text in enumerate(script.read_text().splitlines(), start=1)
                if ".detach()" in text)
    watcher, status, _ = run_in_process(script)
    [finding] = [f for f in watcher.findings if f.code == "TG205"]
    assert f"`weights_head`'s output at buggy.py:{line} does not reach the loss" in \
        finding.message, finding.message


class _Twin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used, self.spare = nn.Linear(3, 2), nn.Linear(3, 2)

    def forward(self, x):
        return self.used(x)  # `spare` is never called


def test_a_submodule_never_called_is_said_to_be_unused():
    def run() -> None:
        torch.manual_seed(0)
        model = _Twin()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(5):
            optimizer.zero_grad()
            model(torch.randn(4, 3)).sum().backward()
            optimizer.step()

    [finding] = findings_of(run, GradientCut)
    assert "`spare` was not called in the step looked at (unused in forward; built at " \
        "test_tg205_cut.py:27)" in finding.message, finding.message
    assert finding.line == 27  # `self.used, self.spare = ...`: where it was built


def test_a_gan_whose_generator_loss_detaches_is_judged_on_the_generators_loss():
    # the discriminator's backward (on fake.detach(), correctly) trains none of G's parameters
    # and must not be taken for G's loss; G's own loss detaches too (the bug)
    def run() -> None:
        torch.manual_seed(0)
        G = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 2))
        D = nn.Linear(2, 1)
        bias = nn.Parameter(torch.zeros(2))  # G's optimizer also holds a parameter that trains
        opt_g = torch.optim.Adam([*G.parameters(), bias], lr=1e-3)
        opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
        for _ in range(6):
            fake = G(torch.randn(8, 2))
            opt_d.zero_grad()
            D(fake.detach()).mean().backward()
            opt_d.step()
            opt_g.zero_grad()
            (-D(fake.detach() + bias).mean()).backward()
            opt_g.step()

    [finding] = findings_of(run, GradientCut)
    assert "given to Adam" in finding.message
    assert "`0`" not in finding.message  # G itself is the holder, not one of its layers
    assert "does not reach the loss: the cut is after it" in finding.message, finding.message


class _Ablated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.aux = nn.Linear(3, 2), nn.Linear(2, 1)

    def forward(self, x):
        h = self.body(x)
        return h, self.aux(h)


def test_a_head_weighted_zero_on_purpose_is_silent():
    # an ablation: the auxiliary head's only path to the loss is weighted 0, so its gradients are
    # all zeros, but no cut made them so
    def run() -> None:
        torch.manual_seed(0)
        model = _Ablated()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(5):
            optimizer.zero_grad()
            h, aux = model(torch.randn(4, 3))
            (h.pow(2).mean() + 0.0 * aux.mean()).backward()
            optimizer.step()

    assert findings_of(run, GradientCut) == []


def test_zero_gradients_from_a_term_rebuilt_from_items_are_reported_at_the_item():
    script = CASES / "tg205_mixture_energy_rebuilt_zero_weighted_term" / "buggy.py"
    watcher, status, _ = run_in_process(script)
    [finding] = [f for f in watcher.findings if f.code == "TG205"]
    assert "never received a non-zero gradient" in finding.message, finding.message
    assert "membership.0.weight (8, 2)" in finding.message, finding.message


class _Unfolded(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.step = nn.Parameter(torch.tensor(0.5))
        self.body = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x, blurred):
        x = x - self.step * (x - blurred)  # the first stage starts at x = blurred: zero gradient
        return x + self.body(x)


def test_a_zero_gradient_with_a_zeros_like_buffer_in_the_loss_is_silent():
    # modelled on a deblurring network's Laplacian loss (a zeros_like buffer filled in place):
    # torch.zeros_like takes only a shape and cuts no path, and the step size's gradient is zero
    # because its input difference is, not because anything was cut
    def run() -> None:
        torch.manual_seed(0)
        model = _Unfolded()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(5):
            blurred, sharp = torch.rand(2, 3, 8, 8), torch.rand(2, 3, 8, 8)
            out = model(blurred, blurred)
            up = torch.zeros_like(out)
            up[:, :, ::2, ::2] = out[:, :, ::2, ::2] * 4
            loss = (out - sharp).abs().mean() + (up - sharp).abs().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    assert findings_of(run, GradientCut) == []


def test_an_input_made_to_require_grad_is_not_taken_for_the_cut():
    # a gradient penalty takes the input's gradient (x.requires_grad_()): every loss computed
    # from x descends from that call, but it cuts nothing; the unused `spare` is the finding
    def run() -> None:
        torch.manual_seed(0)
        model = _Twin()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(6):
            x = torch.randn(4, 3).requires_grad_()
            out = model(x).sum()
            (grad,) = torch.autograd.grad(out, x, create_graph=True)
            optimizer.zero_grad()
            (out + grad.pow(2).sum()).backward()
            optimizer.step()

    [finding] = findings_of(run, GradientCut)
    assert "requires_grad` was switched on" not in finding.message, finding.message
    assert finding.line == 27, finding.message
