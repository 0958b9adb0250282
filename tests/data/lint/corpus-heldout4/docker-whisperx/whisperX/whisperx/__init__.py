def load_model(whisper_arch, device, **kwargs):
    from faster_whisper import WhisperModel

    return WhisperModel(whisper_arch, device=device)
