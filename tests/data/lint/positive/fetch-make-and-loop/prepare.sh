#!/bin/bash
set -e
for pack in punkt stopwords wordnet; do
    timeout 120 python -m nltk.downloader "$pack"
done
