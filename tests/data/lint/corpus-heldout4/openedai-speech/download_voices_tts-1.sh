#!/bin/sh
# piper fetches voices.json and each missing voice (.onnx + .onnx.json) from the rhasspy/piper-voices hub repo
models=${*:-"en_GB-northern_english_male-medium en_US-libritts_r-medium"}
piper --update-voices --data-dir voices --download-dir voices --model x 2> /dev/null
for i in $models ; do
    [ ! -e "voices/$i.onnx" ] && piper --data-dir voices --download-dir voices --model $i < /dev/null > /dev/null
done
