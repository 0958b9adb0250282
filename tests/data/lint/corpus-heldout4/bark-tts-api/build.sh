docker build . -t tts_api
