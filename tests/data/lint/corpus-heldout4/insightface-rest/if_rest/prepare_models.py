"""Run before the API starts: make sure every configured model is present (downloading it if not)
and built for the chosen backend (ONNX, or a TensorRT engine)."""
from if_rest.core.model_zoo.getter import prepare_backend
from if_rest.settings import Settings

settings = Settings()


def prepare_models(root_dir: str = "/models") -> None:
    m = settings.models
    for model in [m.det_name, m.rec_name, m.ga_name, m.mask_detector]:
        if model is None:
            continue
        print(f"Preparing '{model}' model...")
        prepare_backend(model_name=model, backend_name=m.inference_backend, im_size=m.max_size,
                        force_fp16=m.force_fp16, root_dir=root_dir)
        print(f"'{model}' model ready!")


if __name__ == "__main__":
    prepare_models()
