"""TG201 with two optimizers counts iterations (one step of each), not optimizer steps: the GAN of
``cases/tg201_gan_step_returns_loss_silent`` stays silent, and the same GAN keeping every
discriminator loss in a list is reported at the append."""

from __future__ import annotations

from sanitize_helpers import CASES, run_in_process


def test_a_gan_that_keeps_every_discriminator_loss_is_reported_in_iterations(tmp_path):
    source = (CASES / "tg201_gan_step_returns_loss_silent" / "fixed.py").read_text()
    anchor = "    g_loss = gan_loss(D, fake, True, opt=opt_g)\n"
    assert anchor in source
    leaky = source.replace("for step in range(40):", "history = []\nfor step in range(40):")
    leaky = leaky.replace(anchor, anchor + "    history.append(d_loss)\n")
    script = tmp_path / "gan_leak.py"
    script.write_text(leaky)
    line = leaky.splitlines().index("    history.append(d_loss)") + 1
    watcher, status, stderr = run_in_process(script)
    assert status == 0, stderr
    assert {(f.code, f.line) for f in watcher.findings} == {("TG201", line)}, stderr
    message = watcher.findings[0].message
    assert "earlier iterations" in message and "one step of each of the 2 optimizers" in message
    assert "`history` holds them" in message
