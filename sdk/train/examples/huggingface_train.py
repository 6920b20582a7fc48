"""A Hugging Face `Trainer` script under switchyard: a small GPT-2 (built from its
config, nothing downloaded) learns a repeating token pattern, resumes from its newest
checkpoint, reports its loss and checkpoints when asked.

    pip install switchyard-train transformers accelerate torch
    python huggingface_train.py --output-dir /ckpt
"""

import argparse
import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint

from switchyard_train.huggingface import SwitchyardCallback


class Pattern(torch.utils.data.Dataset):
    """Sequences counting up modulo the vocabulary, from every start."""

    def __init__(self, vocab: int = 64, length: int = 32) -> None:
        self.vocab, self.length = vocab, length

    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int):
        ids = (torch.arange(self.length) + i) % self.vocab
        return {"input_ids": ids, "labels": ids}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--max-steps", type=int, default=100_000)
    args = parser.parse_args()

    config = GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=0, eos_token_id=0)
    training = TrainingArguments(
        output_dir=args.output_dir,
        max_steps=args.max_steps,
        per_device_train_batch_size=16,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",  # switchyard asks for the checkpoints that matter
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=GPT2LMHeadModel(config),
        args=training,
        train_dataset=Pattern(),
        callbacks=[SwitchyardCallback()],
    )
    resume = get_last_checkpoint(args.output_dir) if os.path.isdir(args.output_dir) else None
    trainer.train(resume_from_checkpoint=resume)


if __name__ == "__main__":
    main()
