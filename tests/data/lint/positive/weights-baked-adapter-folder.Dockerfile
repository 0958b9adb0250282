# A LoRA adapter folder copied to a model path from a build context servelab was not given,
# and served by vLLM's --lora-modules: judged by its name and where it goes (a warning)
FROM vllm/vllm-openai:v0.11.2@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
USER 1000
# expect: weights-baked warning
COPY ./adapters_run4-2ep /models/adapters
# expect: weights-baked warning
COPY lora/ /models/lora/
ENV HF_HUB_OFFLINE=1
HEALTHCHECK --interval=10s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["--model", "/models/base", "--enable-lora", "--lora-modules", "a=/models/adapters", "b=/models/lora"]
