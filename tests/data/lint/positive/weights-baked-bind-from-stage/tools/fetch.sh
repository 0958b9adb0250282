#!/bin/sh
wget -O /srv/model.safetensors https://example.com/org/model.safetensors
