"""PyTorch Lightning: `SwitchyardCallback` reports the training loss, and at the batch
end where a checkpoint is requested saves through `trainer.save_checkpoint`,
acknowledges on every rank (over HTTP, once per pod: `Session.acknowledge_rank`) and
stops the trainer.

```python
trainer = Trainer(callbacks=[SwitchyardCallback("/ckpt")], ...)
```

It subclasses `lightning.pytorch.Callback`, or `pytorch_lightning.Callback` where only
the older package is installed. Importing this module imports Lightning; the rest of
`switchyard_train` never does.
"""

from __future__ import annotations

import os
from typing import Any, Optional

try:
    import lightning.pytorch as pl
    from lightning.pytorch.utilities.exceptions import SIGTERMException
except ImportError:  # the package's older name
    import pytorch_lightning as pl  # type: ignore[no-redef]
    from pytorch_lightning.utilities.exceptions import (  # type: ignore[assignment]
        SIGTERMException,
    )

from . import session as _default_session
from ._session import Session


class SwitchyardCallback(pl.Callback):
    """Follows switchyard's checkpoint requests in a Lightning fit.

    `dirpath` is where the requested checkpoint goes (the trainer's `default_root_dir`
    when None), named by `filename` with the global step. The loss is reported every
    `trainer.log_every_n_steps` steps from global rank 0 (one series per job); every
    rank checks for a request, and the ranks agree (any rank asked: all save), since
    saving is a collective operation.
    """

    def __init__(
        self,
        dirpath: Optional[str] = None,
        *,
        filename: str = "switchyard-step{step}.ckpt",
        session: Optional[Session] = None,
    ) -> None:
        super().__init__()
        #: Where requested checkpoints are saved.
        self.dirpath = dirpath
        #: Their file name; `{step}` is the global step.
        self.filename = filename
        # Made now, on the main thread, so SIGTERM asks for a checkpoint from here on.
        #: The session reports and acknowledgements go through.
        self.session = session if session is not None else _default_session()
        #: The last checkpoint this callback saved and acknowledged.
        self.last_checkpoint: Optional[str] = None

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Reports the loss, then saves, acknowledges and stops if asked."""
        step = trainer.global_step
        if trainer.is_global_zero and step % max(trainer.log_every_n_steps, 1) == 0:
            loss = _loss_of(outputs)
            if loss is not None:
                self.session.report(step, loss)
        asked = self.session.checkpoint_requested()
        if trainer.strategy.reduce_boolean_decision(asked, all=False):
            self._checkpoint(trainer)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        """Lightning ends a fit on SIGTERM at the next batch boundary; when that comes
        before this callback's own check, the checkpoint is saved here instead."""
        if isinstance(exception, SIGTERMException) and self.session.checkpoint_requested():
            self._checkpoint(trainer)

    def _checkpoint(self, trainer: Any) -> None:
        directory = self.dirpath if self.dirpath is not None else trainer.default_root_dir
        path = os.path.join(directory, self.filename.format(step=trainer.global_step))
        # Collective: every rank returns once the file is written (rank 0 writes it).
        trainer.save_checkpoint(path)
        self.session.acknowledge_rank(path, trainer.global_step, local_rank=trainer.local_rank)
        self.last_checkpoint = path
        trainer.should_stop = True


def _loss_of(outputs: Any) -> Optional[Any]:
    # `training_step` returns the loss tensor or a dict holding it; None under manual
    # optimisation, where there is nothing to report.
    if isinstance(outputs, dict):
        outputs = outputs.get("loss")
    if outputs is None:
        return None
    return outputs.detach() if hasattr(outputs, "detach") else outputs
