# source: facebookresearch/sam2 backend.Dockerfile (SAM 2 web demo backend: gunicorn + Flask/Strawberry, SAM 2.1 checkpoints fetched with ADD; patterns)
ARG BASE_IMAGE=pytorch/pytorch:2.5.1-cuda12.1-cudnn9-runtime
ARG MODEL_SIZE=base_plus

# truth: base-unpinned
# truth: root-user
# truth: no-health
FROM ${BASE_IMAGE}

ENV GUNICORN_WORKERS=1
ENV GUNICORN_THREADS=2
ENV GUNICORN_PORT=5000

ENV APP_ROOT=/opt/sam2
ENV PYTHONUNBUFFERED=1
ENV SAM2_BUILD_CUDA=0
ENV MODEL_SIZE=${MODEL_SIZE}

# truth: unpinned-packages
RUN apt-get update && apt-get install -y --no-install-recommends \
    ffmpeg \
    libavutil-dev \
    libavcodec-dev \
    libavformat-dev \
    libswscale-dev \
    pkg-config \
    build-essential \
    libffi-dev

COPY setup.py .
COPY README.md .

# truth: unpinned-packages
RUN pip install --upgrade pip setuptools
# setup.py declares every dependency as a lower bound
# miss: unpinned-packages (pip install -e ".[interactive-demo]" of the local project counts as pinned whatever setup.py declares)
RUN pip install -e ".[interactive-demo]"

# conda's ffmpeg lacks the codecs the demo needs: use the system one
RUN rm /opt/conda/bin/ffmpeg && ln -s /bin/ffmpeg /opt/conda/bin/ffmpeg

RUN mkdir ${APP_ROOT}

COPY demo/backend/server ${APP_ROOT}/server
COPY sam2 ${APP_ROOT}/server/sam2

# truth: remote-add
# truth: weights-baked
ADD https://dl.fbaipublicfiles.com/segment_anything_2/092824/sam2.1_hiera_tiny.pt ${APP_ROOT}/checkpoints/sam2.1_hiera_tiny.pt
# truth: remote-add
# truth: weights-baked
ADD https://dl.fbaipublicfiles.com/segment_anything_2/092824/sam2.1_hiera_small.pt ${APP_ROOT}/checkpoints/sam2.1_hiera_small.pt
# truth: remote-add
# truth: weights-baked
ADD https://dl.fbaipublicfiles.com/segment_anything_2/092824/sam2.1_hiera_base_plus.pt ${APP_ROOT}/checkpoints/sam2.1_hiera_base_plus.pt
# truth: remote-add
# truth: weights-baked
ADD https://dl.fbaipublicfiles.com/segment_anything_2/092824/sam2.1_hiera_large.pt ${APP_ROOT}/checkpoints/sam2.1_hiera_large.pt

WORKDIR ${APP_ROOT}/server

CMD gunicorn --worker-tmp-dir /dev/shm \
    --worker-class gthread app:app \
    --log-level info \
    --access-logfile /dev/stdout \
    --log-file /dev/stderr \
    --workers ${GUNICORN_WORKERS} \
    --threads ${GUNICORN_THREADS} \
    --bind 0.0.0.0:${GUNICORN_PORT} \
    --timeout 60
