# An apt source list downloaded whole from the host whose key is trusted unchecked
FROM ubuntu:22.04@sha256:a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1
# expect: download-unverified
RUN wget -qO - https://packages.lunarg.com/lunarg-signing-key-pub.asc | apt-key add - \
    && wget -qO /etc/apt/sources.list.d/lunarg-vulkan-jammy.list https://packages.lunarg.com/vulkan/lunarg-vulkan-jammy.list \
    && apt-get update && apt-get install -y --no-install-recommends vulkan-sdk=1.3.296.0~rc1-1lunarg22.04-1
USER 10001
HEALTHCHECK CMD ["vulkaninfo", "--summary"]
CMD ["vulkaninfo"]
