# escape=`
# A Windows-style escape directive: the backtick continues lines.
# expect: base-unpinned
FROM python:3.12.4-slim-bookworm
RUN echo one `
    && echo two
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
