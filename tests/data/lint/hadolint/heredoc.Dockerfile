FROM python:3.11.9-slim
RUN <<EOF
pip install flask==3.0.3
EOF
RUN echo done
