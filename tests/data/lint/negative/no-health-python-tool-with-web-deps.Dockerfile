# negative: no-health
# A Python command-line tool: web frameworks installed do not make `python -m tool` a
# server when its code is not there to show it (only an unread start script or program
# is judged by what the image holds).
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
RUN pip install --no-cache-dir "flask==3.0.3" "click==8.1.7"
USER 10001
ENTRYPOINT ["python", "-m", "labeltool"]
CMD ["--help"]
