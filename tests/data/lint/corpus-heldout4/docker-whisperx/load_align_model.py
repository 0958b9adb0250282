"""Preload the alignment model WhisperX uses for one language (torchaudio bundle or a hub wav2vec2)."""
import sys

import torchaudio
from transformers import Wav2Vec2ForCTC, Wav2Vec2Processor

lang = sys.argv[1]

ALIGN_MODELS_TORCH = {
    "en": "WAV2VEC2_ASR_BASE_960H",
    "fr": "VOXPOPULI_ASR_BASE_10K_FR",
    "de": "VOXPOPULI_ASR_BASE_10K_DE",
}

ALIGN_MODELS_HF = {
    "ja": "jonatasgrosman/wav2vec2-large-xlsr-53-japanese",
    "zh": "jonatasgrosman/wav2vec2-large-xlsr-53-chinese-zh-cn",
    "nl": "jonatasgrosman/wav2vec2-large-xlsr-53-dutch",
}

if lang in ALIGN_MODELS_TORCH:
    bundle = torchaudio.pipelines.__dict__[ALIGN_MODELS_TORCH[lang]]
    align_model = bundle.get_model()  # downloads the checkpoint into TORCH_HOME
    labels = bundle.get_labels()
elif lang in ALIGN_MODELS_HF:
    name = ALIGN_MODELS_HF[lang]
    processor = Wav2Vec2Processor.from_pretrained(name)
    align_model = Wav2Vec2ForCTC.from_pretrained(name)
else:
    raise ValueError(f"Unsupported language: {lang}")
