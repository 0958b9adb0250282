#!/bin/sh
set -ex
curl -s -L https://github.com/Kitware/CMake/releases/download/v${CMAKE_VERSION}/cmake-${CMAKE_VERSION}-linux-x86_64.tar.gz | tar -zx -C /usr --strip-components 1
curl -fsSL https://deb.nodesource.com/setup_20.x | bash -
