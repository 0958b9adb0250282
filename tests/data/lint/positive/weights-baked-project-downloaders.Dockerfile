# Projects' own model downloaders (docling-serve's Containerfile, MinerU's image): each
# fetches its layout, OCR and table models from the Hugging Face Hub into the image.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
RUN pip install --no-cache-dir "docling==2.15.1" "mineru==2.1.0"
# expect: weights-baked
RUN docling-tools models download -o /opt/app-root/src/.cache/docling/models layout tableformer
# expect: weights-baked
RUN mineru-models-download -s huggingface -m all
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
