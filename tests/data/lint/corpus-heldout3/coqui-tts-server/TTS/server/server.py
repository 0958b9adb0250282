"""Small Flask demo server for released Coqui TTS models (`tts-server`)."""
import argparse
import io

from flask import Flask, request, send_file

from TTS.utils.manage import ModelManager
from TTS.utils.synthesizer import Synthesizer


def create_argparser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_name", type=str, default="tts_models/en/ljspeech/tacotron2-DDC",
                        help="name of a released model, as listed by `tts --list_models`")
    parser.add_argument("--model_path", type=str, default=None, help="path to a local model file instead")
    parser.add_argument("--config_path", type=str, default=None)
    parser.add_argument("--port", type=int, default=5002)
    parser.add_argument("--use_cuda", type=lambda v: v.lower() == "true", default=False)
    return parser


def main() -> None:
    args = create_argparser().parse_args()
    manager = ModelManager()
    model_path, config_path = args.model_path, args.config_path
    if args.model_name is not None and not args.model_path:
        # downloads the model into the user data folder unless it is already there
        model_path, config_path, _ = manager.download_model(args.model_name)

    synthesizer = Synthesizer(tts_checkpoint=model_path, tts_config_path=config_path, use_cuda=args.use_cuda)
    app = Flask(__name__)

    @app.route("/api/tts", methods=["GET", "POST"])
    def tts():
        text = request.values.get("text", "")
        wav = synthesizer.tts(text)
        out = io.BytesIO()
        synthesizer.save_wav(wav, out)
        return send_file(out, mimetype="audio/wav")

    app.run(debug=False, host="::", port=args.port)


if __name__ == "__main__":
    main()
