# PaddleOCR-style inference model archives added by URL
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
# expect: weights-baked
# expect: remote-add
ADD https://example.com/ocr/v2.0/ch_ppocr_mobile_v2.0_det_infer.tar /ocr/inference/
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "http.server", "8000"]
