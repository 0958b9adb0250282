"""Builds the SAM 2.1 video predictor from the checkpoint baked at APP_ROOT/checkpoints."""
import os

from app_conf import APP_ROOT, MODEL_SIZE

CHECKPOINTS = {
    "tiny": ("sam2.1_hiera_tiny.pt", "configs/sam2.1/sam2.1_hiera_t.yaml"),
    "small": ("sam2.1_hiera_small.pt", "configs/sam2.1/sam2.1_hiera_s.yaml"),
    "base_plus": ("sam2.1_hiera_base_plus.pt", "configs/sam2.1/sam2.1_hiera_b+.yaml"),
    "large": ("sam2.1_hiera_large.pt", "configs/sam2.1/sam2.1_hiera_l.yaml"),
}


class InferenceAPI:
    def __init__(self) -> None:
        checkpoint, config = CHECKPOINTS.get(MODEL_SIZE, CHECKPOINTS["base_plus"])
        from sam2.build_sam import build_sam2_video_predictor

        self.predictor = build_sam2_video_predictor(config, os.path.join(APP_ROOT, "checkpoints", checkpoint))
