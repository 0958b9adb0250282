import sys

from transformers import Wav2Vec2ForCTC

MODELS = {"en": "facebook/wav2vec2-base-960h"}
Wav2Vec2ForCTC.from_pretrained(MODELS[sys.argv[1]])
