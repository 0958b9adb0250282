import numpy as np


def resample_audio(audio, recorded_sample_rate, target_sample_rate, target_channels=-1, is_mono=None, dtype="int16"):
    return np.asarray(audio)
