# Model classes and pipeline() imported under an alias are still weights loads; an alias is
# judged by what it names, not by its own name (AutoModel imported as MyTokenizer).
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ENV HF_HOME=/srv/hf
# expect: weights-baked
RUN python -c "from transformers import AutoModelForCausalLM as LM; LM.from_pretrained('acme-llm/chat-7b')"
# expect: weights-baked
RUN python -c "import transformers as tf; tf.AutoModel.from_pretrained('acme-llm/embed-small')"
# expect: weights-baked
RUN python - <<'PY'
from transformers import AutoModel as MyTokenizer
MyTokenizer.from_pretrained("acme-llm/embed-small")
PY
ENV HF_HUB_OFFLINE=1
USER 10001
EXPOSE 8000
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
