# orchmem: one image for the worker, beat and flower services of docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 HF_HUB_OFFLINE=1
WORKDIR /app
# The CPU build of torch first: the default wheel pulls several GB of CUDA.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
COPY config config
COPY models models
COPY tasks tasks
COPY worker worker
COPY examples examples
# /data is the root: private like every folder orchmem makes (`orchmem check`).
RUN pip install . && useradd --create-home orchmem && mkdir -p /data && chown orchmem /data \
    && chmod 700 /data
USER orchmem
VOLUME /data
ENV ORCHMEM_ROOT=/data
CMD ["orchmem", "--help"]
