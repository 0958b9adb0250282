from typing import List, Optional

from pydantic.v1 import BaseSettings


class Models(BaseSettings):
    inference_backend: str = "onnx"
    det_name: str = "scrfd_10g_gnkps"
    rec_name: str = "glintr100"
    ga_name: Optional[str] = None
    mask_detector: Optional[str] = None
    max_size: List[int] = [640, 640]
    force_fp16: bool = False


class Settings(BaseSettings):
    log_level: str = "INFO"
    models: Models = Models()
