import json

from websockets.sync.server import serve


class TranscriptionServer:
    RATE = 16000

    def handle(self, websocket) -> None:
        options = json.loads(websocket.recv())
        model_size = options.get("model", "small")
        from faster_whisper import WhisperModel

        model = WhisperModel(model_size)
        for message in websocket:
            websocket.send(json.dumps({"segments": [], "model": model_size, "bytes": len(message)}))
        del model

    def run(self, host, port=9090, **kwargs) -> None:
        with serve(self.handle, host, port) as server:
            server.serve_forever()
