#!/bin/sh
set -e
mkdir -p models/facerestore
curl -fsSL -o models/facerestore/codeformer.pth https://github.com/sczhou/CodeFormer/releases/download/v0.1.0/codeformer.pth
