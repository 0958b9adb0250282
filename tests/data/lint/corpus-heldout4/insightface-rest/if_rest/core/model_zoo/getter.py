import json
import os

from if_rest.core.utils.download import download, download_from_gdrive

with open(os.path.join(os.path.dirname(__file__), "models.json")) as f:
    MODELS = json.load(f)


def prepare_backend(model_name, backend_name, im_size, force_fp16=False, root_dir="/models"):
    onnx_path = os.path.join(root_dir, "onnx", model_name, f"{model_name}.onnx")
    if not os.path.exists(onnx_path):
        entry = MODELS[model_name]
        os.makedirs(os.path.dirname(onnx_path), exist_ok=True)
        if entry.get("dl_type") == "google":
            download_from_gdrive(entry["link"], onnx_path)
        else:
            download(entry["link"], onnx_path)
    if backend_name == "trt":
        from if_rest.core.converters.onnx_to_trt import convert_onnx

        engine = os.path.join(root_dir, "trt-engines", model_name, f"{model_name}.plan")
        if not os.path.exists(engine):
            convert_onnx(onnx_path, engine_file_path=engine, force_fp16=force_fp16)
        return engine
    return onnx_path
