# A heredoc body that looks like a FROM line is not one.
# expect: base-unpinned@3
FROM 127.0.0.1:5000/servelab/python-base:bookworm
RUN <<SCRIPT
FROM pretend:1
echo "not an instruction"
SCRIPT
CMD ["python3"]
