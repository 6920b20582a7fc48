"""A PyTorch Lightning training script under switchyard: a small regression model that
resumes from its newest checkpoint, reports its loss, and checkpoints when asked.

    pip install switchyard-train lightning
    python lightning_train.py --checkpoint-dir /ckpt [--devices 2]

With `--devices 2` Lightning starts a second process (DDP on CPU); both acknowledge.
"""

import argparse
import glob
import os

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from switchyard_train.lightning import SwitchyardCallback


class Regression(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def data() -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4096, 8, generator=generator)
    return DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=32)


def newest_checkpoint(directory: str):
    found = glob.glob(os.path.join(directory, "*.ckpt"))
    return max(found, key=os.path.getmtime) if found else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--max-steps", type=int, default=100_000)
    parser.add_argument("--devices", type=int, default=1)
    args = parser.parse_args()

    trainer = pl.Trainer(
        accelerator="cpu",
        devices=args.devices,
        strategy="ddp" if args.devices > 1 else "auto",
        max_steps=args.max_steps,
        callbacks=[SwitchyardCallback(args.checkpoint_dir)],
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
    )
    trainer.fit(Regression(), data(), ckpt_path=newest_checkpoint(args.checkpoint_dir))


if __name__ == "__main__":
    main()
