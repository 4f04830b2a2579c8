"""`make demo` (`hf-syntax-mt demo`): vanilla (Marian's architecture) vs PASCAL, same init, on a small built-in language pair whose PP attachment
only the parse tree resolves. `language` (the pair), `diagnostic` (the attachment test set and its score), `run`
(training, scoring, table and figure)."""
