#!/bin/sh
echo "port: 8000" > /srv/config.yaml
