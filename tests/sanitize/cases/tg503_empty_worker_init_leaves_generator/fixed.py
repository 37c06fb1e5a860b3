# Report: https://github.com/TorchDSP/torchsig/pull/361
# Modelled on TorchDSP/torchsig#361 ("Add seed_worker function to initialize random seeds for
# DataLoader"): every worker started with the same seeded generator object of the dataset, so
# the workers synthesised identical signals. Here a token-masking dataset keeps a torch.Generator
# and the DataLoader is handed a worker_init_fn that holds only a docstring, a placeholder where
# the per-worker reseed was meant to go. That empty body is the line to change.
import torch
from torch.utils.data import DataLoader, Dataset


class MaskedTokens(Dataset):
    def __init__(self, sentences: torch.Tensor, mask_id: int = 0, seed: int = 7) -> None:
        self.sentences = sentences
        self.mask_id = mask_id
        self.gen = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return len(self.sentences)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = self.sentences[index].clone()
        hide = torch.rand(tokens.shape, generator=self.gen) < 0.15
        return tokens.masked_fill(hide, self.mask_id), hide


def init_worker(worker_id: int) -> None:
    """Per-worker setup: each worker draws from its own generator."""
    info = torch.utils.data.get_worker_info()
    info.dataset.gen = torch.Generator().manual_seed(info.seed)


class Pretrainer:
    def __init__(self, sentences: torch.Tensor) -> None:
        self.loader = DataLoader(MaskedTokens(sentences), batch_size=4, num_workers=2,
                                 worker_init_fn=init_worker)

    def epoch(self) -> int:
        return sum(int(hide.sum()) for _, hide in self.loader)


if __name__ == "__main__":
    torch.manual_seed(0)
    print(Pretrainer(torch.randint(1, 100, (16, 12))).epoch())
