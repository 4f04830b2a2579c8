#!/usr/bin/env python
"""Train a syntax-aware (or vanilla) Marian translation model with Seq2SeqTrainer.

In the style of transformers' examples/pytorch/translation/run_translation.py; the logic lives in
`hf_syntax_mt.training.script` (also available as `hf-syntax-mt train`). Runs unchanged under accelerate:

    python scripts/train.py --output_dir runs/m30k-pascal \\
        --train_source_conllu .../multi30k-parsed/train.fr.conllu.gz --train_target_file .../multi30k/train.en \\
        --validation_source_conllu .../val.fr.conllu.gz --validation_target_file .../multi30k/val.en \\
        --encoder_pascal_heads 2 0 0 --max_steps 2000 --per_device_train_batch_size 64
    accelerate launch --num_processes 2 --cpu scripts/train.py ...same flags...
    python scripts/train.py --help     # every flag
"""

import sys

from hf_syntax_mt.training.script import main

if __name__ == "__main__":
    sys.exit(main())
