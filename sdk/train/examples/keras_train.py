"""A Keras 3 training script under switchyard: a small regression model that resumes
from its newest checkpoint, reports its loss and checkpoints when asked. Any Keras
backend works; this one runs on PyTorch's (`KERAS_BACKEND=torch`).

    pip install switchyard-train keras torch
    KERAS_BACKEND=torch python keras_train.py --checkpoint-dir /ckpt
"""

import argparse
import glob
import os

import keras
import numpy as np

from switchyard_train.keras import SwitchyardCallback


def newest_checkpoint(directory: str):
    found = glob.glob(os.path.join(directory, "*.keras"))
    return max(found, key=os.path.getmtime) if found else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint-dir", required=True)
    parser.add_argument("--epochs", type=int, default=1000)
    args = parser.parse_args()
    os.makedirs(args.checkpoint_dir, exist_ok=True)

    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, 8)).astype("float32")
    y = x.sum(axis=1, keepdims=True)

    resume = newest_checkpoint(args.checkpoint_dir)
    if resume:
        model = keras.saving.load_model(resume)
    else:
        model = keras.Sequential(
            [keras.Input((8,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)]
        )
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    checkpoint = os.path.join(args.checkpoint_dir, "switchyard-step{step}.keras")
    model.fit(x, y, batch_size=32, epochs=args.epochs,
              callbacks=[SwitchyardCallback(checkpoint)])


if __name__ == "__main__":
    main()
