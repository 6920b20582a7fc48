"""Hugging Face `transformers`: `SwitchyardCallback` for `Trainer`.

`on_log` reports the logged training loss; `on_step_end` turns a checkpoint request
into `control.should_save` and `control.should_training_stop`, so the Trainer saves
its usual `checkpoint-<step>` directory and stops; `on_save` acknowledges that
directory on every rank (over HTTP, once per pod: `Session.acknowledge_rank`).

```python
trainer = Trainer(model, args, train_dataset=data, callbacks=[SwitchyardCallback()])
```

Importing this module imports `transformers`; the rest of `switchyard_train` never does.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from . import session as _default_session
from ._session import Session


class SwitchyardCallback(TrainerCallback):
    """Follows switchyard's checkpoint requests in a `Trainer.train` run.

    The loss is reported at each log (`logging_steps`) from the main process. Every
    rank checks for a request and the ranks agree (any rank asked: all save), since
    the Trainer's save is collective.
    """

    def __init__(self, session: Optional[Session] = None) -> None:
        # Made now, on the main thread, so SIGTERM asks for a checkpoint from here on.
        #: The session reports and acknowledgements go through.
        self.session = session if session is not None else _default_session()
        #: The last checkpoint directory this callback acknowledged.
        self.last_checkpoint: Optional[str] = None
        self._saving_for_request = False

    def on_log(
        self,
        args: Any,
        state: Any,
        control: Any,
        logs: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> None:
        """Reports the training loss of a log (evaluation logs carry none)."""
        if state.is_world_process_zero and logs and "loss" in logs:
            self.session.report(state.global_step, logs["loss"])

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        """Asks the Trainer to save now and stop when a checkpoint is requested."""
        if _any_rank(self.session.checkpoint_requested()):
            self._saving_for_request = True
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Acknowledges the checkpoint saved for a request (not the periodic ones)."""
        if not self._saving_for_request:
            return
        self._saving_for_request = False
        # The main process writes the files; the others may only say so once it has.
        _barrier()
        path = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        self.session.acknowledge_rank(
            path, state.global_step, local_rank=args.local_process_index
        )
        self.last_checkpoint = path


def _distributed() -> Any:
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


def _any_rank(flag: bool) -> bool:
    dist = _distributed()
    if dist is None:
        return flag
    import torch

    # The backend's own device: NCCL reduces CUDA tensors only.
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    votes = torch.tensor([1 if flag else 0], device=device)
    dist.all_reduce(votes, op=dist.ReduceOp.MAX)
    return bool(votes.item())


def _barrier() -> None:
    dist = _distributed()
    if dist is not None:
        dist.barrier()
