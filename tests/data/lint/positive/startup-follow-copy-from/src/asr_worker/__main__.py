from huggingface_hub import hf_hub_download

from asr_worker.serve import serve

if __name__ == "__main__":
    path = hf_hub_download(repo_id="ggerganov/whisper.cpp", filename="ggml-base.en.bin")
    serve(path)
