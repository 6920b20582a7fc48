"""Keras 3: `SwitchyardCallback` for `model.fit`, on any backend.

At each batch end it reports the loss and, when a checkpoint is requested, saves the
model (`model.save` for a `.keras` file, `model.save_weights` for `.weights.h5`),
acknowledges and stops training at that batch.

```python
model.fit(x, y, callbacks=[SwitchyardCallback("/ckpt/switchyard-step{step}.keras")])
```

Importing this module imports `keras`; the rest of `switchyard_train` never does.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import keras  # type: ignore[import-untyped]

from . import session as _default_session
from ._log import LogTransport
from ._session import Session


class SwitchyardCallback(keras.callbacks.Callback):  # type: ignore[misc]
    """Follows switchyard's checkpoint requests in a Keras fit.

    `filepath` names the checkpoint; `{step}` is the optimizer's iteration count, which
    also numbers the reports (it survives a resume from a `.keras` file). The loss is
    reported every `report_every` batches. Under a multi-worker strategy every worker
    saves to its own path: Keras has no collective save to agree on.
    """

    def __init__(
        self, filepath: str, *, report_every: int = 1, session: Optional[Session] = None
    ) -> None:
        super().__init__()
        if not (filepath.endswith(".keras") or filepath.endswith(".weights.h5")):
            raise ValueError(
                f"filepath {filepath!r} must end in .keras (the whole model) or "
                f".weights.h5 (its weights), the two formats Keras saves"
            )
        #: The checkpoint's path; `{step}` is the optimizer's iteration count.
        self.filepath = filepath
        #: Report every this many batches.
        self.report_every = max(report_every, 1)
        # Made now, on the main thread, so SIGTERM asks for a checkpoint from here on.
        #: The session reports and acknowledgements go through.
        self.session = session if session is not None else _default_session()
        #: The last checkpoint this callback saved and acknowledged.
        self.last_checkpoint: Optional[str] = None

    def on_train_begin(self, logs: Optional[Dict[str, Any]] = None) -> None:
        """Keras's progress bar (`verbose=1`, the default `"auto"` on one machine)
        leaves standard output in the middle of a line between batches; the log
        transport's lines then start on a new one."""
        drawing = self.params.get("verbose") in (1, "auto")
        if drawing and isinstance(self.session.transport, LogTransport):
            self.session.transport.newline_first = True

    def on_train_end(self, logs: Optional[Dict[str, Any]] = None) -> None:
        """The progress bar is done: lines go back to starting where they are."""
        if isinstance(self.session.transport, LogTransport):
            self.session.transport.newline_first = False

    def on_train_batch_end(self, batch: int, logs: Optional[Dict[str, Any]] = None) -> None:
        """Reports the loss, then saves, acknowledges and stops if asked."""
        step = int(self.model.optimizer.iterations.numpy())
        if logs and "loss" in logs and step % self.report_every == 0:
            self.session.report(step, logs["loss"])
        if not self.session.checkpoint_requested():
            return
        path = self.filepath.format(step=step)
        if path.endswith(".keras"):
            self.model.save(path)
        else:
            self.model.save_weights(path)
        self.session.acknowledge(path, step=step)
        self.last_checkpoint = path
        self.model.stop_training = True
