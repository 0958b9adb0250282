# source: numindai/nuextract dockerfiles/NuExtract-2.0-8B.dockerfile (vLLM OpenAI server with the model baked shard by shard; optional rclone sync of the torch.compile cache; patterns, condensed)
# build: docker build . --secret id=hf_token,src=${HOME}/.cache/huggingface/token --file NuExtract-2.0-8B.dockerfile

# CPU=1 selects the CPU image, else the GPU one
ARG CPU
ARG BASE_IMAGE=${CPU:+cpu_image}
ARG BASE_IMAGE=${BASE_IMAGE:-gpu_image}
# truth: base-unpinned
FROM public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:0.10.2 AS cpu_image
# truth: base-unpinned
FROM vllm/vllm-openai:0.10.2 AS gpu_image
# truth: root-user
# miss: no-health (FROM ${BASE_IMAGE} with ENTRYPOINT ./run.sh and no EXPOSE: run.sh is written by RUN cat <<EOT > run.sh, which servelab does not map to a file, so its vllm serve is not read as the start)
FROM ${BASE_IMAGE}

ARG CPU

#### Model download ####
# the token may come from the secret or from this build argument
# truth: secret-in-build
ARG HF_TOKEN
ENV HF_HUB_ENABLE_HF_TRANSFER=1
# truth: unpinned-packages
RUN pip install --no-cache-dir huggingface_hub[hf_transfer]

# one layer per safetensors shard
# truth: weights-baked
RUN --mount=type=secret,id=hf_token \
    HF_TOKEN=${HF_TOKEN:-$(cat /run/secrets/hf_token)} \
    hf download numind/NuExtract-2.0-8B \
        model-00001-of-00004.safetensors && \
    rm -fr /root/.cache/huggingface/xet
# truth: weights-baked
RUN --mount=type=secret,id=hf_token \
    HF_TOKEN=${HF_TOKEN:-$(cat /run/secrets/hf_token)} \
    hf download numind/NuExtract-2.0-8B \
        model-00002-of-00004.safetensors && \
    rm -fr /root/.cache/huggingface/xet
# truth: weights-baked
RUN --mount=type=secret,id=hf_token \
    HF_TOKEN=${HF_TOKEN:-$(cat /run/secrets/hf_token)} \
    hf download numind/NuExtract-2.0-8B \
        model-00003-of-00004.safetensors && \
    rm -fr /root/.cache/huggingface/xet
# truth: weights-baked
RUN --mount=type=secret,id=hf_token \
    HF_TOKEN=${HF_TOKEN:-$(cat /run/secrets/hf_token)} \
    hf download numind/NuExtract-2.0-8B \
        model-00004-of-00004.safetensors && \
    rm -fr /root/.cache/huggingface/xet

# the remaining small files (config, tokenizer, index); the shards are already in the cache
# false: weights-baked (this hf download of the whole repo only adds config and tokenizer files: the shards are already in the cache from the RUNs above, which servelab cannot know)
RUN --mount=type=secret,id=hf_token \
    HF_TOKEN="${HF_TOKEN:-$(cat /run/secrets/hf_token)}" \
    hf download numind/NuExtract-2.0-8B && \
    rm -fr /root/.cache/huggingface/xet
#### End of model download ####

# the CPU image keeps its workspace elsewhere
RUN if [ ! -d /vllm-workspace ]; then ln -s /workspace /vllm-workspace; fi
WORKDIR /vllm-workspace

# an rclone config carries the bucket's access keys; it may be passed here instead of the secret
# miss: secret-in-build (RCONFIG is not a credential name; its value (an rclone config with keys) only says so at build time)
ARG RCONFIG=
ARG BUCKET=compiled-models
ARG CACHE=/vllm-workspace/cache
ARG VLLM_CACHE=/root/.cache/vllm/torch_compile_cache

# truth: unpinned-packages
RUN apt-get update && \
    apt-get install -y --no-install-recommends rclone zstd jq && \
    apt-get clean && rm -rf /var/lib/apt/lists/* && \
    vllm --version 2>/dev/null | tail -n1 > /tmp/vllm_version && \
    mkdir -p "$CACHE" "${VLLM_CACHE}" /root/.config/rclone

RUN --mount=type=secret,id=rclone_config \
    cat <<EOT > set_rclone.sh && chmod +x set_rclone.sh && ./set_rclone.sh
#!/usr/bin/env bash
RCONFIG="\${RCONFIG:-\$(cat /run/secrets/rclone_config 2>/dev/null)}"
if [ -n "\${RCONFIG}" ]; then
    echo "\${RCONFIG}" > /root/.config/rclone/rclone.conf
fi
if rclone config dump --quiet | jq -e '. | length > 0' >/dev/null; then
    echo -n "\$(rclone listremotes | head -n1)${BUCKET}/" > /tmp/remote
    echo "$(cat /tmp/vllm_version)/numind_nuextract-2_0-8b" >> /tmp/remote
fi
EOT

# compile cache from the bucket, when rclone is configured
RUN cat <<EOT > download.sh && chmod +x download.sh && ./download.sh
#!/usr/bin/env bash
if rclone config dump --quiet | jq -e '. | length == 0' >/dev/null; then
    echo "No rclone configuration, disabling cache download" >&2
    exit 0
fi
rclone copy -v --retries 1 "\$(cat /tmp/remote)" "$CACHE"
find "$CACHE" -maxdepth 1 -type f -name '*.tar.zst' -exec tar -I zstdmt -xf {} -C "${VLLM_CACHE}" \;
EOT

RUN cat <<EOT > upload.sh && chmod +x upload.sh
#!/usr/bin/env bash
if rclone config dump --quiet | jq -e '. | length == 0' >/dev/null; then
    exit 0
fi
while ! curl http://127.0.0.1:8000/health >/dev/null 2>&1; do sleep 1; done
for model_dir in "${VLLM_CACHE}"/*/; do
    archive="$CACHE/\$(basename \${model_dir}).tar.zst"
    [ -f "\${archive}" ] || { tar -I zstdmt -cf "\${archive}" -C "${VLLM_CACHE}" "\$(basename \${model_dir})" && rclone copy "\${archive}" "\$(cat /tmp/remote)"; }
done
EOT

RUN cat <<EOT > run.sh && chmod +x run.sh
#!/usr/bin/env bash
./set_rclone.sh
./download.sh
./upload.sh &
SYNC_PID=\$!
trap 'kill -9 \$SYNC_PID 2>/dev/null' EXIT INT TERM

python3 -m vllm.entrypoints.openai.api_server \\
    --model numind/NuExtract-2.0-8B \\
    --chat-template-content-format openai \\
    --generation-config vllm \\
    --tensor-parallel-size ${CPU:-"\$(nvidia-smi --list-gpus | wc -l)"} \\
    ${CPU:+"--max-model-len 8192"} \$@
EOT

ENV VLLM_ENGINE_ITERATION_TIMEOUT_S=300
# the model id resolves from the baked cache
ENV HF_HUB_OFFLINE=1

ENTRYPOINT [ "./run.sh" ]
