"""Where a model call's output goes, read from the caller's source (TG101's metric sign)."""

from __future__ import annotations

import textwrap

import pytest

from trainguard.sanitize.core.sites import output_uses

# (name, source with the model call on the line marked `# <-`, metric?, loss?, trains?)
CASES = [
    ("argmax then ==", """
        def evaluate(model, loader):
            correct = 0
            for x, y in loader:
                pred = model(x).argmax(1)  # <-
                correct += (pred == y).sum().item()
            return correct
        """, "compared with `y` (==)", None, False),
    ("tutorial torch.max(outputs.data, 1)", """
        for images, labels in loader:
            outputs = net(images)  # <-
            _, predicted = torch.max(outputs.data, 1)
            correct += (predicted == labels).sum().item()
        """, "compared with `labels` (==)", None, False),
    ("name rebound, then a metric function", """
        def test(task_model, loader):
            for imgs, labels in loader:
                with torch.no_grad():
                    preds = task_model(imgs)  # <-
                preds = torch.argmax(preds, dim=1).cpu().numpy()
                correct += accuracy_score(labels, preds, normalize=False)
        """, "passed to accuracy_score()", None, False),
    ("collected in a list, scored after the loop", """
        def run(model, loader):
            preds, ys = [], []
            for x, y in loader:
                preds.append(model(x).argmax(1))  # <-
                ys.append(y)
            return f1_score(torch.cat(ys), torch.cat(preds))
        """, "passed to f1_score()", None, False),
    ("metric object keyed by keyword", """
        for batch in loader:
            logits = model(batch["x"]).logits  # <-
            metric.add_batch(predictions=logits.argmax(-1), references=batch["y"])
        """, "passed to metric.add_batch()", None, False),
    (".eq method", """
        hits = model(x).argmax(1).eq(y).sum()  # <-
        """, "compared with `y` (.eq)", None, False),
    ("squared error summed with .item()", """
        for x, y in loader:
            sq_err += ((model(x) - y) ** 2).sum().item()  # <-
        """, "accumulated into `sq_err` (+= .item())", None, False),
    ("returned from predict()", """
        def predict(model, x):
            with torch.no_grad():
                return model(x)  # <-
        """, "returned from predict()", None, False),
    ("attribute holds the output", """
        class Runner:
            def validate(self, x, y):
                self.out = self.model(x)  # <-
                return (self.out.argmax(1) == y).float().mean()
        """, "compared with `y` (==)", None, False),
    ("training step: loss, backward, step", """
        for x, y in loader:
            out = model(x)  # <-
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
        """, None, "criterion()", True),
    ("training step that also logs accuracy", """
        for x, y in loader:
            logits = model(x)  # <-
            loss = F.cross_entropy(logits, y)
            acc = (logits.argmax(1) == y).float().mean()
            loss.backward()
        """, "compared with `y` (==)", "F.cross_entropy()", True),
    ("validation loss on reshaped outputs", """
        def validate(model, loader):
            for x, y in loader:
                out = model(x)  # <-
                total += loss_fn(out.view(-1, 3), y.view(-1)).item()
        """, None, "loss_fn()", False),
    ("BatchNorm recalibration: output discarded", """
        with torch.no_grad():
            for x in loader:
                model(x)  # <-
        """, None, None, False),
    ("assigned and never read", """
        for x in loader:
            out = model(x)  # <-
            seen += x.shape[0]
        """, None, None, False),
    ("RL rollout: action to env.step, compared with a constant", """
        def rollout(policy, env, obs):
            while True:
                action = policy(obs).argmax().item()  # <-
                if action == 2:
                    break
                obs, reward, done = env.step(action)
        """, None, None, True),
    ("returned from a function named for acting", """
        def act(policy, obs):
            return policy(obs)  # <-
        """, None, None, False),
    ("threshold against a constant only", """
        if model(x).max() > 0.5:  # <-
            print("confident")
        """, None, None, False),
]


@pytest.mark.parametrize("name,source,metric,loss,trains", CASES, ids=[c[0] for c in CASES])
def test_output_uses(tmp_path, name, source, metric, loss, trains):
    text = textwrap.dedent(source).lstrip("\n")
    path = tmp_path / "script.py"
    path.write_text(text)
    lines = text.splitlines()
    number = next(i for i, line in enumerate(lines, start=1) if line.endswith("# <-"))
    line = lines[number - 1]
    start = min(line.find(k) for k in ("model(", "task_model(", "net(", "policy(", "self.model(")
                if line.find(k) >= 0)
    uses = output_uses((str(path), number, start + 1))
    assert uses is not None
    assert (uses.metric, uses.loss, uses.trains) == (metric, loss, trains)


def test_no_source_or_no_call_there_gives_none(tmp_path):
    path = tmp_path / "s.py"
    path.write_text("x = 1\ny = model(x)\n")
    assert output_uses(("<string>", 1, 1)) is None
    assert output_uses((str(path), 1, 1)) is None  # no call starts there
    assert output_uses(None) is None


USED = [
    ("a statement of its own", "model(x)  # <-\n", False),
    ("assigned and never read", "out = model(x)  # <-\nprint('done')\n", False),
    ("only its size read, to size a layer", """
        def flat_size(self):
            with torch.no_grad():
                out = self.features(torch.zeros(1, 3, 8, 8))  # <-
            return out.view(1, -1).size(1)
        """, False),
    ("numel of the output", "n = model(torch.zeros(1, 4)).numel()  # <-\n", False),
    ("argmax returned", """
        def top(model, x):
            with torch.no_grad():
                return model(x).argmax(-1)  # <-
        """, True),
    ("written to a file", """
        out = model(x)  # <-
        writer.writerow(out.tolist())
        """, True),
]


@pytest.mark.parametrize("name,source,used", USED, ids=[c[0] for c in USED])
def test_output_used(tmp_path, name, source, used):
    text = textwrap.dedent(source).lstrip("\n")
    path = tmp_path / "script.py"
    path.write_text(text)
    lines = text.splitlines()
    number = next(i for i, line in enumerate(lines, start=1) if line.endswith("# <-"))
    line = lines[number - 1]
    start = min(line.find(k) for k in ("model(", "self.features(") if line.find(k) >= 0)
    uses = output_uses((str(path), number, start + 1))
    assert uses is not None
    assert uses.used is used
