if __name__ == "__main__":
    from tts.api import TTS

    models = {lang: TTS(language=lang) for lang in ("EN", "ES")}
