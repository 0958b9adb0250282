# negative: remote-add
# ADD of a git repository fixed to one commit: a full commit id as the ref (with a subdir,
# over SSH with --keep-git-dir), --checksum=<commit> beside a tag, or ?checksum= in the URL.
FROM 127.0.0.1:5000/servelab/python-base:bookworm@sha256:adcc27ecb800aee308f373f63e9801816ea75a459df513d4ce2728d210f7e0e1
ADD https://github.com/example/repo.git#0123456789abcdef0123456789abcdef01234567 /src/a
ADD --keep-git-dir git@github.com:example/repo.git#0123456789abcdef0123456789abcdef01234567:tools /src/b
ADD --checksum=0123456789abcdef0123456789abcdef01234567 https://github.com/example/repo.git#v1.2.0 /src/c
ADD https://github.com/example/repo.git?tag=v1.2.0&checksum=0123456789ab /src/d
USER 10001
HEALTHCHECK --interval=5s CMD curl -fsS http://127.0.0.1:8000/health || exit 1
CMD ["python", "-m", "server"]
