"""SDXL-Lightning predictor. Cog calls setup() once when the container starts."""
import os
import subprocess
import time

import torch
from cog import BasePredictor, Input, Path
from diffusers import EulerDiscreteScheduler, StableDiffusionXLPipeline

MODEL_CACHE = "model-cache"
WEIGHTS_URL = "https://weights.replicate.delivery/default/sdxl-lightning/sdxl-lightning-4step-fp16.tar"


def fetch_weights(url: str, dest: str) -> None:
    started = time.time()
    print("fetching", url)
    # pget downloads in parallel chunks and untars into dest
    subprocess.check_call(["pget", "-xf", url, dest], close_fds=False)
    print("fetched in", round(time.time() - started, 1), "s")


class Predictor(BasePredictor):
    def setup(self) -> None:
        if not os.path.exists(MODEL_CACHE):
            fetch_weights(WEIGHTS_URL, MODEL_CACHE)
        self.pipe = StableDiffusionXLPipeline.from_pretrained(
            MODEL_CACHE, torch_dtype=torch.float16, variant="fp16"
        ).to("cuda")
        self.pipe.scheduler = EulerDiscreteScheduler.from_config(
            self.pipe.scheduler.config, timestep_spacing="trailing"
        )

    def predict(
        self,
        prompt: str = Input(description="Text prompt"),
        seed: int = Input(default=0),
    ) -> Path:
        generator = torch.Generator("cuda").manual_seed(seed)
        image = self.pipe(prompt, num_inference_steps=4, guidance_scale=0, generator=generator).images[0]
        out = "/tmp/out.png"
        image.save(out)
        return Path(out)
