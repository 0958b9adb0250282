def build_sam2_video_predictor(config_file: str, ckpt_path: str, device: str = "cuda"):
    import torch

    state = torch.load(ckpt_path, map_location="cpu", weights_only=True)
    return state
