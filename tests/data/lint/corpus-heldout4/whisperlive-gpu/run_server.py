import argparse
import os

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", "-p", type=int, default=9090, help="Websocket port to run the server on.")
    parser.add_argument("--backend", "-b", type=str, default="faster_whisper",
                        help='One of "tensorrt", "faster_whisper", "openvino"')
    parser.add_argument("--faster_whisper_custom_model_path", "-fw", type=str, default=None)
    parser.add_argument("--max_clients", type=int, default=4)
    parser.add_argument("--max_connection_time", type=int, default=300)
    parser.add_argument("--cache_path", "-c", type=str, default="~/.cache/whisper-live/")
    parser.add_argument("--omp_num_threads", "-omp", type=int, default=1)
    args = parser.parse_args()

    if "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = str(args.omp_num_threads)

    from whisper_live.server import TranscriptionServer

    # each client names its model size when it connects; the model is loaded then
    server = TranscriptionServer()
    server.run(
        "0.0.0.0",
        port=args.port,
        backend=args.backend,
        faster_whisper_custom_model_path=args.faster_whisper_custom_model_path,
        max_clients=args.max_clients,
        max_connection_time=args.max_connection_time,
        cache_path=args.cache_path,
    )
