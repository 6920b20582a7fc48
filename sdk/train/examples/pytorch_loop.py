"""A plain PyTorch training loop under switchyard, no framework: the three calls by hand.
A small regression model resumes from its checkpoint, reports its loss every step, and
when asked saves (to a temporary name, then renamed, so a save cut short never looks
complete), acknowledges and exits.

    pip install switchyard-train torch
    python pytorch_loop.py --checkpoint /ckpt/model.pt
"""

import argparse
import os

import torch
from torch import nn

import switchyard_train as sy


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-steps", type=int, default=100_000)
    args = parser.parse_args()
    sy.session()  # from here on, SIGTERM asks for a checkpoint instead of ending us

    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    if os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        step = saved["step"]

    generator = torch.Generator().manual_seed(step)
    while step < args.max_steps:
        x = torch.randn(32, 8, generator=generator)
        loss = nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        sy.report(step, loss.item())

        if sy.checkpoint_requested():
            partial = args.checkpoint + ".partial"
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
            torch.save(state, partial)
            os.replace(partial, args.checkpoint)
            sy.acknowledge(args.checkpoint, step)
            return


if __name__ == "__main__":
    main()
