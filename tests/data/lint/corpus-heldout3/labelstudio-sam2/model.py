import os
import sys

import torch
from label_studio_ml.model import LabelStudioMLBase

ROOT_DIR = os.getcwd()  # /sam2: the image starts there
sys.path.insert(0, ROOT_DIR)
from sam2.build_sam import build_sam2  # noqa: E402
from sam2.sam2_image_predictor import SAM2ImagePredictor  # noqa: E402

DEVICE = os.getenv("DEVICE", "cuda")
MODEL_CONFIG = os.getenv("MODEL_CONFIG", "configs/sam2.1/sam2.1_hiera_l.yaml")
MODEL_CHECKPOINT = os.getenv("MODEL_CHECKPOINT", "sam2.1_hiera_large.pt")

if DEVICE == "cuda":
    torch.autocast(device_type="cuda", dtype=torch.bfloat16).__enter__()

checkpoint = os.path.join(ROOT_DIR, "checkpoints", MODEL_CHECKPOINT)
predictor = SAM2ImagePredictor(build_sam2(MODEL_CONFIG, checkpoint, device=DEVICE))


class NewModel(LabelStudioMLBase):
    """Interactive segmentation: keypoints or rectangles from Label Studio become brush masks."""

    def predict(self, tasks, context=None, **kwargs):
        if not context or not context.get("result"):
            return []
        return []
