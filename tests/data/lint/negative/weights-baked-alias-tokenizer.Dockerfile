# negative: weights-baked
# Tokenizer, processor and config classes imported under an alias fetch no weights: the
# alias is resolved to the class it names (from transformers import AutoTokenizer as T).
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ENV HF_HOME=/srv/hf \
    TOKENIZER=acme-llm/chat-7b
RUN python -c "from transformers import AutoTokenizer as T; import os; \
    t = T.from_pretrained(os.environ['TOKENIZER'], revision='0123456789abcdef0123456789abcdef01234567'); \
    print(len(t))"
RUN python -c "import transformers as tf; tf.AutoConfig.from_pretrained('acme-llm/chat-7b')"
RUN python - <<'PY'
from transformers import (
    AutoProcessor as Proc,
    AutoModel,
)
from transformers import AutoImageProcessor as IP, AutoFeatureExtractor as FE
Proc.from_pretrained("acme-vision/clip-base")
IP.from_pretrained("acme-vision/clip-base")
FE.from_pretrained("acme-speech/whisper-small")
PY
ENV HF_HUB_OFFLINE=1
USER 10001
EXPOSE 8000
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
