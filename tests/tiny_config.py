"""The tiny random Marian-sized config the model tests share (hidden 16, 2+2 layers, 4 heads, vocab 99)."""

PAD, EOS = 1, 2
TINY = dict(
    vocab_size=99, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
    decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64,
    pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=PAD, forced_eos_token_id=None,
    dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, init_std=0.3,
)  # fmt: skip
