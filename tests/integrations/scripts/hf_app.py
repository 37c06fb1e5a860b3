"""A small Hugging Face Trainer run (a BERT built from a config, random weights, no download),
correct unless a fault is named on the command line.

    python hf_app.py [FAULT] [--watch callback|none] [--strict] [--root DIR] [--epochs N]

Faults (each written in the Trainer's own hooks, the line that causes it marked ``# cause:``):
graph-kept, train-in-eval-hook, scheduler-per-batch, param-after-optimizer, unseeded.
"""

import argparse
import ctypes
import os
import resource
import sys

import numpy as np
import torch
from torch import nn
from transformers import (BertConfig, BertForSequenceClassification, Trainer, TrainerCallback,
                          TrainingArguments)

FAULTS = ("graph-kept", "train-in-eval-hook", "scheduler-per-batch", "param-after-optimizer",
          "unseeded")
VOCAB = 64


class Sequences(torch.utils.data.Dataset):
    """Token sequences labelled by whether token 1 occurs more often than token 2."""

    def __init__(self, n, length=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(3, VOCAB, (n, length), generator=g)
        self.ids[:, :4] = torch.randint(1, 3, (n, 4), generator=g)
        self.labels = ((self.ids == 1).sum(1) > (self.ids == 2).sum(1)).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i]),
                "labels": self.labels[i]}


class Collate:
    """Stacks the batch; with ``noisy``, replaces a few tokens at random (numpy's generator)."""

    def __init__(self, noisy=False):
        self.noisy = noisy

    def __call__(self, items):
        batch = {k: torch.stack([item[k] for item in items]) for k in items[0]}
        if self.noisy:
            mask = torch.from_numpy(np.random.rand(*batch["input_ids"].shape) < 0.05)
            batch["input_ids"] = batch["input_ids"].masked_fill(mask, 0)
        return batch


class LossKeepingTrainer(Trainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.losses = []

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        self.losses.append(loss)  # cause: graph-kept
        return loss


class DropoutBackInEval(TrainerCallback):
    def on_prediction_step(self, args, state, control, model=None, **kwargs):
        model.train()  # cause: train-in-eval-hook


class NewHead(TrainerCallback):
    def on_epoch_begin(self, args, state, control, model=None, **kwargs):
        if state.epoch == 0:
            hidden = model.config.hidden_size
            model.classifier = nn.Linear(hidden, 2)  # cause: param-after-optimizer


class FreshNoise(TrainerCallback):
    def on_epoch_begin(self, args, state, control, **kwargs):
        np.random.seed()  # cause: unseeded


def build(fault, args, epochs):
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                        num_labels=2)
    model = BertForSequenceClassification(config)
    training = TrainingArguments(
        output_dir=f"{args.root}/{fault}", num_train_epochs=epochs, per_device_train_batch_size=16,
        per_device_eval_batch_size=16, gradient_accumulation_steps=2, learning_rate=1e-3,
        eval_strategy="epoch", save_strategy="epoch", logging_steps=10, report_to="none",
        use_cpu=True, seed=0, dataloader_num_workers=0, disable_tqdm=True,
        lr_scheduler_type="linear", warmup_steps=2)
    callbacks = {"train-in-eval-hook": [DropoutBackInEval()], "param-after-optimizer": [NewHead()],
                 "unseeded": [FreshNoise()]}.get(fault, [])
    if args.watch == "callback":
        from trainguard.integrations.huggingface import TrainguardCallback

        report = f"{args.report_dir}/{fault}.json" if args.report_dir else None
        callbacks.append(TrainguardCallback(strict=args.strict, report=report))
    optimizers = (None, None)
    if fault == "scheduler-per-batch":
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        optimizers = (optimizer, torch.optim.lr_scheduler.StepLR(optimizer, step_size=1,
                                                                 gamma=0.7))
    cls = LossKeepingTrainer if fault == "graph-kept" else Trainer
    return cls(model=model, args=training, optimizers=optimizers,  # cause: scheduler-per-batch
               train_dataset=Sequences(args.samples), eval_dataset=Sequences(64, seed=1),
               data_collator=Collate(noisy=True), callbacks=callbacks)


def _instrumented(on):
    """Turn callgrind's instrumentation on or off (around the timed part) when
    benchmarks/integrations_overhead.py --count instructions runs this script under callgrind:
    TRAINGUARD_CALLGRIND_LIB names a library whose tg_instrument(int) issues the request.
    Otherwise nothing."""
    lib = os.environ.get("TRAINGUARD_CALLGRIND_LIB")
    if lib:
        ctypes.CDLL(lib).tg_instrument(int(on))


def _cpu_s():
    """CPU seconds this process and its waited-for children (DataLoader workers) have used so
    far (user + system, all threads)."""
    own, children = (resource.getrusage(who)
                     for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("faults", nargs="*", default=["correct"], choices=("correct",) + FAULTS)
    parser.add_argument("--watch", choices=("callback", "none"), default="callback")
    parser.add_argument("--strict", action="store_true")
    parser.add_argument("--root", default="hf_out")
    parser.add_argument("--report-dir", help="write each run's findings to DIR/FAULT.json")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--no-resume", dest="resume", action="store_false",
                        help="skip the resume from the last checkpoint after the correct run")
    args = parser.parse_args(argv)
    for fault in args.faults:
        trainer = build(fault, args, args.epochs)
        cpu = _cpu_s()
        _instrumented(True)
        result = trainer.train()
        _instrumented(False)
        cpu = _cpu_s() - cpu
        print(f"{fault}: train_runtime {result.metrics['train_runtime']:.3f} s, "
              f"{trainer.state.global_step} optimizer steps, cpu_s {cpu:.3f}")
        if fault == "correct" and args.resume:
            # resume from the Trainer's own checkpoint, one more epoch
            build(fault, args, args.epochs + 1).train(resume_from_checkpoint=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
