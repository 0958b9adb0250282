# negative: weights-baked
# A models/ folder's tokenizer and config files (JSON, vocab, merges, a SentencePiece
# .model) are not weights, nor are tensors of normalisation statistics named so; a code
# package named model/ copied to a source path is not a model folder either.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ARG TOK=models/multilingual-encoder/tok
COPY ${TOK}/tokenizer.json ${TOK}/tokenizer_config.json ${TOK}/vocab.txt \
     ${TOK}/merges.txt ${TOK}/spiece.model ${TOK}/config.json /srv/tokenizer/
COPY assets/feature_mean.pt assets/feature_std.pt assets/target-norm.npy /srv/assets/
COPY model/ /srv/app/domain/
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
