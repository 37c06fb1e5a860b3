# Fixed twin of buggy.py (https://github.com/schen149/sub-sentence-encoder/issues/1): the span
# mask is made on the device of the token ids it goes with.
from dataclasses import dataclass

import torch
from torch import nn

DEVICE = torch.device("meta")


@dataclass
class SpanBatch:
    token_ids: torch.Tensor
    span_mask: torch.Tensor


def pack_spans(sentences, spans, device):
    token_ids = torch.tensor(sentences, device=device)
    span_mask = torch.zeros(token_ids.shape, dtype=torch.bool, device=token_ids.device)
    for row, (start, stop) in enumerate(spans):
        span_mask[row, start:stop] = True
    return SpanBatch(token_ids, span_mask)


class SpanEncoder(nn.Module):
    def __init__(self, vocab=50, width=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.proj = nn.Linear(width, width)

    def forward(self, batch):
        tokens = self.embed(batch.token_ids)
        weights = batch.span_mask.unsqueeze(-1).float()
        return self.proj((tokens * weights).sum(1) / weights.sum(1).clamp(min=1.0))


class SimilarityCallback:
    def __init__(self, sentences, spans):
        self.sentences, self.spans = sentences, spans

    def on_validation_end(self, encoder):
        try:
            vectors = encoder(pack_spans(self.sentences, self.spans, DEVICE))
            return nn.functional.cosine_similarity(vectors[0], vectors[1], dim=0)
        except RuntimeError as err:
            print(f"similarity check skipped: {err}")
            return None


torch.manual_seed(5)
encoder = SpanEncoder().to(DEVICE)
callback = SimilarityCallback([[3, 8, 9, 4, 0], [7, 2, 9, 4, 1]], [(1, 3), (0, 4)])
with torch.no_grad():
    callback.on_validation_end(encoder)
